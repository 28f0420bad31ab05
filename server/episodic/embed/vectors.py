"""Row-wise L2 normalisation shared by the embedders."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

# Below this norm a row carries no direction; scaling it up would only amplify noise.
_MIN_NORM = 1e-12

FloatMatrix = NDArray[np.floating[Any]]


def unit_rows(matrix: FloatMatrix) -> FloatMatrix:
    """Each row scaled to length 1; all-zero rows stay zero (callers reject those first
    where it matters)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    scaled: FloatMatrix = matrix / np.maximum(norms, _MIN_NORM)
    return scaled


def as_lists(matrix: FloatMatrix) -> list[list[float]]:
    """Plain Python floats, the port's vector type."""
    rows: list[list[float]] = matrix.astype(np.float64).tolist()
    return rows
