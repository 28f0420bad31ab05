"""A vector index as a cache of SQL, per scope.

A scope's vectors are read from SQL the first time a search needs them, kept while the
scope is used, and dropped least-recently-used first when the cache holds more than its
byte budget. Start-up reads nothing, so it takes the same time at 1k or 1M vectors, and a
replica's memory follows its hot scopes, not the corpus.

Keeping a resident scope right is the change owner's job (`state/visibility.py`): it
applies this process's writes directly and refreshes a scope from SQL when another replica
changed it. A load races those changes: each change to a scope that is loading bumps its
generation, and a load whose generation moved reads again (the last try runs under the
owner's lock, so a scope that never stops changing still loads).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol

from episodic.domain.ports import ScopeVectorSource, VectorIndex
from episodic.domain.recall import Hit, Scope

LOAD_TRIES = 3
# A scope of at most this many stored floats (4 MB: 4,096 vectors of 256, 2,730 of 384) is
# searched on the event loop: at most ~0.2-0.4 ms (exactly, ~0.04-0.09 µs a vector), less
# than a hop to a thread costs while the loop runs a hybrid search's word half. A 2,000-chunk
# agent's hybrid SearchKnowledge on the loop against on a thread, one server, alternating
# blocks: 2.62 / 2.38 against 2.86 / 2.77 ms p50 (2026-11-28). Larger scopes search off it.
INLINE_SEARCH_FLOATS = 1 << 20
SCOPE_OVERHEAD = 256  # bytes a resident scope costs beyond its vectors (an empty one too)
KEY_OVERHEAD = 100  # a key string and its slot


class CachedIndex(Protocol):
    """What the change owner keeps in step with SQL: a `VectorIndex` and which of its
    scopes are resident."""

    index: VectorIndex

    def touched(self, scope: Scope) -> bool: ...

    def resized(self, scope: Scope) -> None: ...

    def evict(self, where: Callable[[Scope], bool]) -> int: ...

    async def refresh(
        self, scope: Scope, items: Sequence[str], remove: Callable[[VectorIndex], object]
    ) -> None: ...


class ResidentScopes:
    """Implements the `ScopeIndex` port (domain/ports.py) over a `VectorIndex`."""

    def __init__(
        self,
        index: VectorIndex,
        source: ScopeVectorSource,
        *,
        dimension: int,
        max_bytes: int,
        lock: asyncio.Lock,
    ) -> None:
        self.index = index
        self._source = source
        self._vector_bytes = dimension * 4 + KEY_OVERHEAD
        self._max_bytes = max_bytes
        self._lock = lock  # the owner's: the last load try runs under it
        self._resident: OrderedDict[Scope, int] = OrderedDict()  # scope -> bytes, LRU first
        self._bytes = 0
        self._loading: dict[Scope, asyncio.Task[None]] = {}
        self._generation: dict[Scope, int] = {}  # of loading scopes only
        self.loads = 0
        self.evictions = 0

    # --- reads ---------------------------------------------------------------------------

    async def ensure(self, scope: Scope) -> None:
        """Makes `scope` resident (loading it from SQL once, whoever else is waiting)."""
        if scope in self._resident:
            self._resident.move_to_end(scope)
            return
        task = self._loading.get(scope)
        if task is None:
            task = self._loading[scope] = asyncio.create_task(self._load(scope))
        await asyncio.shield(task)  # a cancelled caller leaves the load to the others

    def search(self, scope: Scope, vector: Sequence[float], k: int) -> list[Hit]:
        """Of a resident scope (call `ensure` first); safe off the event loop."""
        return self.index.search(scope, vector, k)

    async def nearest(self, scope: Scope, vector: Sequence[float], k: int) -> list[Hit]:
        await self.ensure(scope)
        return await nearest_in(self.index, scope, vector, k)

    def keys(self, scope: Scope) -> set[str]:
        return self.index.keys(scope)

    def holds_nothing(self, scope: Scope) -> bool:
        return scope in self._resident and self.index.count(scope) == 0

    def is_resident(self, scope: Scope) -> bool:
        return scope in self._resident

    def resident(self) -> list[Scope]:
        return list(self._resident)

    @property
    def held_bytes(self) -> int:
        return self._bytes

    def loaded(self) -> tuple[int, int]:
        """(resident scopes, their vectors), from the accounting alone: O(1) for metrics."""
        scopes = len(self._resident)
        return scopes, (self._bytes - scopes * SCOPE_OVERHEAD) // self._vector_bytes

    # --- the owner's side ----------------------------------------------------------------

    def touched(self, scope: Scope) -> bool:
        """A change reached `scope`: True when it is resident (the caller updates it);
        a load in flight will read again."""
        if scope in self._generation:
            self._generation[scope] += 1
        return scope in self._resident

    async def refresh(
        self, scope: Scope, items: Sequence[str], remove: Callable[[VectorIndex], object]
    ) -> None:
        """Another replica changed these episodes' (or memories') vectors: a resident scope
        gets SQL's current ones (`remove` takes out what it held of them)."""
        if not self.touched(scope):
            return
        keys, vectors = await self._source.item_vectors(scope, items)
        if scope in self._resident:  # not evicted while SQL was read
            remove(self.index)
            self.index.add(scope, keys, vectors)
            self.resized(scope)

    def resized(self, scope: Scope) -> None:
        """After the owner added or removed vectors of a resident scope."""
        if scope in self._resident:
            self._account(scope, self._size(scope))
            self._evict_over_budget(keep=scope)

    def evict(self, where: Callable[[Scope], bool]) -> int:
        """Drops every resident scope `where` accepts (they load again on next use), and
        makes loads in flight of such scopes read again."""
        for scope in self._generation:
            if where(scope):
                self._generation[scope] += 1
        gone = [scope for scope in self._resident if where(scope)]
        for scope in gone:
            self._drop(scope)
        return len(gone)

    # --- internals -----------------------------------------------------------------------

    async def _load(self, scope: Scope) -> None:
        try:
            for _ in range(LOAD_TRIES - 1):
                generation = self._generation.setdefault(scope, 0)
                keys, vectors = await self._source.scope_vectors(scope)
                if self._generation.get(scope) != generation:
                    continue
                # Off the event loop: a large scope's matrix takes milliseconds to build.
                await asyncio.to_thread(self._fill, scope, keys, vectors)
                if self._generation.get(scope) == generation:
                    self._resident_now(scope)
                    return
            async with self._lock:
                keys, vectors = await self._source.scope_vectors(scope)
                self._fill(scope, keys, vectors)
                self._resident_now(scope)
        finally:
            self._loading.pop(scope, None)
            self._generation.pop(scope, None)

    def _fill(self, scope: Scope, keys: Sequence[str], vectors: Sequence[Sequence[float]]) -> None:
        """The scope's vectors, replacing whatever a racing eviction or an earlier try left."""
        stale = self.index.keys(scope)
        if stale:
            self.index.remove(scope, list(stale))
        self.index.add(scope, keys, vectors)

    def _resident_now(self, scope: Scope) -> None:
        self.loads += 1
        self._account(scope, self._size(scope))
        self._evict_over_budget(keep=scope)

    def _size(self, scope: Scope) -> int:
        return SCOPE_OVERHEAD + len(self.index.keys(scope)) * self._vector_bytes

    def _account(self, scope: Scope, size: int) -> None:
        self._bytes += size - self._resident.get(scope, 0)
        self._resident[scope] = size
        self._resident.move_to_end(scope)

    def _evict_over_budget(self, keep: Scope) -> None:
        while self._bytes > self._max_bytes and len(self._resident) > 1:
            oldest = next(iter(self._resident))
            if oldest == keep:
                self._resident.move_to_end(oldest)
                continue
            self._drop(oldest)
            self.evictions += 1

    def _drop(self, scope: Scope) -> None:
        self._bytes -= self._resident.pop(scope, 0)
        keys = self.index.keys(scope)
        if keys:
            self.index.remove(scope, list(keys))


class WholeIndex:
    """Every scope resident, filled by `Visibility.load`: for tools and tests that hold a
    whole index in memory."""

    def __init__(self, index: VectorIndex) -> None:
        self.index = index

    async def ensure(self, scope: Scope) -> None:
        return None

    def search(self, scope: Scope, vector: Sequence[float], k: int) -> list[Hit]:
        return self.index.search(scope, vector, k)

    async def nearest(self, scope: Scope, vector: Sequence[float], k: int) -> list[Hit]:
        return await nearest_in(self.index, scope, vector, k)

    def keys(self, scope: Scope) -> set[str]:
        return self.index.keys(scope)

    def holds_nothing(self, scope: Scope) -> bool:
        return self.index.count(scope) == 0

    def resident(self) -> list[Scope]:
        return self.index.scopes()

    def loaded(self) -> tuple[int, int]:
        scopes = self.index.scopes()
        return len(scopes), sum(self.index.count(scope) for scope in scopes)

    def touched(self, scope: Scope) -> bool:
        return True

    def resized(self, scope: Scope) -> None:
        return None

    def evict(self, where: Callable[[Scope], bool]) -> int:
        gone = [scope for scope in self.index.scopes() if where(scope)]
        for scope in gone:
            self.index.remove(scope, list(self.index.keys(scope)))
        return len(gone)

    async def refresh(
        self, scope: Scope, items: Sequence[str], remove: Callable[[VectorIndex], object]
    ) -> None:
        raise RuntimeError("a whole index has no SQL source to refresh from")


IndexCache = ResidentScopes | WholeIndex


async def nearest_in(index: VectorIndex, scope: Scope, vector: Sequence[float], k: int) -> list[Hit]:
    if index.count(scope) * len(vector) <= INLINE_SEARCH_FLOATS:
        return index.search(scope, vector, k)
    return await asyncio.to_thread(index.search, scope, vector, k)
