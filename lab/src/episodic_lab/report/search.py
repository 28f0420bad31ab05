"""SearchEpisodes latency against the size of the corpus, every mode, through bench-recall's
corpus and in-process server (hashing query embedder, so the figures are recall's own), and
MiniLM's query embedding timed apart: SEMANTIC and HYBRID pay it on top of their row."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from episodic_lab.bench_recall.embedding import EmbeddingCost, query_embedding_cost
from episodic_lab.bench_recall.report import SizeReport
from episodic_lab.bench_recall.sizes import SizeRun, measure_size
from episodic_lab.bench_recall.words import lexicon
from episodic_lab.report.presets import Preset

SEED = 0


@dataclass(frozen=True, slots=True)
class SearchBySize:
    sizes: tuple[SizeReport, ...]
    embedding: EmbeddingCost


async def search_by_size(workdir: Path, preset: Preset) -> SearchBySize:
    words = lexicon(SEED)
    run = SizeRun(preset.search_calls, preset.search_seconds, SEED, steps=False)
    sizes = [await measure_size(workdir, size, words, run) for size in preset.corpus_sizes]
    embedding = await query_embedding_cost(preset.embed_queries, SEED, preset.search_seconds)
    return SearchBySize(tuple(sizes), embedding)
