"""The one owner of what recall and BuildContext can see in this process: the vector indexes
(per-scope caches of SQL, state/index_cache.py) and every cache derived from SQL (working
sets, remembered recall answers, episode facts, PII policies).

Every change to what they show goes through here and only here:
- `commit(write, changes)`: this process's write, a unit of work. The write is handed its
  declared changes (`Declared`) and passes them, with its SQL operation, to the writer,
  which records them in the change feed in the operation's own transaction
  (store/writer.py, store/feed.py) and hands back a `Recorded`; then they are applied here.
  Writes that touch an index run `exclusive`ly (under one lock with every other index
  writer), so a digest landing during an erasure can neither leave vectors behind nor bring
  them back.
- `apply_foreign(changes)`: what other replicas committed, read from the feed by the tail
  (workers/feed.py), under the same lock. A resident scope they touched is refreshed from
  SQL rather than patched, so whatever order writes land in, the cache converges on SQL.
- `resync()`: this replica fell behind a pruned feed: everything is reloaded on next use.
Caches register with `watch` and hear every change; the indexes are updated first.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from episodic.domain.changes import (
    CachesStale,
    Change,
    Committed,
    Declared,
    DocumentsRemoved,
    EpisodesRemoved,
    EpisodeVectors,
    KnowledgeVectors,
    MemoriesRemoved,
    MemoryVectors,
    Recorded,
    UserErased,
)
from episodic.domain.erasure import user_hash
from episodic.domain.ports.changes import ChangeFeed
from episodic.domain.recall import Scope
from episodic.state.index_cache import CachedIndex
from episodic.state.unindex import unindex_episodes, unindex_memories

T = TypeVar("T")


class Watcher(Protocol):
    """A cache that drops or refreshes what a change makes stale."""

    def changed(self, change: Change) -> None: ...


class NoFeed:
    """For processes and tests without a change feed (nobody tails it: no one to wake)."""

    origin = ""

    def published(self) -> None:
        pass


class Visibility:
    """Implements the `ChangeOwner` port (domain/ports/changes.py)."""

    def __init__(
        self,
        *,
        index: CachedIndex,
        memory_index: CachedIndex | None = None,
        knowledge_index: CachedIndex | None = None,
        feed: ChangeFeed | None = None,
        lock: asyncio.Lock | None = None,
        watchers: Sequence[Watcher] = (),
    ) -> None:
        self._index = index
        self._memory_index = memory_index  # promoted memories, keyed by memory id
        self._knowledge_index = knowledge_index  # agents' documents, keyed "<document>#<n>"
        self._feed: ChangeFeed = feed if feed is not None else NoFeed()
        self._watchers = list(watchers)
        self._lock = lock if lock is not None else asyncio.Lock()

    def watch(self, watcher: Watcher) -> None:
        self._watchers.append(watcher)

    async def commit(
        self,
        write: Callable[[Declared[T]], Awaitable[Recorded[T]]],
        changes: Callable[[T], Iterable[Change]],
        *,
        exclusive: bool = True,
    ) -> Committed[T]:
        """Runs the SQL write with its declared changes (the writer records them in the feed,
        in its transaction), then applies what it recorded here; `exclusive`: with no other
        index writer in between. A write that raises changes nothing."""
        async with self._lock if exclusive else _unlocked():
            recorded = await write(Declared(changes, self._feed.origin))
            if recorded.in_feed:
                self._feed.published()
            removed = sum(self.apply(change) for change in recorded.changes)
        return Committed(recorded.result, removed)

    def apply(self, change: Change) -> int:
        """Applies this process's committed change to the indexes, then to every cache;
        returns how many vectors it removed from resident scopes."""
        removed = self._apply_to_index(change)
        self._tell_watchers(change)
        return removed

    async def apply_foreign(self, changes: Sequence[Change]) -> None:
        """Changes other replicas committed, in feed order: resident scopes they touched are
        refreshed from SQL, then every cache hears them. The lock is taken per change, so a
        burst from one tenant does not hold this replica's own index writes back."""
        for change in changes:
            async with self._lock:
                await self._refresh(change)
                if isinstance(change, UserErased):  # the row cannot say what went
                    change = CachesStale(change.tenant_id, change.user_hash)
                self._tell_watchers(change)

    def resync(self) -> None:
        """Every resident scope and cached answer may be stale (a pruned feed position)."""
        for index in self._indexes():
            index.evict(lambda _: True)
        self._tell_watchers(CachesStale(None))

    def _tell_watchers(self, change: Change) -> None:
        for watcher in self._watchers:
            watcher.changed(change)

    def _indexes(self) -> list[CachedIndex]:
        others = (self._memory_index, self._knowledge_index)
        return [self._index, *[index for index in others if index is not None]]

    def _apply_to_index(self, change: Change) -> int:
        memories, knowledge = self._memory_index, self._knowledge_index
        if isinstance(change, KnowledgeVectors) and knowledge is not None and knowledge.touched(change.scope):
            unindex_episodes(knowledge.index, [(change.scope, change.document_id)])  # the old chunks
            knowledge.index.add(change.scope, change.keys, change.vectors)
            knowledge.resized(change.scope)
            return 0
        if isinstance(change, DocumentsRemoved) and knowledge is not None:
            return _remove(knowledge, change.documents, unindex_episodes)  # keys are "<document>#<n>" too
        if isinstance(change, MemoryVectors) and memories is not None and memories.touched(change.scope):
            memories.index.remove(change.scope, change.keys)  # a re-embedding's old ones
            memories.index.add(change.scope, change.keys, change.vectors)
            memories.resized(change.scope)
        elif isinstance(change, MemoriesRemoved) and memories is not None:
            return _remove(memories, change.memories, unindex_memories)
        elif isinstance(change, EpisodeVectors) and self._index.touched(change.scope):
            unindex_episodes(self._index.index, [(change.scope, change.episode_id)])  # re-embedding
            self._index.index.add(change.scope, change.keys, change.vectors)
            self._index.resized(change.scope)
        elif isinstance(change, EpisodesRemoved):
            return _remove(self._index, change.episodes, unindex_episodes)
        return 0

    async def _refresh(self, change: Change) -> None:
        memories, knowledge = self._memory_index, self._knowledge_index
        if isinstance(change, KnowledgeVectors) and knowledge is not None:
            pair = [(change.scope, change.document_id)]
            await knowledge.refresh(change.scope, [change.document_id], lambda i: unindex_episodes(i, pair))
        elif isinstance(change, EpisodeVectors):
            pair = [(change.scope, change.episode_id)]
            await self._index.refresh(change.scope, [change.episode_id], lambda i: unindex_episodes(i, pair))
        elif isinstance(change, MemoryVectors) and memories is not None:
            pairs = [(change.scope, key) for key in change.keys]
            await memories.refresh(change.scope, change.keys, lambda i: unindex_memories(i, pairs))
        elif isinstance(change, UserErased):
            for index in self._indexes():
                index.evict(lambda s: s.tenant_id == change.tenant_id and _hash(s) == change.user_hash)
        else:
            self._apply_to_index(change)  # removals need no read; the rest touch no index


def _remove(
    cache: CachedIndex,
    pairs: Sequence[tuple[Scope, str]],
    unindex: Callable[[Any, Sequence[tuple[Scope, str]]], int],
) -> int:
    resident = [(scope, item) for scope, item in pairs if cache.touched(scope)]
    removed = unindex(cache.index, resident)
    for scope in {scope for scope, _ in resident}:
        cache.resized(scope)
    return removed


def _hash(scope: Scope) -> str:
    return user_hash(scope.tenant_id, scope.user_id)


@contextlib.asynccontextmanager
async def _unlocked() -> AsyncIterator[None]:
    yield
