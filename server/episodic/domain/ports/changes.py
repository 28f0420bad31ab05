"""How committed changes reach every cache and replica: the one change owner, the feed, signals and
leadership of once-per-cluster jobs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from episodic.domain.changes import Change, Committed, Declared, Recorded

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class FeedEntry:
    """One row of the change feed: `change` None means this release cannot read it
    (`refused` says why)."""

    seq: int
    origin: str
    change: Change | None
    refused: str = ""


@dataclass(frozen=True, slots=True)
class FeedPage:
    pruned_through: int  # every row up to here is gone
    entries: list[FeedEntry]


class ChangeLog(Protocol):
    """The change feed as the tail and the pruner read it."""

    origin: str  # this process: what it wrote, it has applied already

    async def head(self) -> int: ...

    async def after(self, seq: int, limit: int) -> FeedPage: ...

    async def prune(self, through: int) -> int: ...


class ChangeFeed(Protocol):
    """Where committed changes go for the other replicas (store/feed.py). The writer inserts
    a declared write's rows in the write's own transaction (`Declared`), tagged with `origin`;
    once such a write committed, `published` wakes the other replicas."""

    origin: str  # this process

    def published(self) -> None: ...


class ChangeOwner(Protocol):
    """The one owner of what recall and BuildContext can see (the vector indexes and every
    cache derived from SQL): every write that changes it commits through here, and what
    other replicas committed arrives here from the change feed."""

    async def commit(
        self,
        write: Callable[[Declared[T]], Awaitable[Recorded[T]]],
        changes: Callable[[T], Iterable[Change]],
        *,
        exclusive: bool = True,
    ) -> Committed[T]:
        """Runs a unit of work: `write` is handed the declared `changes` and passes them with
        its SQL operation to the writer, which records them in the change feed in the
        operation's own transaction; then they are applied here. `exclusive`: atomically with
        respect to every other index writer (writes that touch an index)."""
        ...

    async def apply_foreign(self, changes: Sequence[Change]) -> None:
        """Changes other replicas committed, in feed order."""
        ...

    def resync(self) -> None:
        """Everything held may be stale: reload on next use."""
        ...


class Signals(Protocol):
    """Wake-ups between replicas (PostgreSQL LISTEN/NOTIFY; in-process on SQLite): a hint
    that something changed, never the change itself, so a lost one costs latency, never
    correctness (whoever listens also polls)."""

    def subscribe(self, channel: str, callback: Callable[[str], None]) -> None:
        """`callback(payload)` runs on the event loop for every notification on `channel`,
        this process's own included."""
        ...

    def notify(self, channel: str, payload: str) -> None:
        """Fire and forget, after the change committed; payload at most 7,000 bytes and
        never user content."""
        ...


class Leadership(Protocol):
    """Who runs a once-per-cluster job (idle reaper, retention, feed pruning): one replica
    at a time, taken over by another when it dies. Decided by the database, never by wall
    clocks, so replicas whose clocks disagree cannot both lead."""

    async def holds(self, job: str) -> bool:
        """True when this replica holds (or has just taken) the cluster-wide lock for `job`;
        False while another replica holds it or the database is out of reach."""
        ...
