"""The word search's scoring loop, in C without the GIL (_postings.c has the contract)."""

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

Part = tuple[NDArray[np.int32], NDArray[np.float32], float, bool]

def best_rows(
    parts: Sequence[Part],
    scores: NDArray[np.float32],
    alive: NDArray[np.bool_],
    out_rows: NDArray[np.int64],
    out_scores: NDArray[np.float32],
) -> int: ...
