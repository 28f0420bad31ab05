"""`episodic-lab report`'s report.md, drawn from figures made up here: the header names the
server code and each section's load, a measured section shows its table and plot, and a
failed one shows its failure in place while the others stay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from episodic_lab.bench.report import Figures
from episodic_lab.bench_context.cells import Rendered
from episodic_lab.report.document import document
from episodic_lab.report.options import Options
from episodic_lab.report.presets import SMALL
from episodic_lab.report.results import BackendResults, Results
from episodic_lab.report.sections import Section
from episodic_lab.report.throughput import ADD, BUILD_HYBRID, Cell

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def figures(rps: float, p50_ms: float) -> Figures:
    return Figures(int(rps * 3), 0, 3.0, rps, p50_ms, p50_ms * 1.5, p50_ms * 2, p50_ms * 3, 0.5, "")


def failed(name: str) -> Section[Any]:
    return Section(name, 1.0, 0.5, 0.6, None, "EpisodicClientError: UNAVAILABLE: server gone")


def results() -> Results:
    echo = figures(1000.0, 0.8)
    cells = [
        Cell(ADD, 1, figures(400.0, 2.1), echo),
        Cell(BUILD_HYBRID, 1, figures(50.0, 20.0), echo, Rendered(3960.0, 10.0)),
    ]
    sqlite = BackendResults(
        "sqlite",
        "SQLite 3.40.1",
        Section("Throughput vs Echo (sqlite)", 80.0, 1.25, 2.5, cells),
        failed("BuildContext latency vs history length (sqlite)"),
        failed("Server RSS vs active conversations (sqlite)"),
    )
    options = Options(SMALL, Path("/tmp/out"), ("sqlite",), "postgresql://postgres@127.0.0.1/postgres")
    return Results(
        options, "episodic-lab report --size small --out /tmp/out", {"cores": "2"}, COMMIT,
        "2026-01-02 03:04", 190.0, (sqlite,),
        failed("SearchEpisodes latency vs corpus size (SQLite, in process)"),
        failed("Digest throughput (MiniLM)"),
    )  # fmt: skip


def test_the_header_names_the_command_the_code_and_each_sections_load() -> None:
    text = document(results(), {})

    assert text.startswith("# Episodic performance report: size small\n")
    assert "`episodic-lab report --size small --out /tmp/out`, started 2026-01-02 03:04 UTC" in text
    assert f"| server code (git) | `{COMMIT}` |" in text
    assert "| Throughput vs Echo (sqlite) | 1 min 20 s | 1.25 | 2.50 | ok |" in text
    assert "| Digest throughput (MiniLM) | 1 s | 0.50 | 0.60 | failed |" in text


def test_a_measured_section_has_its_rows_shares_of_echo_and_plot() -> None:
    text = document(results(), {"Throughput vs Echo (sqlite)": "throughput-sqlite.png"})

    assert "| Echo | 1 | 1,000 | 100% | 0.800 | 1.60 | 0.500 | 0 |" in text
    assert "| AddMessage | 1 | 400 | 40% | 2.10 | 4.20 | 0.500 | 0 |" in text
    assert "| BuildContext, HYBRID recall | 1 | 50 | 5% | 20.00 | 40.00 | 0.500 | 0 |" in text
    assert "BuildContext, HYBRID recall at 1: 3,960 tokens, 10.0 recalled episodes" in text
    assert "![Throughput vs Echo (sqlite)](throughput-sqlite.png)" in text


def test_a_failed_section_shows_its_failure_and_the_others_stay() -> None:
    text = document(results(), {})

    assert text.count("**Failed**: `EpisodicClientError: UNAVAILABLE: server gone`") == 4
    assert "## Digest throughput (MiniLM)" in text
    assert "## Throughput vs Echo (sqlite)" in text
