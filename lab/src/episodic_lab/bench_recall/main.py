"""Orchestration: per corpus size, a throwaway SQLite corpus and an in-memory index, served
in this process, then Echo, SearchEpisodes in each mode, and the steps of a search (sizes.py);
after the sizes, the query-embedding cost and the digest throughput of the default models."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from episodic.embed import make_embedder
from episodic_lab.bench.machine import machine_facts
from episodic_lab.bench_context import progress
from episodic_lab.bench_recall import BenchRecallError
from episodic_lab.bench_recall.digest import DigestRun, digest_throughput
from episodic_lab.bench_recall.embedding import EmbeddingCost, query_embedding_cost
from episodic_lab.bench_recall.inprocess import bench_settings
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
from episodic_lab.bench_recall.sizes import SizeRun, measure_size
from episodic_lab.bench_recall.words import Lexicon, lexicon


def run_bench_recall(args: argparse.Namespace) -> int:
    """The `episodic-lab bench-recall` command."""
    try:
        return asyncio.run(_run(options_from(args)))
    except BenchRecallError as exc:
        progress(f"episodic-lab bench-recall: {exc}")
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
        json_text = to_json(machine, options, sizes, embedding, digest)
        await asyncio.to_thread(Path(options.json_path).write_text, json_text)
    return 0


async def _size(workdir: Path, size: int, words: Lexicon, options: Options) -> SizeReport:
    run = SizeRun(options.calls, options.max_seconds, options.seed)
    report = await measure_size(workdir, size, words, run)
    print(size_section(report), end="\n\n", flush=True)
    return report


async def _embedding(options: Options) -> EmbeddingCost | None:
    if not options.embed_queries:
        return None
    progress("query embedding: MiniLM")
    cost = await query_embedding_cost(options.embed_queries, options.seed, options.max_seconds)
    print(embedding_section(cost), end="\n\n", flush=True)
    return cost


async def _digest(workdir: Path, options: Options) -> DigestRun | None:
    if not options.digest_episodes:
        return None
    progress(f"digest throughput: {options.digest_episodes} episodes")
    run = await digest_throughput(workdir, options.digest_episodes, options.seed)
    print(digest_section(run), end="\n\n", flush=True)
    return run
