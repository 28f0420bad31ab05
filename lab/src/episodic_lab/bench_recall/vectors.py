"""The in-memory vector index of a corpus: one random unit vector per episode (key
"<episode_id>#0"), added scope by scope in one call each, as a load from SQL does. Random
vectors cost a search exactly what real ones do (the search is exact), and skipping
`digest_vectors` spares writing and reading a million BLOBs that only a restart reads."""

from __future__ import annotations

import numpy as np

from episodic.domain.recall import vector_key
from episodic.index import FaissVectorIndex
from episodic_lab.bench_recall.layout import Layout


def build_index(layout: Layout, dimension: int, seed: int) -> FaissVectorIndex:
    rng = np.random.default_rng(seed)
    index = FaissVectorIndex(dimension)
    for user in range(layout.users):
        episodes = layout.episodes_of(user)
        keys = [vector_key(layout.episode_id(episode), 0) for episode in episodes]
        vectors = rng.standard_normal((len(keys), dimension), dtype=np.float32)
        index.add(layout.scope(user), keys, vectors)  # normalizes the rows
    return index
