"""Orchestration: per corpus size, a throwaway SQLite corpus and an in-memory index, served
in this process, then Echo, SearchEpisodes in each mode, and the steps of a search; after
the sizes, the query-embedding cost and the digest throughput of the default models."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from episodic.embed import make_embedder
from episodic.index import FaissVectorIndex
from episodic_lab.bench.machine import machine_facts
from episodic_lab.bench_recall import BenchRecallError
from episodic_lab.bench_recall.corpus import Corpus, build_corpus
from episodic_lab.bench_recall.digest import DigestRun, digest_throughput
from episodic_lab.bench_recall.embedding import EmbeddingCost, query_embedding_cost
from episodic_lab.bench_recall.inprocess import bench_settings, serving
from episodic_lab.bench_recall.latency import Budget, Figures, timed
from episodic_lab.bench_recall.options import Options, options_from
from episodic_lab.bench_recall.report import (
    SizeReport,
    digest_section,
    embedding_section,
    header,
    reproduce,
    size_section,
    target_line,
    to_json,
)
from episodic_lab.bench_recall.stages import MatchCounts, Stage, match_counts, stage_figures
from episodic_lab.bench_recall.vectors import build_index
from episodic_lab.bench_recall.words import Lexicon, lexicon
from episodic_lab.bench_recall.workload import VARIANTS, Draws, check_answers, echo_call, search_call
from episodic_lab.connect import lab_client

_MIB = 1 << 20


def run_bench_recall(args: argparse.Namespace) -> int:
    """The `episodic-lab bench-recall` command."""
    try:
        return asyncio.run(_run(options_from(args)))
    except BenchRecallError as exc:
        print(f"episodic-lab bench-recall: {exc}", file=sys.stderr)
        return 1


async def _run(options: Options) -> int:
    machine = machine_facts()
    dimension = make_embedder(bench_settings().embedder).dimension
    print(header(machine, options, dimension), end="\n\n", flush=True)
    words = lexicon(options.seed)
    with tempfile.TemporaryDirectory(prefix="episodic-bench-recall-") as workdir:
        sizes = [await _size(Path(workdir), size, words, options) for size in options.sizes]
        embedding = await _embedding(options)
        digest = await _digest(Path(workdir), options)
    print(target_line(sizes))
    print(reproduce(options))
    if options.json_path:
        Path(options.json_path).write_text(to_json(machine, options, sizes, embedding, digest))
    return 0


async def _size(workdir: Path, size: int, words: Lexicon, options: Options) -> SizeReport:
    path = workdir / f"corpus-{size}.db"
    try:
        report = await _measure_size(path, size, words, options)
    finally:
        for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            leftover.unlink(missing_ok=True)
        gc.collect()  # the index of this size goes before the next is built
    print(size_section(report), end="\n\n", flush=True)
    return report


async def _measure_size(path: Path, size: int, words: Lexicon, options: Options) -> SizeReport:
    settings = bench_settings(f"sqlite:///{path}")
    _progress(f"{size:,} episodes: writing the corpus")
    corpus = await build_corpus(path, settings, size, words, options.seed)
    _progress(f"{size:,} episodes: corpus written in {corpus.build_seconds:.1f} s; building the index")
    began = time.perf_counter()
    index = build_index(corpus.layout, make_embedder(settings.embedder).dimension, options.seed)
    index_seconds = time.perf_counter() - began
    rss = _rss_mib()
    _progress(f"{size:,} episodes: index built in {index_seconds:.1f} s; measuring")
    measured = await _measure_calls(corpus, index, words, options)
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


async def _measure_calls(
    corpus: Corpus, index: FaissVectorIndex, words: Lexicon, options: Options
) -> _Measured:
    budget = Budget.of(options.calls, options.max_seconds)
    draws = Draws.of(corpus.layout, words, budget.warmup + budget.calls, options.seed + 1)
    async with (
        serving(bench_settings(corpus.url), index) as server,
        lab_client(server.target) as client,
    ):
        await check_answers(client, draws)
        echo = await timed(echo_call(client), budget)
        searches = {}
        for variant in VARIANTS:
            figures = searches[variant.label] = await timed(search_call(client, draws, variant), budget)
            _progress(f"  {variant.label}: p50 {figures.p50_ms:.2f} ms, p99 {figures.p99_ms:.2f} ms")
        stages = await stage_figures(server, draws, budget)
        matches = (await match_counts(server, draws), await match_counts(server, draws, rare_words=True))
    return _Measured(echo, searches, stages, matches)


async def _embedding(options: Options) -> EmbeddingCost | None:
    if not options.embed_queries:
        return None
    _progress("query embedding: MiniLM")
    cost = await query_embedding_cost(options.embed_queries, options.seed, options.max_seconds)
    print(embedding_section(cost), end="\n\n", flush=True)
    return cost


async def _digest(workdir: Path, options: Options) -> DigestRun | None:
    if not options.digest_episodes:
        return None
    _progress(f"digest throughput: {options.digest_episodes} episodes")
    run = await digest_throughput(workdir, options.digest_episodes, options.seed)
    print(digest_section(run), end="\n\n", flush=True)
    return run


def _rss_mib() -> float:
    """Resident memory now (Linux); NaN elsewhere."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return float("nan")
    return pages * os.sysconf("SC_PAGE_SIZE") / _MIB


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _progress(line: str) -> None:
    """To stderr, so stdout holds only the report."""
    print(line, file=sys.stderr, flush=True)
