"""What embedding a query costs with the default embedder (MiniLM on onnxruntime, one
thread): SearchEpisodes pays it before any search in SEMANTIC and HYBRID mode, so it is
reported beside the search figures rather than inside them."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from episodic.embed import make_embedder
from episodic_lab.bench_recall.chat import questions
from episodic_lab.bench_recall.latency import Budget, Figures, timed_sync


@dataclass(frozen=True, slots=True)
class EmbeddingCost:
    model_id: str
    load_seconds: float
    figures: Figures


async def query_embedding_cost(count: int, seed: int, seconds: float) -> EmbeddingCost:
    began = time.perf_counter()
    embedder = make_embedder("minilm")
    load_seconds = time.perf_counter() - began
    asked = questions(np.random.default_rng(seed), count)
    figures = await timed_sync(lambda n: embedder.embed([asked[n % count]]), Budget.of(count, seconds))
    return EmbeddingCost(embedder.model_id, load_seconds, figures)
