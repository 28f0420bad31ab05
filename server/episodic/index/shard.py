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
# is searched first through an 8-bit copy of its matrix, a quarter of the bytes to stream (on
# the calling thread), and the best max(RERANK x k, RERANK_MIN) rows found there are scored
# again exactly, so scores are exact cosines and the order is exact among them. The copy is
# the rows times one scale, rounded to signed bytes, so faiss decodes a byte with no
# arithmetic (QT_8bit_direct_signed); its distance is L2, which ranks unit rows as the inner
# product does. 100k x 256 (bench-knowledge's rows): exact 4.1 ms a query, the uniform 8-bit
# quantizer 2.1 ms, this 1.2 ms, each finding 99.3% of the exact top 50 among 200 candidates.
# The copy follows appends; a removal, an overwrite (rows move) or an appended row beyond
# the scale drops it, and the next search encodes it again (~60 ms at 100k rows): writes to
# a large agent are rare, searches are not.
COARSE_ROWS = 32_768
RERANK = 4
RERANK_MIN = 200
BYTE_MAX = 127.0  # the byte copy's largest magnitude
_TINY = 1e-30
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
        self._coarse: _ByteCopy | None = None  # of rows [0, len(_coarse)), or None

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
                self._coarse = None
        if fresh_keys:
            self._append(fresh_keys, matrix[fresh_rows])

    def remove(self, keys: Sequence[str]) -> None:
        """Drops the rows of `keys`; unknown keys are ignored."""
        for key in keys:
            row = self._rows.pop(key, None)
            if row is not None:
                self._fill_hole(row)
                self._coarse = None
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
        found = self._byte_copy().nearest(query, min(count, max(k * RERANK, RERANK_MIN)))
        exact = self._matrix[found] @ query[0]
        best = np.argsort(-exact, kind="stable")[:k]
        return exact[best].astype(np.float32), found[best]

    def _byte_copy(self) -> _ByteCopy:
        """The 8-bit copy of the live rows, encoded now if dropped, extended by appends."""
        count = len(self._keys)
        if self._coarse is None or not self._coarse.extend(self._matrix[len(self._coarse) : count]):
            self._coarse = _ByteCopy(self._matrix[:count])
        return self._coarse

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


class _ByteCopy:
    """Rows times `scale` (the largest magnitude of the rows it was made from maps to 127),
    rounded to signed bytes, in a faiss index that searches them by L2 distance."""

    __slots__ = ("_index", "_scale")

    def __init__(self, rows: Matrix) -> None:
        self._scale = BYTE_MAX / max(float(np.abs(rows).max(initial=0.0)), _TINY)
        self._index = faiss.IndexScalarQuantizer(
            rows.shape[1], faiss.ScalarQuantizer.QT_8bit_direct_signed, faiss.METRIC_L2
        )
        self._add(rows)

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def extend(self, rows: Matrix) -> bool:
        """Appends rows; False (nothing added) when a value lies beyond the scale."""
        if len(rows) and float(np.abs(rows).max()) * self._scale > BYTE_MAX:
            return False
        self._add(rows)
        return True

    def nearest(self, query: Matrix, k: int) -> NDArray[np.int64]:
        """Rows of the (about) k smallest distances to `query`, nearest first."""
        _, found = self._index.search(query * self._scale, k)
        rows: NDArray[np.int64] = found[0][found[0] >= 0].astype(np.int64)
        return rows

    def _add(self, rows: Matrix) -> None:
        if len(rows):
            self._index.add(np.rint(rows * self._scale))
