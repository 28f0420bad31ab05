"""Orchestration: per backend, a throwaway database and a server subprocess; there, the
conversations, then throughput against Echo, memory and latency by log length; after the
backends, MiniLM's query-embedding cost; then the report, the JSON and the plot."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import tempfile
from pathlib import Path

from episodic_lab.bench import BenchError
from episodic_lab.bench.databases import describe_database, throwaway_database
from episodic_lab.bench.machine import machine_facts
from episodic_lab.bench.server_process import Server
from episodic_lab.bench_context import progress
from episodic_lab.bench_context.client import Client
from episodic_lab.bench_context.conversations import Writer
from episodic_lab.bench_context.export import to_json
from episodic_lab.bench_context.history import history_rows
from episodic_lab.bench_context.memory import growth, per_conversation
from episodic_lab.bench_context.messages import UserMessages
from episodic_lab.bench_context.options import Options, options_from
from episodic_lab.bench_context.plot import write_plot
from episodic_lab.bench_context.report import BackendReport, embedding_section, header, reproduce, section
from episodic_lab.bench_context.server import context_server
from episodic_lab.bench_context.throughput import throughput_rows, worker_conversations
from episodic_lab.bench_recall.embedding import EmbeddingCost, query_embedding_cost
from episodic_lab.connect import lab_client

EMBED_SECONDS = 20.0  # at most, for the MiniLM timing


def run_bench_context(args: argparse.Namespace) -> int:
    """The `episodic-lab bench-context` command."""
    try:
        return asyncio.run(_run(options_from(args)))
    except BenchError as exc:
        print(f"episodic-lab bench-context: {exc}", file=sys.stderr)
        return 1


async def _run(options: Options) -> int:
    machine = machine_facts()
    print(header(machine, options), end="\n\n", flush=True)
    reports = []
    for backend in options.backends:
        reports.append(await _bench_backend(backend, options))
        print(section(reports[-1]), end="\n\n", flush=True)
    embedding = await _embedding(options)
    print(reproduce(options))
    print(write_plot(options.plot_path, reports))
    if options.json_path:
        json_text = to_json(machine, options, reports, embedding)
        await asyncio.to_thread(Path(options.json_path).write_text, json_text)
    return 0


async def _bench_backend(backend: str, options: Options) -> BackendReport:
    try:
        database = await describe_database(backend, options.postgres_admin_url)
    except BenchError as exc:  # only an unreachable PostgreSQL is skipped; later failures stop the run
        return BackendReport(backend, skipped=str(exc))
    with tempfile.TemporaryDirectory(prefix="episodic-bench-context-") as workdir:
        return await _measure(backend, database, Path(workdir), options)


async def _measure(backend: str, database: str, workdir: Path, options: Options) -> BackendReport:
    async with (
        throwaway_database(backend, workdir, options.postgres_admin_url) as url,
        context_server(url, workdir, options.embedder) as server,
        lab_client(server.target) as lab,
    ):
        progress(f"{backend}: server pid {server.pid} on port {server.port}")
        measured = BackendReport(backend, database, server.command)
        client = await Client.with_new_agent(lab, UserMessages(repeat=options.same_message))
        return await _measure_server(client, server, options, measured)


async def _measure_server(
    client: Client, server: Server, options: Options, measured: BackendReport
) -> BackendReport:
    progress(f"  writing {max(options.concurrency)} users' past episodes and conversations")
    conversations = await worker_conversations(Writer(client), max(options.concurrency))
    throughput = await throughput_rows(client, conversations, server.pid, options)
    # Memory first: the long logs' first calls free memory that later growth would reuse unseen.
    per = await per_conversation(client, server.pid, options.conversations) if options.conversations else None
    grown = await growth(client, server.pid, options.history)
    history = await history_rows(client, server.pid, options)
    return dataclasses.replace(
        measured, throughput=tuple(throughput), history=tuple(history), per_conversation=per, growth=grown
    )


async def _embedding(options: Options) -> EmbeddingCost | None:
    if not options.embed_queries:
        return None
    progress("query embedding: MiniLM, in this process")
    cost = await query_embedding_cost(options.embed_queries, seed=0, seconds=EMBED_SECONDS)
    print(embedding_section(cost, options.embedder), end="\n\n", flush=True)
    return cost
