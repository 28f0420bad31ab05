"""The change feed without a database: `FakeChangeFeed`, the `ChangeLog` and `ChangeFeed`
ports in memory, held to the SQL feed (store/feed.py) by tests/contracts/test_change_feed.py.

`record` is what the writer's `append` does in a write's transaction: the changes become rows
by the feed's own `encode` (one scope per row, an erased user's rows, older ones included,
giving way to one `user_erased` marker) and are read back by its `decode`, so an entry holds
exactly what the SQL feed hands the tail (vectors are never carried). Sequence numbers are
never reused, as with SQLite's AUTOINCREMENT and PostgreSQL's sequences, pruned or not."""

from __future__ import annotations

from collections.abc import Iterable

from episodic.domain.changes import Change
from episodic.domain.ports.changes import FeedEntry, FeedPage, Signals
from episodic.store.feed import CHANNEL, FEED_VERSION, FeedRow, decode, encode


class FakeChangeFeed:
    """One process's view of the feed: what every replica recorded, oldest first.

    `entries` and `pruned_through` are plain attributes, so a test may also set rows this
    release cannot read (`FeedEntry(seq, origin, None, refused)`) or a pruned mark directly.
    `wakeups` counts `published`; given `signals`, it also notifies the feed's channel, as the
    SQL feed does."""

    def __init__(self, origin: str = "fake", signals: Signals | None = None) -> None:
        self.origin = origin
        self.entries: list[FeedEntry] = []
        self.pruned_through = 0  # every row up to here is gone
        self.wakeups = 0
        self._signals = signals
        self._last_seq = 0  # the last seq handed out
        self._owners: dict[int, tuple[str, str]] = {}  # seq -> (tenant, user hash) of its row

    def record(self, changes: Iterable[Change], origin: str | None = None) -> bool:
        """The rows of `changes`, tagged with `origin` (this feed's unless named), as a write
        commits them; True when there were any."""
        rows, erased = encode(changes)
        if not rows:
            return False
        by = self.origin if origin is None else origin
        if erased:
            self.entries = [e for e in self.entries if self._owners.get(e.seq) not in erased]
        for row in rows:
            seq = self._next_seq()
            self._owners[seq] = (row["tenant_id"], row["user_hash"])
            read = FeedRow(seq, FEED_VERSION, row["kind"], row["tenant_id"], row["body"], by)
            self.entries.append(FeedEntry(seq, by, decode(read)))
        return True

    def published(self) -> None:
        self.wakeups += 1
        if self._signals is not None:
            self._signals.notify(CHANNEL, self.origin)

    async def head(self) -> int:
        return max((e.seq for e in self.entries), default=0)

    async def after(self, seq: int, limit: int) -> FeedPage:
        later = sorted((e for e in self.entries if e.seq > seq), key=lambda e: e.seq)
        return FeedPage(self.pruned_through, later[:limit])

    async def prune(self, through: int) -> int:
        kept = [e for e in self.entries if e.seq > through]
        gone = len(self.entries) - len(kept)
        self.entries = kept
        self._owners = {seq: owner for seq, owner in self._owners.items() if seq > through}
        self.pruned_through = max(self.pruned_through, through)
        return gone

    def _next_seq(self) -> int:
        self._last_seq = max(self._last_seq, *(e.seq for e in self.entries), 0) + 1
        return self._last_seq
