"""The table: the baseline in ms, each abuse as ratios to it (p50 and p99 of tenant B's
calls, Echo p50), how many of B's calls each phase measured (a p99 of few calls is noise),
tenant A's done/refused/errors, whether health stayed SERVING, and the
target (B's p99 within 3x of alone, health SERVING; slowloris also Echo p99 within 3x)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict

import numpy as np

from episodic_lab.bench_fairness.phases import PhaseResult
from episodic_lab.bench_fairness.victim import ECHO, METHODS

TARGET_RATIO = 3.0
SLOWLORIS = "slowloris"
SAMPLED = (*METHODS, ECHO)  # the calls counted in the table's "B calls" column


def percentile(seconds: Sequence[float], q: float) -> float:
    return float(np.percentile(seconds, q)) * 1000 if seconds else math.nan


def ratio(phase: PhaseResult, base: PhaseResult, method: str, q: float) -> float:
    alone = percentile(base.b.seconds[method], q)
    return percentile(phase.b.seconds[method], q) / alone if alone > 0 else math.nan


def table(base: PhaseResult, phases: Sequence[PhaseResult]) -> str:
    methods = " | ".join(f"B {m} p50× | p99×" for m in METHODS)
    lines = [
        f"| abuse | {methods} | Echo p50× | B calls {'/'.join(SAMPLED)} | A done/refused/errors "
        "| health SERVING | target |",
        "|---" * (len(METHODS) * 2 + 6) + "|",
        _baseline_row(base),
    ]
    lines += [_row(phase, base) for phase in phases]
    return "\n".join(lines)


def _baseline_row(base: PhaseResult) -> str:
    cells = [f"{percentile(base.b.seconds[m], q):.1f} ms" for m in METHODS for q in (50, 99)]
    echo = f"{percentile(base.b.seconds[ECHO], 50):.2f} ms"
    health = _yes(base.health.always_serving)
    return f"| {base.name} (abs.) | {' | '.join(cells)} | {echo} | {samples(base)} | - | {health} | - |"


def _row(phase: PhaseResult, base: PhaseResult) -> str:
    cells = [_times(ratio(phase, base, m, q)) for m in METHODS for q in (50, 99)]
    a = phase.a
    tally = f"{a.done}/{a.refused}/{a.errors}" if a else "-"
    verdict = "PASS" if passed(phase, base) else "MISS"
    echo = _times(ratio(phase, base, ECHO, 50))
    health = _yes(phase.health.always_serving)
    row = (phase.name, " | ".join(cells), echo, samples(phase), tally, health, verdict)
    return "| " + " | ".join(row) + " |"


def samples(phase: PhaseResult) -> str:
    """How many of each of B's calls the phase measured (successful ones: the percentiles' samples)."""
    return "/".join(str(len(phase.b.seconds.get(name, ()))) for name in SAMPLED)


def passed(phase: PhaseResult, base: PhaseResult) -> bool:
    """Every B p99 within the target ratio, B never failed, health always SERVING."""
    measured = list(METHODS) + ([ECHO] if phase.name == SLOWLORIS else [])
    within = all(ratio(phase, base, m, 99) <= TARGET_RATIO for m in measured)  # NaN compares False
    return within and not sum(phase.b.errors.values()) and phase.health.always_serving


def notes(phases: Sequence[PhaseResult], base: PhaseResult) -> str:
    """What the table has no column for: B's errors, A's first error, RSS, abuse figures."""
    lines = []
    for phase in (base, *phases):
        parts = [f"server RSS {phase.rss.start_mib:.0f} -> peak {phase.rss.peak_mib:.0f} MiB "
                 f"(+{phase.rss.growth_mib:.0f})"]  # fmt: skip
        parts.append(f"server CPU {phase.server_cpu_seconds:.1f} s")
        parts.append(f"Echo p99× {_times(ratio(phase, base, ECHO, 99))}")
        parts.append(f"health {phase.health.serving}/{phase.health.polls} SERVING")
        if phase.b.errors:
            parts.append(f"B errors {dict(phase.b.errors)} (first: {phase.b.first_error})")
        if not phase.health.always_serving and phase.health.first_problem:
            parts.append(f"health: {phase.health.first_problem}")
        if phase.a is not None:
            parts += [f"{key} {value:g}" for key, value in phase.a.notes.items()]
            if phase.a.first_error:
                parts.append(f"A's first error: {phase.a.first_error}")
        lines.append(f"- {phase.name}: " + "; ".join(parts))
    return "\n".join(lines)


def to_json(header: dict[str, object], base: PhaseResult, phases: Sequence[PhaseResult]) -> str:
    def figures(phase: PhaseResult) -> dict[str, object]:
        raw = asdict(phase)
        raw["b"]["ms"] = {
            m: {"p50": percentile(s, 50), "p99": percentile(s, 99), "calls": len(s)}
            for m, s in phase.b.seconds.items()
        }
        raw["pass"] = passed(phase, base) if phase is not base else None
        return raw

    return json.dumps({**header, "phases": [figures(p) for p in (base, *phases)]}, indent=2) + "\n"


def _times(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}×"


def _yes(value: bool) -> str:
    return "yes" if value else "NO"
