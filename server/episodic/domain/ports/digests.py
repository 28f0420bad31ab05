"""Digests: an episode's summary and vectors, made in the background once it closes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol

from episodic.domain.changes import Declared, Recorded
from episodic.domain.model import Message
from episodic.domain.ports.episodes import ReadBatch
from episodic.domain.recall import Digest, Hit, Scope, Vector


class DigestReads(Protocol):
    """What recall reads of digests; `batch`: the trip a turn's searches share (None: its own)."""

    async def recent(
        self,
        scope: Scope,
        limit: int,
        after: datetime | None,
        before: datetime | None,
        batch: ReadBatch | None = None,
    ) -> list[Digest]: ...

    async def ready_among(
        self,
        scope: Scope,
        episode_ids: Sequence[str],
        after: datetime | None,
        before: datetime | None,
        batch: ReadBatch | None = None,
    ) -> dict[str, Digest]: ...

    async def pending_count(self, scope: Scope, batch: ReadBatch | None = None) -> int: ...

    async def lexical(
        self, scope: Scope, query: str, limit: int, batch: ReadBatch | None = None
    ) -> list[Hit]: ...


class DigestStore(DigestReads, Protocol):
    """The digester's work queue, the stored vectors, and the reads recall needs."""

    async def claim_due(self, now: datetime, limit: int, lease: timedelta) -> list[Digest]: ...

    async def stale(self, model: str, limit: int) -> list[Digest]: ...

    async def count_stale(self, model: str) -> int: ...

    async def transcript(self, digest: Digest) -> list[Message]: ...

    async def save_ready(
        self, digest: Digest, vectors: Sequence[Vector], body: str, declared: Declared[bool]
    ) -> Recorded[bool]:
        """Stores a made digest with its vectors and full text; False (nothing written) when
        its row is gone: the episode was erased or deleted while it was being made."""
        ...

    async def save_failed(self, digest: Digest, declared: Declared[bool]) -> Recorded[bool]:
        """Records a failed attempt; False (nothing written) when its row is gone (erased)."""
        ...

    async def get(self, tenant_id: str, episode_id: str) -> Digest | None: ...


class DigestBacklog(Protocol):
    """What `episodic reindex` has ahead of it, over every tenant."""

    async def count_outstanding(self, model: str) -> int:
        """Digests not READY, and READY ones whose vectors `model` did not make."""
        ...


class DigestWaiter(Protocol):
    """The digester as the episode service sees it: nudged after a close, awaited on
    request."""

    def wake(self) -> None: ...

    async def wait_settled(self, tenant_id: str, episode_id: str, timeout: float) -> Digest | None: ...
