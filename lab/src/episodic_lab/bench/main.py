"""Orchestration: per backend, a throwaway database and a server subprocess; per level
of concurrency, Echo then AddMessage (episode per worker, then one shared episode)."""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from episodic.progress import say
from episodic_lab.bench import BenchError
from episodic_lab.bench.databases import describe_database, throwaway_database
from episodic_lab.bench.durability import check_durability
from episodic_lab.bench.load import Call, closed_loop
from episodic_lab.bench.machine import machine_facts
from episodic_lab.bench.options import Options, options_from
from episodic_lab.bench.report import (
    PER_WORKER,
    SHARED,
    BackendReport,
    Figures,
    Row,
    header,
    reproduce,
    section,
    to_json,
)
from episodic_lab.bench.server_process import UNPACED, Server, cpu_seconds, running_server
from episodic_lab.bench.workloads import Session
from episodic_lab.connect import lab_client


def run_bench(args: argparse.Namespace) -> int:
    """The `episodic-lab bench` command: 0 when every durability check passed."""
    try:
        return asyncio.run(_run(options_from(args)))
    except BenchError as exc:
        print(f"episodic-lab bench: {exc}", file=sys.stderr)
        return 1


async def _run(options: Options) -> int:
    machine = machine_facts()
    print(header(machine, options), end="\n\n", flush=True)
    reports = []
    for backend in options.backends:
        reports.append(await _bench_backend(backend, options))
        print(section(reports[-1]), end="\n\n", flush=True)
    print(reproduce(options))
    if options.json_path:
        await asyncio.to_thread(Path(options.json_path).write_text, to_json(machine, options, reports))
    return 0 if all(r.durability.passed for r in reports if r.durability) else 1


async def _bench_backend(backend: str, options: Options) -> BackendReport:
    try:
        database = await describe_database(backend, options.postgres_admin_url)
    except BenchError as exc:  # only an unreachable PostgreSQL is skipped; later failures stop the run
        return BackendReport(backend, skipped=str(exc))
    with tempfile.TemporaryDirectory(prefix="episodic-bench-") as workdir:
        return await _measure(backend, database, Path(workdir), options)


async def _measure(backend: str, database: str, workdir: Path, options: Options) -> BackendReport:
    async with (
        throwaway_database(backend, workdir, options.postgres_admin_url) as url,
        running_server(url, workdir, UNPACED) as server,
        lab_client(server.target) as client,
    ):
        _progress(f"{backend}: server pid {server.pid} on port {server.port}")
        bench = _Bench(Session(client), server, options)
        await bench.session.create_agent()
        rows = [row for level in options.concurrency for row in await bench.level(level)]
        durability = await check_durability(client, bench.session.acknowledged)
    return BackendReport(backend, tuple(rows), durability, server.command, database)


@dataclass(frozen=True, slots=True)
class _Bench:
    session: Session
    server: Server
    options: Options

    async def level(self, level: int) -> list[Row]:
        echo = await self._cell("echo", self.session.echo(), level)
        rows = []
        for variant, episodes in ((PER_WORKER, level), (SHARED, 1)):
            add = await self._cell(f"add, {variant}", await self.session.add_message(episodes), level)
            rows.append(Row(level, variant, echo, add))
        return rows

    async def _cell(self, label: str, call: Call, level: int) -> Figures:
        """Warms up (connections, caches, pools grown to this level), then measures."""
        await closed_loop(call, level, self.options.warmup)
        cpu_before = cpu_seconds(self.server.pid)
        result = await closed_loop(call, level, self.options.seconds)
        figures = Figures.of(result, cpu_seconds(self.server.pid) - cpu_before)
        _progress(f"  {level:>3} in flight, {label}: {figures.rps:.0f} calls/s")
        return figures


def _progress(line: str) -> None:
    """To stderr, so stdout holds only the report (and never inside a progress bar)."""
    say(line)
