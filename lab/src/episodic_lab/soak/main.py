"""Orchestration: per backend, a throwaway database and a server subprocess; there, the
conversations, then the load with RSS sampled, then the checks; the report, the JSON,
and exit 1 unless every backend passed."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import tempfile
from pathlib import Path

from episodic_lab.bench import BenchError
from episodic_lab.bench.databases import describe_database, throwaway_database
from episodic_lab.bench.machine import machine_facts
from episodic_lab.bench_context.client import Client
from episodic_lab.bench_context.server import context_server, rss_mib
from episodic_lab.connect import lab_client
from episodic_lab.soak.checks import check_stored, logged_problems, serving
from episodic_lab.soak.conversations import OPENING_MESSAGES, open_conversations
from episodic_lab.soak.load import run_load
from episodic_lab.soak.options import Options, options_from
from episodic_lab.soak.report import header, reproduce, summary, title, to_json
from episodic_lab.soak.results import LoadFigures, SoakResult
from episodic_lab.soak.rss import rss_figures

EMBEDDER = "hashing"  # the server's: no model to load, recall stays cheap and deterministic


def run_soak(args: argparse.Namespace) -> int:
    """The `episodic-lab soak` command: 0 when every backend passed, 1 otherwise."""
    return asyncio.run(_run(options_from(args)))


async def _run(options: Options) -> int:
    machine = machine_facts()
    print(header(machine, options, EMBEDDER), end="\n\n", flush=True)
    results = []
    for backend in options.backends:
        results.append(await _soak_backend(backend, options))
        print(summary(results[-1]), end="\n\n", flush=True)
    print(reproduce(options))
    if options.json_path:
        await asyncio.to_thread(Path(options.json_path).write_text, to_json(machine, options, results))
    return 0 if all(result.passed for result in results) else 1


async def _soak_backend(backend: str, options: Options) -> SoakResult:
    try:
        database = await describe_database(backend, options.postgres_admin_url)
    except BenchError as exc:  # PostgreSQL unreachable: this backend fails, the others still run
        print(title(backend, ""), flush=True)
        return SoakResult(backend, not_run=str(exc))
    print(title(backend, database), flush=True)
    return await _soak_database(SoakResult(backend, database), options)


async def _soak_database(result: SoakResult, options: Options) -> SoakResult:
    try:
        with tempfile.TemporaryDirectory(prefix="episodic-soak-") as workdir:
            return await _soak_server(result, Path(workdir), options)
    except BenchError as exc:  # the database could not be made, or the server did not start
        return dataclasses.replace(result, not_run=str(exc))


async def _soak_server(result: SoakResult, workdir: Path, options: Options) -> SoakResult:
    async with (
        throwaway_database(result.backend, workdir, options.postgres_admin_url) as url,
        context_server(url, workdir, EMBEDDER) as server,
        lab_client(server.target) as lab,
    ):
        print("server: " + " ".join(server.command), flush=True)
        client = await Client.with_new_agent(lab)
        load, acknowledged = await _load(client, server.pid, options)
        measured = dataclasses.replace(result, server_command=server.command, load=load)
        return await _checked(measured, client, acknowledged, server.target, workdir / "server.log")


async def _load(client: Client, server_pid: int, options: Options) -> tuple[LoadFigures, dict[str, int]]:
    """The conversations, then the load; the figures, and the messages each conversation
    acknowledged (opening ones and appends)."""
    start_mib = rss_mib(server_pid)
    conversations = await open_conversations(client, options.conversations)
    setup_mib = rss_mib(server_pid)
    print(f"{len(conversations)} conversations written; the load runs for {options.seconds:g} s", flush=True)
    run = await run_load(client, conversations, server_pid, options)
    rss = rss_figures(run.rss, (start_mib, setup_mib), options.warmup, options.max_rss_growth_pct)
    appended = run.tally.appended
    return LoadFigures.of(run, rss), {
        episode: OPENING_MESSAGES + appended[episode] for episode in conversations
    }


async def _checked(
    result: SoakResult, client: Client, acknowledged: dict[str, int], target: str, log_path: Path
) -> SoakResult:
    stored = await check_stored(client, acknowledged)
    healthy = await serving(target)
    return dataclasses.replace(
        result, stored=stored, healthy=healthy, server_log=dict(logged_problems(log_path))
    )
