"""bench-fairness measures enough of tenant B's calls per phase that a p99 means something,
and says how many it measured."""

from __future__ import annotations

import argparse

from episodic_lab.bench_fairness.options import B_METHODS, add_flags, options_from
from episodic_lab.bench_fairness.phases import PhaseResult
from episodic_lab.bench_fairness.plan import Tally
from episodic_lab.bench_fairness.probes import Health, Latencies, Rss
from episodic_lab.bench_fairness.report import table

PHASE_SECONDS = 20.0


def _defaults() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_flags(parser)
    return parser.parse_args([])


def _phase(name: str, calls: int, a: Tally | None = None) -> PhaseResult:
    seconds = {m: [0.01 + i / 1000 for i in range(calls)] for m in (*B_METHODS, "Echo")}
    return PhaseResult(name, Latencies(seconds), Health(2, 2), Rss(), 1.0, a)


def test_tenant_b_calls_each_method_at_least_100_times_in_a_default_phase() -> None:
    options = options_from(_defaults())
    per_method = options.b_rate / len(B_METHODS) * options.seconds
    assert options.b_rate >= 10
    assert per_method >= 100


def test_the_table_shows_how_many_of_b_s_calls_each_phase_measured() -> None:
    shown = table(_phase("alone", 100), [_phase("flood", 97, Tally(done=5))])
    alone, flood = shown.splitlines()[2:]
    assert "| 100/100/100/100 |" in alone
    assert "| 97/97/97/97 |" in flood
    assert "B calls AddMessage/BuildContext/SearchEpisodes/Echo" in shown.splitlines()[0]
