"""`episodic-lab bench-replicas` end to end with tiny sizes: real replica subprocesses on a
throwaway PostgreSQL database, a report with every section, figures in the JSON. Checks
the report's shape, never the timings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from episodic_lab.cli import main

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # slow: the lab's benchmark, seconds of load


def test_bench_replicas_reports_visibility_startup_and_throughput(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    figures = tmp_path / "replicas.json"
    argv = ["bench-replicas", "--trials", "2", "--vectors", "250", "--starts", "1", "--hot-scopes", "2"]
    argv += ["--replicas", "1,2", "--seconds", "0.3", "--concurrency", "2", "--json", str(figures)]

    assert main(argv) == 0

    report = capsys.readouterr().out
    for kind in ("digest", "memory", r"erasure \(search\)", r"erasure \(index\)"):
        assert re.search(rf"^  {kind} +2 +\d+\.\d", report, re.MULTILINE), kind
    assert re.search(r"^ +250 +2 +\d+\.\d", report, re.MULTILINE)
    assert "cores, shared by the load generator" in report
    written = json.loads(figures.read_text())
    assert all(v["missed"] == 0 and len(v["seconds"]) == 2 for v in written["visibility"].values())
    assert [r["replicas"] for r in written["throughput"]] == [1, 2]
    assert all(r["errors"] == 0 and r["mixed_rps"] > 0 for r in written["throughput"])
    (startup,) = written["startup"]
    assert startup["hot_scopes"] == 2 and startup["rss_hot_mib"] > 0
