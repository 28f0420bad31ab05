"""One scope's vectors: a growing float32 matrix with a key per row, searched exactly.

Not thread-safe by itself: the owner holds `lock` around every call."""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

import faiss
import numpy as np
from numpy.typing import NDArray

from episodic.domain.recall import Hit

Matrix = NDArray[np.float32]
VectorsIn = Sequence[Sequence[float]] | NDArray[np.floating[Any]]
VectorIn = Sequence[float] | NDArray[np.floating[Any]]

# faiss.knn runs a single query on one thread up to ~8k rows; from ~10k rows on it switches to
# an OpenMP path that measured 16 ms instead of 0.3 ms per query while the 2 cores were busy.
# Searching in blocks keeps every query on one predictable thread.
BLOCK_ROWS = 4096
# A scope of at least this many rows (a large agent's knowledge; no user's episodes come near)
# is searched first through a coded copy of its matrix, and the best max(RERANK x k,
# RERANK_MIN) rows found there are scored again exactly, so scores are exact cosines and the
# order is exact among them. The copy is a product quantizer: each pair of dimensions is
# coded in 4 bits (one of 16 centroids learned from TRAIN_ROWS of the rows), 1/16 of the
# bytes of the matrix, searched by faiss's fast-scan kernel (the 16-entry distance tables
# held in SIMD registers). 100k x 256 (bench-knowledge's rows), one query, top 50:
#
#   coarse pass                  ms/query   exact top 50 among 200 / 1000 candidates
#   exact (no coarse pass)          4.1          -
#   8-bit scalar quantizer          1.2          0.999 / -
#   this (pairs, 4 bits)            0.33         0.88 / 0.990 (random unit rows: 0.88 / 0.996)
#
# and scoring 1000 candidates exactly costs ~0.09 ms (`_exact_among`). The copy follows appends; a removal or
# an overwrite (rows move) marks it stale, and the next search codes the rows again with the
# centroids it has (~0.2 s at 100k rows: writes to a large agent are rare, searches are
# not), learning them again once the scope is RETRAIN_GROWTH times what they were learned on.
COARSE_ROWS = 32_768
RERANK = 20
RERANK_MIN = 1000
TRAIN_ROWS = 16_384
RETRAIN_GROWTH = 4
CENTROID_BITS = 4
# Growth is +25% + 8 rows: a scope grown 2 vectors at a time to 100 has room for 125, not 128+.
_MIN_CAPACITY = 8


def unit_rows(vectors: VectorsIn, dim: int) -> Matrix:
    """Copies `vectors` into a float32 (n, dim) matrix of unit rows, so scores are cosines even
    if a caller forgets to normalize. Wrong shape, NaN/inf and zero vectors are ValueErrors."""
    matrix = np.array(vectors, dtype=np.float32)
    if matrix.size == 0:
        return np.empty((0, dim), dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[1] != dim:
        raise ValueError(f"expected vectors of dimension {dim}, got an array of shape {matrix.shape}")
    # A NaN or infinity anywhere in a row makes its sum of squares NaN or infinite.
    norms_squared = np.einsum("ij,ij->i", matrix, matrix)
    if not np.isfinite(norms_squared).all():
        raise ValueError("vectors must be finite (and their squared norm must fit a float32)")
    if not norms_squared.all():
        raise ValueError("a zero vector has no direction to compare")
    matrix /= np.sqrt(norms_squared)[:, np.newaxis]
    return matrix


def unit_query(vector: VectorIn, dim: int) -> Matrix:
    """The query as a (1, dim) unit row, the shape faiss.knn takes. Same checks as
    `unit_rows`, with a cheaper path for one vector: this runs on every search."""
    query = np.array(vector, dtype=np.float32, ndmin=2)
    if query.shape != (1, dim):
        raise ValueError(f"expected one vector of dimension {dim}, got an array of shape {query.shape}")
    # A NaN or infinity anywhere makes the sum of squares NaN or infinite.
    norm_squared = float(query[0] @ query[0])
    if not math.isfinite(norm_squared):
        raise ValueError("vectors must be finite (and their squared norm must fit a float32)")
    if norm_squared == 0.0:
        raise ValueError("a zero vector has no direction to compare")
    query /= math.sqrt(norm_squared)
    return query


def top_k(matrix: Matrix, query: Matrix, k: int) -> tuple[Matrix, NDArray[np.int64]]:
    """Rows of `matrix` with the k largest inner products with `query`, best first.
    Requires 0 < k <= len(matrix)."""
    if len(matrix) <= BLOCK_ROWS:
        return _knn(matrix, query, k)
    scores: list[Matrix] = []
    rows: list[NDArray[np.int64]] = []
    for start in range(0, len(matrix), BLOCK_ROWS):
        block = matrix[start : start + BLOCK_ROWS]
        block_scores, block_rows = _knn(block, query, min(k, len(block)))
        scores.append(block_scores)
        rows.append(block_rows + start)
    all_scores, all_rows = np.concatenate(scores), np.concatenate(rows)
    best = np.argsort(-all_scores, kind="stable")[:k]
    return all_scores[best], all_rows[best]


def _knn(matrix: Matrix, query: Matrix, k: int) -> tuple[Matrix, NDArray[np.int64]]:
    # Row slices of a C-contiguous matrix are contiguous, so faiss reads them without a copy;
    # it releases the GIL while it computes.
    scores, rows = faiss.knn(query, matrix, k, metric=faiss.METRIC_INNER_PRODUCT)
    return np.asarray(scores[0], dtype=np.float32), np.asarray(rows[0], dtype=np.int64)


def _exact_among(
    matrix: Matrix, query: Matrix, candidates: NDArray[np.int64], k: int
) -> tuple[Matrix, NDArray[np.int64]]:
    """The k of the candidate rows with the largest inner products with `query`, best first:
    one faiss call that reads the rows where they are, the GIL released (gathering them into
    a new array and multiplying in numpy took twice as long: ~0.19 against ~0.09 ms for
    1,000 rows of 256)."""
    scores = np.empty((1, k), dtype=np.float32)
    rows = np.empty((1, k), dtype=np.int64)
    # faiss reads them through raw pointers: each must be one contiguous block
    matrix, query = np.ascontiguousarray(matrix), np.ascontiguousarray(query)
    candidates = np.ascontiguousarray(candidates)
    faiss.knn_inner_products_by_idx(  # type: ignore[attr-defined]  # in faiss, not in its .pyi
        faiss.swig_ptr(query), faiss.swig_ptr(matrix), faiss.swig_ptr(candidates),
        matrix.shape[1], 1, len(matrix), len(candidates), k,
        faiss.swig_ptr(scores), faiss.swig_ptr(rows), -1,
    )  # fmt: skip
    return scores[0], rows[0]


class Shard:
    """Live rows are kept contiguous in `_matrix[:len(self)]`, so a search is one pass over
    one block of memory and a removal is O(1) (the last row moves into the hole)."""

    __slots__ = ("_coarse", "_keys", "_matrix", "_rows", "lock", "retired")

    def __init__(self, dim: int) -> None:
        self.lock = threading.Lock()
        # Set when an emptied shard leaves the index, so a writer that fetched it just before
        # goes back for a fresh one instead of adding to an orphan.
        self.retired = False
        self._matrix: Matrix = np.empty((0, dim), dtype=np.float32)
        self._keys: list[str] = []  # row -> key
        self._rows: dict[str, int] = {}  # key -> row
        self._coarse: _CodedCopy | None = None  # made by the first search above COARSE_ROWS

    def __len__(self) -> int:
        return len(self._keys)

    def key_set(self) -> set[str]:
        return set(self._rows)

    def upsert(self, keys: Sequence[str], matrix: Matrix) -> None:
        """Adds rows; a key already present gets its row overwritten. Within one call the last
        occurrence of a key wins, as if the keys were added one by one."""
        last = {key: i for i, key in enumerate(keys)}
        fresh_keys: list[str] = []
        fresh_rows: list[int] = []
        for key, i in last.items():
            row = self._rows.get(key)
            if row is None:
                fresh_keys.append(key)
                fresh_rows.append(i)
            else:
                self._matrix[row] = matrix[i]
                self._stale_copy()
        if fresh_keys:
            self._append(fresh_keys, matrix[fresh_rows])

    def remove(self, keys: Sequence[str]) -> None:
        """Drops the rows of `keys`; unknown keys are ignored."""
        for key in keys:
            row = self._rows.pop(key, None)
            if row is not None:
                self._fill_hole(row)
                self._stale_copy()
        self._shrink()

    def search(self, query: Matrix, k: int) -> list[Hit]:
        k = min(k, len(self._keys))
        if k <= 0:
            return []
        if len(self._keys) >= COARSE_ROWS:
            scores, rows = self._coarse_then_exact(query, k)
        else:
            scores, rows = top_k(self._matrix[: len(self._keys)], query, k)
        keys = self._keys
        # Rounding can put the dot product of two unit vectors a hair outside [-1, 1].
        bounded = np.clip(scores, -1.0, 1.0).tolist()
        return [Hit(keys[row], score) for score, row in zip(bounded, rows.tolist(), strict=True)]

    def _coarse_then_exact(self, query: Matrix, k: int) -> tuple[Matrix, NDArray[np.int64]]:
        count = len(self._keys)
        if self._coarse is None:
            self._coarse = _CodedCopy(self._matrix.shape[1])
        self._coarse.follow(self._matrix[:count])
        wanted = min(count, max(k * RERANK, RERANK_MIN))
        found = self._coarse.nearest(query, wanted)
        if len(found) < wanted:  # the kernel skips codes scoring nothing: whatever it misses, exact finds
            return top_k(self._matrix[:count], query, k)
        return _exact_among(self._matrix[:count], query, found, k)

    def _stale_copy(self) -> None:
        if self._coarse is not None:
            self._coarse.stale = True

    def _append(self, keys: list[str], matrix: Matrix) -> None:
        start = len(self._keys)
        self._reserve(start + len(keys))
        self._matrix[start : start + len(keys)] = matrix
        self._rows.update(zip(keys, range(start, start + len(keys)), strict=True))
        self._keys.extend(keys)

    def _reserve(self, rows: int) -> None:
        capacity, dim = self._matrix.shape
        if rows <= capacity:
            return
        # The first allocation is exact, so a shard built in one call (a scope loaded from SQL)
        # has no slack; later growth is geometric so appending one row at a time stays amortized O(1).
        grown = rows if capacity == 0 else max(rows, capacity + capacity // 4 + _MIN_CAPACITY)
        matrix = np.empty((grown, dim), dtype=np.float32)
        matrix[: len(self._keys)] = self._matrix[: len(self._keys)]
        self._matrix = matrix

    def _fill_hole(self, row: int) -> None:
        last = len(self._keys) - 1
        moved = self._keys.pop()
        if row != last:
            self._matrix[row] = self._matrix[last]
            self._keys[row] = moved
            self._rows[moved] = row

    def _shrink(self) -> None:
        # Give memory back after mass removals; the factor 4 between growing and shrinking
        # keeps a scope that hovers around one size from reallocating on every change.
        count, capacity = len(self._keys), self._matrix.shape[0]
        if capacity > _MIN_CAPACITY and count <= capacity // 4:
            self._matrix = self._matrix[:count].copy()


class _CodedCopy:
    """The rows' product-quantizer codes in a faiss fast-scan index, row i at label i while
    not `stale`. Its centroids are kept when the rows are coded again."""

    __slots__ = ("_index", "_trained_on", "stale")

    def __init__(self, dim: int) -> None:
        # Pairs of dimensions; an odd dimension codes each one alone.
        self._index = faiss.IndexPQFastScan(
            dim, dim // 2 if dim % 2 == 0 else dim, CENTROID_BITS, faiss.METRIC_INNER_PRODUCT
        )
        self._index.pq.cp.min_points_per_centroid = 1  # a small test scope, without warnings
        self._trained_on = 0
        self.stale = True

    def follow(self, rows: Matrix) -> None:
        """Codes the rows appended since the last call, or all of them when stale."""
        if self.stale:
            self._index.reset()
            if len(rows) >= RETRAIN_GROWTH * self._trained_on:
                self._train(rows)
            self.stale = False
        coded = int(self._index.ntotal)
        if len(rows) > coded:
            self._index.add(rows[coded:])

    def nearest(self, query: Matrix, k: int) -> NDArray[np.int64]:
        """Rows of (about) the k largest inner products with `query`, best first."""
        _, found = self._index.search(query, k)
        rows: NDArray[np.int64] = found[0][found[0] >= 0].astype(np.int64)
        return rows

    def _train(self, rows: Matrix) -> None:
        """Centroids from TRAIN_ROWS rows spread evenly over the scope (faiss's k-means is
        seeded: the same rows give the same centroids)."""
        step = max(len(rows) // TRAIN_ROWS, 1)
        self._index.pq.train(np.ascontiguousarray(rows[::step][:TRAIN_ROWS]))
        self._index.is_trained = True
        self._trained_on = len(rows)
