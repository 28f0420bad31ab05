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

A scope larger than the whole budget is never held. Held, it would evict every other scope
and be evicted by the next one's load, so each of its searches read it all from SQL again
and built its matrix, and every other scope's next search did too (an agent of 131k chunks
searched 47-51 s each time, issue 43). Instead its one load finds it too large (asking SQL
for one vector more than fits, so it never reads more than the budget) and drops what it
read, and its searches from then on read it from SQL a page at a time (`ScopeVectorPages`,
STREAM_PAGE vectors) and rank each page as it comes: exact hits, memory bounded by one page
per search in flight beside the budget, nothing else evicted, a cost per search of one read
of the scope (no matrix kept, nothing built; logged once per scope, counted in `streamed`).
A streamed search that finds the scope fits again (vectors deleted, the budget raised on a
restart) makes the next search load it; so does an eviction of it (a tenant's caches going
stale). The scope is not resident, so `search` and `keys` see none of its vectors: a new
memory is checked against such a scope's by text and frame only; CheckIndex counts them as
held (its searches read SQL's own). A source without pages (the tests' fakes) is read whole
for each such search, still never held. Raise `index_cache_bytes` to hold such a scope again.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from episodic.domain.ports.indexes import ScopeVectorPages, ScopeVectorSource, VectorIndex
from episodic.domain.recall import Hit, Scope, Vector

LOAD_TRIES = 3
# A scope of at most this many stored floats (4 MB: 4,096 vectors of 256, 2,730 of 384) is
# searched on the event loop: at most ~0.2-0.4 ms (exactly, ~0.04-0.09 µs a vector), less
# than a hop to a thread costs while the loop runs a hybrid search's word half. A 2,000-chunk
# agent's hybrid SearchKnowledge on the loop against on a thread, one server, alternating
# blocks: 2.62 / 2.38 against 2.86 / 2.77 ms p50 (2026-11-28). Larger scopes search off it.
INLINE_SEARCH_FLOATS = 1 << 20
SCOPE_OVERHEAD = 256  # bytes a resident scope costs beyond its vectors (an empty one too)
KEY_OVERHEAD = 100  # a key string and its slot
# A scope too large to hold is read this many vectors at a time (~13 MiB at 384 dimensions).
STREAM_PAGE = 8192
# A scope this small is added to the index on the loop: the hop to a thread and back
# (~0.4 ms, more on a busy loop) cost more than adding a few hundred vectors.
INLINE_FILL = 256
_log = logging.getLogger(__name__)
Query = NDArray[np.float32]


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
    """Implements the `ScopeIndex` port (domain/ports/indexes.py) over a `VectorIndex`."""

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
        self._too_large: set[Scope] = set()  # larger than the budget: searched as read, never held
        self.loads = 0
        self.evictions = 0
        self.streamed = 0  # searches of scopes too large to hold

    # --- reads ---------------------------------------------------------------------------

    async def ensure(self, scope: Scope) -> None:
        """Makes `scope` resident (loading it from SQL once, whoever else is waiting); a scope
        too large to hold is left to `nearest` (see the module's docstring)."""
        if scope in self._resident:
            self._resident.move_to_end(scope)
            return
        if scope in self._too_large:
            return
        task = self._loading.get(scope)
        if task is None:
            task = self._loading[scope] = asyncio.create_task(self._load(scope))
        await asyncio.shield(task)  # a cancelled caller leaves the load to the others

    def preload(self, scope: Scope) -> None:
        """Starts making `scope` resident without waiting for it: a turn asks as soon as it
        knows its user, so the load runs beside its append and query embedding, not after."""
        if scope in self._resident or scope in self._too_large or scope in self._loading:
            return
        task = self._loading[scope] = asyncio.create_task(self._load(scope))
        task.add_done_callback(_retrieved)  # a failed load is raised to the search that waits

    def search(self, scope: Scope, vector: Sequence[float], k: int) -> list[Hit]:
        """Of a resident scope (call `ensure` first); safe off the event loop."""
        return self.index.search(scope, vector, k)

    async def nearest(self, scope: Scope, vector: Sequence[float], k: int) -> list[Hit]:
        await self.ensure(scope)
        if scope in self._too_large:
            return await self._streamed(scope, vector, k)
        return await nearest_in(self.index, scope, vector, k)

    def too_large(self, scope: Scope) -> bool:
        """True while the scope is known to be larger than the budget (searched as read)."""
        return scope in self._too_large

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
        self._too_large = {scope for scope in self._too_large if not where(scope)}
        gone = [scope for scope in self._resident if where(scope)]
        for scope in gone:
            self._drop(scope)
        return len(gone)

    # --- internals -----------------------------------------------------------------------

    async def _load(self, scope: Scope) -> None:
        try:
            for _ in range(LOAD_TRIES - 1):
                generation = self._generation.setdefault(scope, 0)
                read = await self._read_fitting(scope)
                if self._generation.get(scope) != generation:
                    continue
                if read is None:
                    return
                if len(read[0]) <= INLINE_FILL:
                    self._fill(scope, *read)
                else:  # off the event loop: a large scope's matrix takes milliseconds to build
                    await asyncio.to_thread(self._fill, scope, *read)
                if self._generation.get(scope) == generation:
                    self._resident_now(scope)
                    return
            async with self._lock:
                read = await self._read_fitting(scope)
                if read is None:
                    return
                self._fill(scope, *read)
                self._resident_now(scope)
        finally:
            self._loading.pop(scope, None)
            self._generation.pop(scope, None)

    async def _read_fitting(self, scope: Scope) -> tuple[list[str], list[Vector]] | None:
        """The whole scope from SQL, or None (marked too large) when it does not fit: a
        source with pages is asked for one vector more than fits, so finding that out holds
        no more than the budget, however large the scope."""
        if isinstance(self._source, ScopeVectorPages):
            room = max(0, (self._max_bytes - SCOPE_OVERHEAD) // self._vector_bytes)
            keys, vectors = await self._source.scope_vectors_upto(scope, room + 1)
        else:
            keys, vectors = await self._source.scope_vectors(scope)
        if self._fits(len(keys)):
            return keys, vectors
        self._hold_none(scope, len(keys))
        return None

    def _fits(self, vectors: int) -> bool:
        return SCOPE_OVERHEAD + vectors * self._vector_bytes <= self._max_bytes

    def _hold_none(self, scope: Scope, read: int) -> None:
        self._too_large.add(scope)
        _log.warning(
            "a scope's vectors are larger than its whole index cache budget, so they are not held: "
            "each search of it reads them from SQL a page at a time; raise index_cache_bytes",
            extra={"vectors_at_least": read, "budget_bytes": self._max_bytes},
        )

    async def _streamed(self, scope: Scope, vector: Sequence[float], k: int) -> list[Hit]:
        """The scope's k nearest, its vectors read from SQL a page at a time and ranked as
        they come: at most one page held beside the best k so far."""
        self.streamed += 1
        query = np.asarray(vector, dtype=np.float32)
        query = query / (np.linalg.norm(query) or 1.0)
        best: list[tuple[float, str]] = []
        read = 0
        if isinstance(self._source, ScopeVectorPages):
            after = ""
            while True:
                keys, vectors = await self._source.scope_vector_page(scope, after, STREAM_PAGE)
                read += len(keys)
                best = await asyncio.to_thread(_best_of, best, keys, vectors, query, k)
                if len(keys) < STREAM_PAGE:
                    break
                after = keys[-1]
        else:
            keys, vectors = await self._source.scope_vectors(scope)
            read = len(keys)
            best = await asyncio.to_thread(_best_of, best, keys, vectors, query, k)
        if self._fits(read):
            self._too_large.discard(scope)  # shrunk, or the budget grew: the next search loads it
        return [Hit(key, score) for score, key in best]

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

    streamed = 0  # every scope is held: none is searched page by page

    def __init__(self, index: VectorIndex) -> None:
        self.index = index

    async def ensure(self, scope: Scope) -> None:
        return None

    def preload(self, scope: Scope) -> None:
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

    def too_large(self, scope: Scope) -> bool:
        return False

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


def _best_of(
    best: list[tuple[float, str]], keys: Sequence[str], vectors: Sequence[Vector], query: Query, k: int
) -> list[tuple[float, str]]:
    """The k best (cosine, key) of `best` and this page's, best first (ties: the earlier)."""
    if not keys or k <= 0:
        return best
    matrix = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1)
    scores = np.clip((matrix @ query) / np.where(norms > 0, norms, 1.0), -1.0, 1.0)
    top = np.argpartition(-scores, k - 1)[:k] if len(scores) > k else np.arange(len(scores))
    page = [(float(scores[i]), keys[i]) for i in top.tolist()]
    return heapq.nlargest(k, [*best, *page], key=lambda hit: hit[0])


async def nearest_in(index: VectorIndex, scope: Scope, vector: Sequence[float], k: int) -> list[Hit]:
    if index.count(scope) * len(vector) <= INLINE_SEARCH_FLOATS:
        return index.search(scope, vector, k)
    return await asyncio.to_thread(index.search, scope, vector, k)


def _retrieved(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()
