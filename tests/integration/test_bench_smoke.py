"""`episodic-lab bench` end to end on SQLite with tiny settings: a real server subprocess,
real load, a report with figures, and every acknowledged AddMessage found stored."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from episodic_lab.cli import main

pytestmark = pytest.mark.slow  # the lab's benchmark, seconds of load: `pytest -m slow` runs it


def test_bench_reports_figures_and_finds_every_acknowledged_message_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    figures = tmp_path / "bench.json"
    argv = ["bench", "--backends", "sqlite", "--seconds", "0.3", "--concurrency", "1,4"]

    assert main([*argv, "--json", str(figures)]) == 0

    report = capsys.readouterr().out
    check = re.search(r"acknowledged (\d+), stored (\d+)", report)
    assert check is not None and int(check[1]) > 0 and check[1] == check[2]
    assert "durability check passed" in report
    assert re.search(r"^ +4  episode per worker +\d+ +\d+\.\d\d / \d+\.\d\d", report, re.MULTILINE)
    (sqlite,) = json.loads(figures.read_text())["backends"]
    rows = sqlite["rows"]
    assert [(r["in_flight"], r["variant"]) for r in rows] == [
        (level, variant) for level in (1, 4) for variant in ("episode per worker", "one shared episode")
    ]
    assert all(r["echo"]["rps"] > 0 and r["add"]["rps"] > 0 and r["add"]["errors"] == 0 for r in rows)
    assert all(0 < r["add"]["p50_ms"] <= r["add"]["p99_ms"] for r in rows)
