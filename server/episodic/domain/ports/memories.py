"""Long-term memories and session data."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from episodic.domain.changes import Declared, Recorded
from episodic.domain.memories import Memory, MemoryKind, MemoryState, SessionData
from episodic.domain.ports.episodes import ReadBatch
from episodic.domain.recall import Scope, Vector
from episodic.domain.transfer import ErasureWatch


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """Which of one scope's memories a listing or search may return. Expired memories are
    never returned; superseded ones only when asked."""

    kinds: frozenset[MemoryKind] = frozenset()
    topics: frozenset[str] = frozenset()  # any of them (exact, as stored)
    entities: frozenset[str] = frozenset()  # any of them (exact, as stored)
    after: datetime | None = None  # created_at (EVENT: event_time) >= after
    before: datetime | None = None  # created_at (EVENT: event_time) < before
    include_superseded: bool = False
    state: MemoryState | None = None
    episode_id: str = ""  # held by (PENDING) or extracted from this episode


@dataclass(frozen=True, slots=True)
class MemoryWrite:
    """One transaction of memory changes, planned by the use case: rows to insert (with
    their vectors), rows to replace whole (merges, promotions, updates, supersessions:
    matched by tenant + memory_id), and ids to delete."""

    insert: Sequence[tuple[Memory, Vector | None]] = ()
    replace: Sequence[tuple[Memory, Vector | None]] = ()  # vector None: keep the stored one
    delete: Sequence[tuple[str, str]] = ()  # (tenant_id, memory_id)
    # (tenant_id, episode_id) this write belongs to (pending memories, a promotion): it applies
    # only if the episode still exists, so an erasure in between leaves no memory behind
    episode: tuple[str, str] | None = None
    # the user's erasures known when the work began (CreateMemories, an import's memories):
    # another one committed since refuses the write, ABORTED (USER_ERASED)
    watch: ErasureWatch | None = None


class MemoryStore(Protocol):
    """Long-term memories and their stored vectors (the FAISS index is a cache of them)."""

    async def write(
        self, change: MemoryWrite, declared: Declared[frozenset[str]]
    ) -> Recorded[frozenset[str]]:
        """All of it in one transaction, or none of it; NotFound when `change.episode` is gone;
        the result: the ids of `replace` and `delete` whose row was gone (erased or deleted
        meanwhile: it stays gone, and no change of it reaches the index or the feed);
        ABORTED (USER_ERASED) when the user was erased since `change.watch`. Ordered with an
        erasure of the inserted memories' users: one committing after it is refused."""
        ...

    async def erasure_watch(self, tenant_id: str, user_id: str) -> ErasureWatch:
        """The user's erasures committed so far, for a write's `watch` (taken as its work begins)."""
        ...

    async def get(self, tenant_id: str, memory_id: str) -> Memory | None:
        """Also expired and superseded ones (the caller decides)."""
        ...

    async def get_many(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, Memory]: ...

    async def vectors_of(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, Vector]: ...

    async def page(
        self,
        scope: Scope,
        where: MemoryFilter,
        now: datetime,
        after: tuple[datetime, str] | None,
        limit: int,
        batch: ReadBatch | None = None,
    ) -> list[Memory]:
        """Newest first by (created_at, memory_id); `after` is the last of the previous page;
        `batch`: the trip a turn's searches share (None: its own)."""
        ...

    async def among(
        self,
        scope: Scope,
        memory_ids: Sequence[str],
        where: MemoryFilter,
        now: datetime,
        batch: ReadBatch | None = None,
    ) -> dict[str, Memory]:
        """Those of these ids in the scope that pass the filter."""
        ...

    async def same_text(self, scope: Scope, text_keys: Sequence[str]) -> list[Memory]:
        """PROMOTED, not superseded, not expired memories whose text_key is one of these."""
        ...

    async def same_frame(self, scope: Scope, frame_keys: Sequence[str]) -> list[Memory]:
        """PROMOTED, not superseded, not expired memories whose frame_key is one of these."""
        ...

    async def pending(
        self, tenant_id: str, episode_id: str, batch: ReadBatch | None = None
    ) -> list[tuple[Memory, Vector | None]]:
        """The PENDING memories an episode holds, oldest first, with their vectors."""
        ...

    async def touch(self, tenant_id: str, memory_ids: Sequence[str], at: datetime) -> None:
        """Records a recall (last_recalled_at) of these memories."""
        ...

    async def stale(self, model: str, limit: int) -> list[Memory]:
        """Memories (any state) whose vector was made with another model or is missing."""
        ...

    async def expired(self, now: datetime, limit: int) -> list[Memory]:
        """Memories past their expiry, or unused (neither updated nor recalled) for longer
        than their agent's retention_days."""
        ...


class SessionDataStore(Protocol):
    async def get(self, tenant_id: str, episode_id: str, batch: ReadBatch | None = None) -> SessionData:
        """Version 0 when never written; `batch`: the trip a turn's searches share."""
        ...

    async def update(
        self, tenant_id: str, episode_id: str, change: Callable[[SessionData], SessionData]
    ) -> SessionData:
        """Reads the row for update, applies `change` (which may raise), writes the result,
        in one transaction."""
        ...
