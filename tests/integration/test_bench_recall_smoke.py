"""`episodic-lab bench-recall` end to end with tiny settings: a real corpus and server, real
calls in every mode, MiniLM query embedding and a real digest run, and a report (printed
and JSON) with every figure filled in."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from episodic_lab.cli import main

ROWS = ("Echo", "SearchEpisodes semantic", "SearchEpisodes hybrid", "SearchEpisodes recency")
MODES = ("semantic", "hybrid", "hybrid, rare words", "recency")


def test_bench_recall_reports_search_latency_embedding_cost_and_digest_throughput(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    figures = tmp_path / "bench-recall.json"
    argv = ["bench-recall", "--sizes", "1000", "--calls", "50", "--digest-episodes", "5"]

    assert main([*argv, "--embed-queries", "20", "--max-seconds", "5", "--json", str(figures)]) == 0

    report = capsys.readouterr().out
    assert "== 1,000 episodes, 100 users (10 per user) ==" in report
    for row in ROWS:  # name, calls, p50, p90, p99, max (ms), calls/s, p50/echo
        # a loaded machine: figures over 100 ms lose their decimals, over 1,000 ms gain separators
        assert re.search(rf"^{row} +50 +([\d,]+(\.\d+)? +){{4}}[\d,]+ +[\d,]+\.\dx", report, re.MULTILINE), (
            _line(report, row)
        )
    assert re.search(r"^embed query \(hashing\) +50 ", report, re.MULTILINE)
    assert re.search(r"20 short questions, one per call: p50 \d+\.\d\d ms", report)
    assert re.search(r"5 episodes x 20 messages \(~150 chars\): [\d.]+ s, [\d.]+ episodes/s", report)
    assert re.search(r"^target SearchEpisodes p99 <= 5 ms at 1,000 \(1M not measured\)", report, re.MULTILINE)
    assert "reproduce: episodic-lab bench-recall --sizes 1000 --calls 50" in report

    document = json.loads(figures.read_text())
    (size,) = document["sizes"]
    assert size["episodes"] == 1000 and size["users"] == 100
    assert list(size["searches"]) == list(MODES)
    for call in [size["echo"], *size["searches"].values()]:
        assert call["calls"] == 50 and 0 < call["p50_ms"] <= call["p99_ms"] <= call["max_ms"]
        assert call["rps"] > 0
    assert {m["queries"] for m in size["matches"]} == {20}
    assert document["query_embedding"]["figures"]["calls"] == 20
    digest = document["digest"]
    assert digest["episodes"] == 5 and digest["episodes_per_second"] > 0
    assert digest["texts_embedded"] >= 5 * 2  # the digest line and at least one transcript chunk each


def _line(report: str, row: str) -> str:
    """The report's line for `row`, to show what the pattern missed."""
    return next((line for line in report.splitlines() if line.startswith(row)), f"no line for {row!r}")
