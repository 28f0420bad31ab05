"""Exact cosine search over vectors partitioned by scope (tenant, agent, user).

Isolation by construction: every scope has its own matrix (`Shard`), and a search reads
only the shard of the scope it names. There is no global index to post-filter, so a search
can neither see another scope's vectors nor come back short because they crowded it out.

MEASUREMENTS (AMD EPYC, 2 cores, load average ~2 from other work, so tails are noisy;
dim 384, k=5, faiss-cpu 1.15.1 AVX2, numpy 2.4 with OpenBLAS). Kernels alone, one query on
one scope of n random unit vectors, µs p50/p99:

    n                   10        100       1k        10k            100k
    IndexFlatIP       6/13      10/19     43/77     735/2.8k      12.8k/21.6k
    numpy X @ q       8/19      11/22     38/89     185/8.5k       6.0k/13.1k
    faiss.knn         4/6        7/12     39/77     773/16.0k     11.7k/32.0k
    the same with OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1:
    IndexFlatIP       5/8        9/12     41/69     448/756        8.5k/10.5k
    numpy X @ q       8/14      11/17     40/85     382/555       10.9k/11.9k
    faiss.knn         4/7        7/10     39/67     380/511        8.0k/15.2k
    HNSW M=32 efSearch=64     -         -       54/97     195/267          464/648

`FaissVectorIndex.search` as built here (query passed as a list, as an Embedder returns it;
includes converting and normalizing it, the locks and the Hits; `episodic-lab bench-index
--sizes "" --scope-sizes 10,100,1000,10000,100000`):

    n                  10        100       1k        10k            100k
    search           27/75      32/72     68/164    471/997       8.6k/21.7k

Spread over scopes like the SearchEpisodes benchmark (`episodic-lab bench-index`; U =
min(10k, N/10) scopes, adds of 2 vectors round-robin, 2000 searches of random scopes; "add
s" is the time spent in `add`):

    vectors   scopes  add s  RSS MiB  p50 µs  p99 µs
    1k           100    0.0       50   27-28  83-142
    100k      10,000    2.4      218      30  68-109
    1M        10,000  21-24    ~2000   41-43  90-110

(two runs; the whole benchmark takes about a minute.)

The 1M vectors themselves are 1,465 MiB. Built scope by scope in one `add` each (as when
scopes load from SQL) the index takes 1,591 MiB; grown 2 vectors at a time, ~1.9 GiB (growth slack of up to
25% per scope, and the allocator keeps freed smaller arrays).

Decisions drawn from them:

* Storage is a plain float32 matrix per scope, not a faiss index object. 10k scopes x 100
  vectors as IndexIDMap2(IndexFlatIP) cost 56 MB more than bare arrays, built slower (10.8 s
  vs 7.4 s) and searched at p99 8-12 ms (faiss's OpenMP threads for a single query, on busy
  cores) against 20-130 µs. A matrix also makes removal O(1) (the last row fills the hole;
  IndexFlat.remove_ids compacts the whole index).
* The kernel is faiss.knn (SIMD dot products fused with the top-k heap, GIL released): the
  fastest below 1k rows, which is where almost every scope is. It runs a single query on one
  thread up to ~8k rows, but from ~10k rows switches to OpenMP and then took 16 ms instead of
  0.3 ms on busy cores, so larger scopes are searched in blocks of 4096 rows and merged.
  One thread per query is also what a server answering many queries at once wants.
* Exact search up to COARSE_ROWS rows a scope (above, a large agent's knowledge: a coded
  first pass picks candidates that are scored exactly, shard.py). Exact search costs ~0.04 µs per vector while
  a scope fits the CPU cache (0.4 ms at 10k) and ~0.09 µs beyond (8.6 ms at 100k), so a
  scope stays within 1 ms up to ~20k vectors and within the 5 ms SearchEpisodes budget up to
  ~50k. One user's scope holds tens to a few thousand episodes, so no expected scope comes
  near. HNSW would pay off only above ~50k vectors in one scope, and is no free lunch:
  recall@5 at 100k was 0.99 on vectors of low intrinsic dimension (like real embeddings) but
  0.12 on isotropic random ones, it builds at ~0.3 ms per vector on one core (31 s for 100k),
  and it cannot remove (it would need tombstones and periodic rebuilds). If scopes that large
  appear (`count(scope)`), add it per shard above that size.

Locking: one lock guards the dict of shards, held only to look a shard up, create or drop
it; each shard has its own lock, held for any read or write of it. The dict lock is never
held while waiting for a shard lock, so the two cannot deadlock. Searches of different
scopes run in parallel (faiss releases the GIL); a search and a write of one scope take
turns, which costs microseconds at typical sizes.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from episodic.domain.recall import Hit, Scope
from episodic.index.shard import Shard, VectorIn, VectorsIn, unit_query, unit_rows


class FaissVectorIndex:
    """The `VectorIndex` port: one exact cosine index per scope. Keys are upserted: adding a
    key again replaces its vector. Vectors are normalized on the way in, so scores are cosine
    similarities even for a caller that forgot to normalize."""

    def __init__(self, dim: int) -> None:
        if dim <= 0:
            raise ValueError(f"dimension must be positive, got {dim}")
        self._dim = dim
        self._lock = threading.Lock()
        self._shards: dict[Scope, Shard] = {}

    @property
    def dimension(self) -> int:
        return self._dim

    def add(self, scope: Scope, keys: Sequence[str], vectors: VectorsIn) -> None:
        matrix = unit_rows(vectors, self._dim)
        if len(matrix) != len(keys):
            raise ValueError(f"{len(keys)} keys for {len(matrix)} vectors")
        if not keys:
            return
        while True:
            shard = self._shard_or_new(scope)
            with shard.lock:
                if not shard.retired:
                    shard.upsert(keys, matrix)
                    return

    def remove(self, scope: Scope, keys: Sequence[str]) -> None:
        shard = self._shard(scope)
        if shard is None:
            return
        with shard.lock:
            shard.remove(keys)
            if not len(shard):
                self._retire(scope, shard)

    def search(self, scope: Scope, vector: VectorIn, k: int) -> list[Hit]:
        """At most k hits of `scope`, best (highest cosine) first."""
        query = unit_query(vector, self._dim)
        shard = self._shard(scope)
        if shard is None or k <= 0:
            return []
        with shard.lock:
            return shard.search(query, k)

    def keys(self, scope: Scope) -> set[str]:
        shard = self._shard(scope)
        if shard is None:
            return set()
        with shard.lock:
            return shard.key_set()

    def scopes(self) -> list[Scope]:
        """Scopes holding at least one vector, in (tenant, agent, user) order."""
        with self._lock:
            scopes = [scope for scope, shard in self._shards.items() if len(shard)]
        return sorted(scopes, key=_scope_order)

    def count(self, scope: Scope) -> int:
        shard = self._shard(scope)
        return 0 if shard is None else len(shard)

    def __len__(self) -> int:
        """Vectors in all scopes."""
        with self._lock:
            return sum(len(shard) for shard in self._shards.values())

    def _shard(self, scope: Scope) -> Shard | None:
        with self._lock:
            return self._shards.get(scope)

    def _shard_or_new(self, scope: Scope) -> Shard:
        with self._lock:
            shard = self._shards.get(scope)
            if shard is None:
                shard = self._shards[scope] = Shard(self._dim)
            return shard

    def _retire(self, scope: Scope, shard: Shard) -> None:
        # An emptied scope leaves the dict, so deleted users don't pile up. The caller holds
        # the shard lock; taking the dict lock inside it is safe because nobody takes the
        # two the other way round.
        shard.retired = True
        with self._lock:
            if self._shards.get(scope) is shard:
                del self._shards[scope]


def _scope_order(scope: Scope) -> tuple[str, str, str]:
    return (scope.tenant_id, scope.agent_id, scope.user_id)
