"""`episodic-lab bench-context` end to end on SQLite with tiny settings: a real server
subprocess, real BuildContext calls against Echo, latency by history length, RSS figures,
and a report (printed and JSON) with every row there. Never asserts a timing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from episodic_lab.cli import main

pytestmark = pytest.mark.slow  # the lab's benchmark, seconds of load: `pytest -m slow` runs it

ROWS = [(recall, level) for level in (1, 2) for recall in ("recency", "hybrid")]


def test_bench_context_reports_throughput_history_latency_and_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    figures, plot = tmp_path / "bench-context.json", tmp_path / "bench-context.png"
    argv = ["bench-context", "--seconds", "0.2", "--warmup", "0.1", "--concurrency", "1,2"]
    argv += ["--history", "20,60", "--conversations", "2", "--embed-queries", "0"]

    assert main([*argv, "--json", str(figures), "--plot", str(plot)]) == 0

    report = capsys.readouterr().out
    for recall, level in ROWS:  # recall, in-flight, echo rps, echo p50 / p99
        assert re.search(rf"^ *{recall} +{level} +[\d,]+ +\d+\.\d\d / \d+\.\d\d ", report, re.MULTILINE)
    for messages in ("20", "60"):
        assert re.search(rf"^{messages} +\d+\.\d +\w+", report, re.MULTILINE)
    assert "p50(60) / p50(20) = " in report
    assert re.search(r"per active conversation: 2 conversations of \d+ messages", report)
    assert re.search(r"one conversation growing: 20 msgs [\d.]+ MiB, 60 msgs [\d.]+ MiB", report)
    assert "reproduce: episodic-lab bench-context --backends sqlite --seconds 0.2" in report
    assert plot.stat().st_size > 0 or "matplotlib is not installed" in report

    (sqlite,) = json.loads(figures.read_text())["backends"]
    assert [(row["recall"], row["in_flight"]) for row in sqlite["throughput"]] == ROWS
    for row in sqlite["throughput"]:
        assert row["build"]["calls"] > 0 and row["build"]["errors"] == 0 and row["echo"]["calls"] > 0
        assert row["rendered"]["mean_recalled"] == 10 and row["rendered"]["mean_tokens"] > 3000
    assert [row["messages"] for row in sqlite["history"]] == [20, 60]
    assert all(0 < row["warm"]["p50_ms"] <= row["warm"]["p99_ms"] for row in sqlite["history"])
    assert [point[0] for point in sqlite["growth"]["points"]] == [20, 60]
    assert sqlite["per_conversation"]["after_mib"] > 0
