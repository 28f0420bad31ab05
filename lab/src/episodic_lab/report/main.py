"""Orchestration of `episodic-lab report`: per backend, throughput against Echo, latency by
history length (warm and cold) and RSS by conversations, each on a throwaway database and
server of its own; then SearchEpisodes by corpus size and digest throughput (SQLite, in
process); then the plots, report.md in --out, and the Markdown on stdout."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from episodic_lab.bench import BenchError
from episodic_lab.bench.databases import describe_database
from episodic_lab.bench.machine import machine_facts
from episodic_lab.bench_context import progress
from episodic_lab.bench_recall.digest import digest_throughput
from episodic_lab.report import plots
from episodic_lab.report.document import document
from episodic_lab.report.history import history
from episodic_lab.report.memory import rss_curve
from episodic_lab.report.options import Options, options_from
from episodic_lab.report.provenance import server_code
from episodic_lab.report.results import BackendResults, Results
from episodic_lab.report.search import SEED, search_by_size
from episodic_lab.report.sections import Section, run_section
from episodic_lab.report.throughput import throughput

REPORT_FILE = "report.md"
T = TypeVar("T")


def run_report(args: argparse.Namespace) -> int:
    """The `episodic-lab report` command: 0 when every section ran."""
    return asyncio.run(_run(options_from(args)))


async def _run(options: Options) -> int:
    options.out.mkdir(parents=True, exist_ok=True)
    started, began = datetime.now(UTC), time.perf_counter()
    machine, code = machine_facts(), server_code()
    progress(f"report, size {options.preset.name}: server code {code}")
    with tempfile.TemporaryDirectory(prefix="episodic-report-") as scratch:
        workdirs = _Workdirs(Path(scratch))
        backends = [await _backend(backend, workdirs, options) for backend in options.backends]
        preset = options.preset
        search = await run_section(
            "SearchEpisodes latency vs corpus size (SQLite, in process)",
            lambda: search_by_size(workdirs.new(), preset),
        )
        digest = await run_section(
            "Digest throughput (MiniLM)",
            lambda: digest_throughput(workdirs.new(), preset.digest_episodes, SEED),
        )
    when = started.strftime("%Y-%m-%d %H:%M")
    results = Results(
        options, _command(options), machine, code, when, time.perf_counter() - began,
        tuple(backends), search, digest,
    )  # fmt: skip
    markdown = document(results, _plots(results, options.out))
    (options.out / REPORT_FILE).write_text(markdown)
    print(markdown, end="", flush=True)
    progress(f"report written to {options.out / REPORT_FILE} in {results.seconds:.0f} s")
    return 1 if results.failed else 0


async def _backend(backend: str, workdirs: _Workdirs, options: Options) -> BackendResults:
    url, preset = options.postgres_admin_url, options.preset
    try:
        database = await describe_database(backend, url)
    except BenchError as exc:  # every section below fails the same way, and says so
        database = f"unreachable ({exc})"
    return BackendResults(
        backend,
        database,
        await run_section(
            f"Throughput vs Echo ({backend})", lambda: throughput(backend, workdirs.new(), url, preset)
        ),
        await run_section(
            f"BuildContext latency vs history length ({backend})",
            lambda: history(backend, workdirs.new(), url, preset),
        ),
        await run_section(
            f"Server RSS vs active conversations ({backend})",
            lambda: rss_curve(backend, workdirs.new(), url, preset),
        ),
    )


class _Workdirs:
    """A fresh directory per section (server log, SQLite file), all under one scratch directory."""

    def __init__(self, root: Path) -> None:
        self.root, self.made = root, 0

    def new(self) -> Path:
        self.made += 1
        path = self.root / f"section-{self.made}"
        path.mkdir()
        return path


def _plots(results: Results, out: Path) -> dict[str, str]:
    """Section name -> PNG file name, for each section that has a result to draw."""
    drawn: dict[str, str] = {}
    for found in results.backends:
        name = found.backend
        _draw(drawn, found.throughput, plots.throughput_plot, out / f"throughput-{name}.png")
        _draw(drawn, found.history, plots.history_plot, out / f"history-{name}.png")
        _draw(drawn, found.rss, plots.rss_plot, out / f"rss-{name}.png")
    _draw(drawn, results.search, plots.search_plot, out / "search.png")
    return drawn


def _draw(drawn: dict[str, str], section: Section[T], draw: Callable[[Path, T], str], path: Path) -> None:
    if section.result is None:
        return
    try:
        drawn[section.name] = draw(path, section.result)
    except Exception as exc:  # a plot that cannot be drawn must not lose the measured tables
        progress(f"plot of {section.name} failed: {type(exc).__name__}: {exc}")


def _command(options: Options) -> str:
    command = f"episodic-lab report --size {options.preset.name} --out {options.out}"
    if options.backends != ("sqlite",):
        command += f" --backends {','.join(options.backends)}"
    if "postgres" in options.backends:
        command += f" --postgres-admin-url {options.postgres_admin_url}"
    return command
