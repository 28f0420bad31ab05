"""`episodic-lab soak` end to end on SQLite with tiny settings: a real server subprocess, real
BuildContext streams and appends at once, RSS sampled, every acknowledged append found
stored, and a report (printed and JSON) with every summary line. Never asserts a timing,
nor bounds RSS: the soak's own RSS verdict is a measurement of a long run (its default
limit, 25% after the warm-up), here set out of reach so only the figures' shape is checked."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from episodic_lab.cli import main

pytestmark = pytest.mark.slow  # the lab's benchmark, seconds of load: `pytest -m slow` runs it

SUMMARY_LINES = (
    r"^BuildContext +[\d,]+ +[\d,.]+ +\d+\.\d\d +\d+\.\d\d +\d+\.\d\d +\d+\.\d\d +0$",
    r"^AddMessage +[\d,]+ +[\d,.]+ +\d+\.\d\d +\d+\.\d\d +\d+\.\d\d +\d+\.\d\d +0$",
    r"^errors by status code: none$",
    r"^server CPU: [\d.]+ s user\+sys over [\d.]+ s",
    r"^compactions observed: [\d,]+ reports with compaction SUMMARIZED of [\d,]+",
    r"^server RSS \(VmRSS\): start [\d.]+ MiB, after setup [\d.]+, after warm-up [\d.]+, max [\d.]+, end",
    r"^RSS growth after the warm-up \(peak - warm\): [+-][\d.]+ MiB \([+-][\d.]+%\), bounded",
    r"^stored check passed: 4 conversations, [\d,]+ acknowledged messages .* seqs 1\.\.n, no gap",
    r"^server health after the load: SERVING$",
    r"^soak passed$",
    r"^reproduce: episodic-lab soak --backends sqlite --seconds 3 ",
)


def test_soak_reports_calls_errors_rss_and_stored_appends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    figures = tmp_path / "soak.json"
    argv = ["soak", "--seconds", "3", "--streams", "4", "--appenders", "2", "--conversations", "4"]
    argv += ["--max-rss-growth-pct", "1000000"]  # see the module docstring

    assert main([*argv, "--json", str(figures)]) == 0

    report = capsys.readouterr().out
    for line in SUMMARY_LINES:
        assert re.search(line, report, re.MULTILINE), line
    assert re.search(r"^ +\d+\.\d s +BuildContext +[\d,]+ +appends", report, re.MULTILINE)
    document = json.loads(figures.read_text())
    (sqlite,) = document["backends"]
    assert document["passed"] and sqlite["failures"] == []
    assert sqlite["load"]["build"]["calls"] > 0 and sqlite["load"]["append"]["calls"] > 0
    assert sqlite["load"]["errors"] == {} and sqlite["stored"]["passed"]
    assert sqlite["stored"]["acknowledged"] == sqlite["stored"]["stored"]
