"""One corpus size measured: a throwaway SQLite corpus and its in-memory index, served in
this process, then Echo, SearchEpisodes in each mode and, if asked, each step of a search.
Callable on its own: `episodic-lab bench-recall` and `episodic-lab report` both use it."""

from __future__ import annotations

import gc
import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path

from episodic.index import FaissVectorIndex
from episodic_lab.bench_context import progress
from episodic_lab.bench_recall.corpus import Corpus, build_corpus
from episodic_lab.bench_recall.inprocess import bench_settings, serving
from episodic_lab.bench_recall.latency import Budget, Figures, timed
from episodic_lab.bench_recall.report import SizeReport
from episodic_lab.bench_recall.stages import MatchCounts, Stage, match_counts, stage_figures
from episodic_lab.bench_recall.vectors import build_index
from episodic_lab.bench_recall.words import Lexicon
from episodic_lab.bench_recall.workload import VARIANTS, Draws, check_answers, echo_call, search_call
from episodic_lab.connect import lab_client

_MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class SizeRun:
    calls: int  # measured calls per row, at most
    max_seconds: float  # per row, warm-up included
    seed: int
    steps: bool = True  # also time each step of a search, called directly


async def measure_size(workdir: Path, size: int, words: Lexicon, run: SizeRun) -> SizeReport:
    """The corpus's files are removed afterwards, and its index collected before the next."""
    path = workdir / f"corpus-{size}.db"
    try:
        return await _measure_size(path, size, words, run)
    finally:
        for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            leftover.unlink(missing_ok=True)
        gc.collect()


async def _measure_size(path: Path, size: int, words: Lexicon, run: SizeRun) -> SizeReport:
    settings = bench_settings(f"sqlite:///{path}")
    progress(f"{size:,} episodes: writing the corpus")
    corpus = await build_corpus(path, settings, size, words, run.seed)
    progress(f"{size:,} episodes: corpus written in {corpus.build_seconds:.1f} s; building the index")
    began = time.perf_counter()
    index = build_index(corpus.layout, corpus.dimension, run.seed)
    index_seconds = time.perf_counter() - began
    rss = _rss_mib()
    progress(f"{size:,} episodes: index built in {index_seconds:.1f} s; measuring")
    measured = await _measure_calls(corpus, index, words, run)
    return SizeReport(
        size, corpus.layout.users, corpus.seconds, corpus.file_mib, index_seconds, rss, _peak_rss_mib(),
        measured.echo, measured.searches, measured.stages, measured.matches,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Measured:
    echo: Figures
    searches: dict[str, Figures]
    stages: list[Stage]
    matches: tuple[MatchCounts, MatchCounts]  # all query words, rare words only


async def _measure_calls(corpus: Corpus, index: FaissVectorIndex, words: Lexicon, run: SizeRun) -> _Measured:
    budget = Budget.of(run.calls, run.max_seconds)
    draws = Draws.of(corpus.layout, words, budget.warmup + budget.calls, run.seed + 1)
    async with (
        serving(bench_settings(corpus.url), index) as server,
        lab_client(server.target) as client,
    ):
        await check_answers(client, draws)
        echo = await timed(echo_call(client), budget)
        searches = {}
        for variant in VARIANTS:
            figures = searches[variant.label] = await timed(search_call(client, draws, variant), budget)
            progress(f"  {variant.label}: p50 {figures.p50_ms:.2f} ms, p99 {figures.p99_ms:.2f} ms")
        stages = await stage_figures(server, draws, budget) if run.steps else []
        matches = (await match_counts(server, draws), await match_counts(server, draws, rare_words=True))
    return _Measured(echo, searches, stages, matches)


def _rss_mib() -> float:
    """Resident memory now (Linux); NaN elsewhere."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return float("nan")
    return pages * os.sysconf("SC_PAGE_SIZE") / _MIB


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
