"""The one owner of what recall and BuildContext can see in this process: the vector index
and every cache derived from SQL (working sets, remembered recall answers, episode facts,
PII policies).

Every write that changes what they show goes through here and only here:
- `commit(write, changes)` for writes that touch the index (a digest ready, erasure,
  retention): the SQL write and the index update run under one lock, so a digest landing
  during an erasure can neither leave vectors behind nor bring them back;
- `apply(change)` for a change already committed that needs no such ordering (a close, an
  agent update), and for changes committed by another replica (the change feed's door).
Caches register with `watch` and hear every change; the index is updated first.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Protocol, TypeVar

from episodic.domain.changes import (
    Change,
    Committed,
    EpisodesRemoved,
    EpisodeVectors,
    MemoriesRemoved,
    MemoryVectors,
)
from episodic.domain.ports import VectorIndex
from episodic.domain.recall import IndexedVector
from episodic.state.unindex import unindex_episodes, unindex_memories

T = TypeVar("T")


class Watcher(Protocol):
    """A cache that drops or refreshes what a change makes stale."""

    def changed(self, change: Change) -> None: ...


class Visibility:
    """Implements the `ChangeOwner` port (domain/ports.py)."""

    def __init__(
        self, *, index: VectorIndex, memory_index: VectorIndex | None = None, watchers: Sequence[Watcher] = ()
    ) -> None:
        self._index = index
        self._memory_index = memory_index  # promoted memories, keyed by memory id
        self._watchers = list(watchers)
        self._lock = asyncio.Lock()

    def watch(self, watcher: Watcher) -> None:
        self._watchers.append(watcher)

    async def commit(
        self, write: Callable[[], Awaitable[T]], changes: Callable[[T], Iterable[Change]]
    ) -> Committed[T]:
        """Runs the SQL write, then applies the changes it made, with no other index writer
        in between. A write that raises changes nothing."""
        async with self._lock:
            result = await write()
            removed = sum(self.apply(change) for change in changes(result))
        return Committed(result, removed)

    def apply(self, change: Change) -> int:
        """Applies a committed change to the index, then to every cache; returns how many
        vectors it removed."""
        removed = self._apply_to_index(change)
        for watcher in self._watchers:
            watcher.changed(change)
        return removed

    async def load(self, batches: AsyncIterator[list[IndexedVector]], *, memories: bool = False) -> int:
        """Fills the episode (or memory) index from SQL at start-up; returns how many
        vectors it loaded."""
        index = self._memory_index if memories and self._memory_index is not None else self._index
        loaded = 0
        async with self._lock:
            async for batch in batches:
                by_scope: dict[object, list[IndexedVector]] = {}
                for item in batch:
                    by_scope.setdefault(item.scope, []).append(item)
                for items in by_scope.values():
                    index.add(items[0].scope, [v.key for v in items], [v.vector for v in items])
                loaded += len(batch)
        return loaded

    def _apply_to_index(self, change: Change) -> int:
        if isinstance(change, MemoryVectors | MemoriesRemoved) and self._memory_index is None:
            return 0  # a process without memories (some tools and tests)
        if isinstance(change, MemoryVectors):
            assert self._memory_index is not None
            self._memory_index.remove(change.scope, change.keys)  # a re-embedding's old ones
            self._memory_index.add(change.scope, change.keys, change.vectors)
            return 0
        if isinstance(change, MemoriesRemoved):
            assert self._memory_index is not None
            return unindex_memories(self._memory_index, change.memories)
        if isinstance(change, EpisodeVectors):
            unindex_episodes(self._index, [(change.scope, change.episode_id)])  # a re-embedding's old ones
            self._index.add(change.scope, change.keys, change.vectors)
            return 0
        if isinstance(change, EpisodesRemoved):
            return unindex_episodes(self._index, change.episodes)
        return 0
