"""Each tenant's share of one server: how many calls it may start per second, hold in
flight, run at once, keep streaming, leave unsent, and how many memories it may write per
second and how many document chunks (each one embedded too), and how many bytes of imports
it may send per second and hold at once (an import's part is held whole until checked). A tenant over its
share is refused (`OverShare`) without touching anyone else's.
Pure: the accounting that holds the counters is state/shares.py."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from enum import Enum

from episodic.errors import AtCapacity


class Share(Enum):
    """Each share, as the QuotaFailure subject and the refusal metric's label name it."""

    RATE = "requests_per_second"
    RPCS = "rpcs_in_flight"
    STREAMS = "open_streams"
    UNSENT = "unsent_response_bytes"
    WATCHERS = "watchers"
    MEMORY_WRITES = "memory_writes_per_second"
    KNOWLEDGE_CHUNKS = "knowledge_chunks_per_second"
    SEARCH_TIME = "inspector_search_seconds_per_second"
    IMPORT_BYTES = "import_bytes_per_second"
    IMPORT_HELD = "import_bytes_held"
    SERVER_RPCS = "server_rpcs_in_flight"


@dataclass(frozen=True, slots=True)
class ShareLimits:
    """Per tenant, the same for every tenant; `server_rpcs` is the whole server's cap, a
    safety net sized above any one tenant's share."""

    rate_per_second: float = 200.0
    rate_burst: int = 400
    rpcs: int = 64  # in flight: running, waiting for a turn, or streaming
    # Running at once; the tenant's others wait in line (no CPU held). Two: one call on the
    # event loop while the other waits for SQL or the model. Every turn shares the one loop,
    # so a quiet tenant's call is slowed by what the others run beside it: 4 let a flood run
    # 3-4 beside it (bench-fairness, issue 43 finding 9); 2 hold it to 1 while they contend.
    active: int = 2
    streams: int = 32  # server streams open (BuildContext, WatchEpisode)
    unsent_bytes: int = 32 * 1024 * 1024
    watchers: int = 64
    memory_writes_per_second: float = 20.0
    memory_writes_burst: int = 200
    # Chunks of documents created or updated: each is embedded, on the server's one bulk
    # embedding thread. A knowledge base is loaded in bulk, rarely: a large burst, and a
    # rate that leaves that thread to others (MiniLM embeds ~150-300 chunks/s on 2 cores).
    knowledge_chunks_per_second: float = 100.0
    knowledge_chunks_burst: int = 20_000
    # ImportUser's records, counted as they arrive: a part is held whole in memory until it is
    # checked (domain/transfer.py: 64 MiB a part at most), then written. The rate bounds the
    # tenant's import writes, the burst lets two largest parts through at once, and `held`
    # bounds what the tenant's imports running at once hold (two largest parts).
    import_bytes_per_second: float = 4 * 1024 * 1024
    import_bytes_burst: int = 128 * 1024 * 1024
    import_held_bytes: int = 128 * 1024 * 1024
    server_rpcs: int = 1000


class OverShare(AtCapacity):
    """A tenant asked for more than its share; `retry_after` is when trying again can
    succeed (seconds), `share` which share was spent."""

    reason = "OVER_SHARE"

    def __init__(self, share: Share, limit: float, retry_after: float) -> None:
        super().__init__(f"over this tenant's share of {share.value} ({_number(limit)}); retry later")
        self.share = share
        self.limit = limit
        self.retry_after = retry_after


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


@dataclass(slots=True)
class TokenBucket:
    """`rate` tokens a second up to `burst`. `reserve` spends tokens now, or ahead of time
    (the bucket goes into debt) when the caller will wait for them. A reservation larger
    than the burst is granted from a full bucket, so a big batch is slowed, never refused
    forever."""

    rate: float
    burst: float
    tokens: float
    updated: float

    @classmethod
    def full(cls, rate: float, burst: float, now: float) -> TokenBucket:
        return cls(rate, burst, burst, now)

    def reserve(self, n: float, now: float, max_wait: float) -> float:
        """How long until `n` tokens are the caller's. Reserved when that is at most
        `max_wait` seconds; otherwise nothing is spent (the caller is refused)."""
        self._refill(now)
        missing = min(n, self.burst) - self.tokens
        wait = 0.0 if missing <= 0 else (missing / self.rate if self.rate > 0 else math.inf)
        if wait <= max_wait:
            self.tokens -= n
        return wait

    def _refill(self, now: float) -> None:
        elapsed = max(0.0, now - self.updated)
        self.tokens = min(self.burst, self.tokens + elapsed * self.rate)
        self.updated = now

    def full_at(self, now: float) -> bool:
        """Whether the bucket is full again (its tenant's entry can be forgotten)."""
        self._refill(now)
        return self.tokens >= self.burst


class Unmetered:
    """The WriteQuota and ImportQuota of a service run outside a server (tools, tests):
    nothing is refused."""

    def write_memories(self, tenant_id: str, count: int) -> None:
        return None

    def write_chunks(self, tenant_id: str, count: int) -> None:
        return None

    @asynccontextmanager
    async def importing(self, tenant_id: str) -> AsyncIterator[UnmeteredImport]:
        yield UnmeteredImport()


class UnmeteredImport:
    async def received(self, size: int) -> None:
        return None

    def written(self) -> None:
        return None
