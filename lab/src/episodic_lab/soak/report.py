"""The printed report: a header (machine, load, conversations, agent), per backend the
summary after its progress lines, the verdict, the command; and the JSON (--json)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from episodic_lab.bench.report import Figures
from episodic_lab.bench.report import _finite as finite
from episodic_lab.bench_context.client import BUDGET_TOKENS, RECALL_TOP_K
from episodic_lab.bench_recall.report import _table as text_table
from episodic_lab.soak import conversations as setup
from episodic_lab.soak.checks import StoredCheck
from episodic_lab.soak.load import SAMPLE_SECONDS, SHARED_CALL_SHARE
from episodic_lab.soak.options import Options
from episodic_lab.soak.results import LoadFigures, SoakResult

CALL_HEADERS = ("call", "calls", "calls/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "errors")


def header(machine: dict[str, str], options: Options, embedder: str) -> str:
    facts = ", ".join(f"{key} {value}" for key, value in machine.items())
    past = f"{setup.PAST_EPISODES} closed, digested episodes of {setup.PAST_EPISODE_MESSAGES} turns"
    return "\n".join(
        [
            "Episodic soak: concurrent BuildContext streams and appends against one server, on loopback",
            f"machine: {facts}",
            f"load: {options.streams} BuildContext streams (stream i on conversation i, "
            f"{SHARED_CALL_SHARE:.1%} of calls on a random one)",
            f"      + {options.appenders} AddMessage workers (one turn to a random conversation per call);",
            f"      closed loops on one channel for {options.seconds:g} s; server RSS sampled every "
            f"{SAMPLE_SECONDS:g} s, baseline after {options.warmup:g} s of warm-up",
            f"conversations: {options.conversations} open episodes of {setup.OPENING_MESSAGES} opening "
            f"messages, each its own user's, who has {past}",
            f"agent: budget {BUDGET_TOKENS} tokens, RECENCY recall top {RECALL_TOP_K}; BuildContext passes "
            "a user message and appends nothing",
            f"server: a subprocess with default settings (INFO access log), embedder {embedder}; "
            "load: this process",
        ]
    )


def title(backend: str, database: str) -> str:
    return f"== {backend}" + (f" ({database})" if database else "") + " =="


def summary(result: SoakResult) -> str:
    lines = [] if result.load is None else _load_lines(result.load)
    if result.stored is not None:
        appends = result.load.append.calls if result.load else 0
        lines += [
            _stored_line(result.stored, appends),
            f"server health after the load: {_health(result.healthy)}",
        ]
    lines += _log_lines(result.server_log) if result.load is not None else []
    return "\n".join([*lines, verdict(result)])


def _load_lines(load: LoadFigures) -> list[str]:
    rows = [_call_cells("BuildContext", load.build), _call_cells("AddMessage", load.append)]
    seconds = load.build.seconds
    return [
        text_table(CALL_HEADERS, rows),
        *_error_lines(load),
        f"server CPU: {load.server_cpu_seconds:.1f} s user+sys over {seconds:.1f} s "
        f"({load.server_cpu_seconds / seconds:.2f} cores busy)",
        _compaction_line(load),
        *_rss_lines(load),
    ]


def _call_cells(name: str, figures: Figures) -> tuple[str, ...]:
    latencies = (figures.p50_ms, figures.p90_ms, figures.p99_ms, figures.max_ms)
    counts = (f"{figures.calls:,}", f"{figures.rps:,.1f}")
    return (name, *counts, *(f"{ms:.2f}" for ms in latencies), f"{figures.errors:,}")


def _error_lines(load: LoadFigures) -> list[str]:
    if not load.errors:
        return ["errors by status code: none"]
    lines = [f"errors by status code ({load.error_count:,} in all):"]
    for key, count in sorted(load.errors.items(), key=lambda item: -item[1]):
        lines.append(f"  {key}: {count:,} (first: {load.first_errors.get(key, '')[:200]})")
    return lines


def _compaction_line(load: LoadFigures) -> str:
    others = ", ".join(
        f"{name.removeprefix('COMPACTION_')} {count:,}" for name, count in sorted(load.compactions.items())
    )
    return (
        f"compactions observed: {load.summarized:,} reports with compaction SUMMARIZED "
        f"of {load.build.calls:,} (by kind: {others or 'none'})"
    )


def _rss_lines(load: LoadFigures) -> list[str]:
    rss = load.rss
    verdict = "bounded" if rss.bounded else "NOT bounded"
    return [
        f"server RSS (VmRSS): start {rss.start_mib:.1f} MiB, after setup {rss.setup_mib:.1f}, "
        f"after warm-up {rss.warm_mib:.1f}, max {rss.max_mib:.1f}, end {rss.end_mib:.1f} MiB",
        f"RSS growth after the warm-up (peak - warm): {rss.growth_mib:+.1f} MiB ({rss.growth_pct:+.1f}%), "
        f"{verdict} (limit {rss.limit_pct:g}%)",
    ]


def _stored_line(stored: StoredCheck, appends: int) -> str:
    verdict = "passed" if stored.passed else "FAILED"
    dense = "seqs 1..n, no gap, in every conversation"
    if stored.mismatched:
        dense = f"{len(stored.mismatched)} conversations' seqs are not 1..acknowledged"
    return (
        f"stored check {verdict}: {stored.conversations} conversations, {stored.acknowledged:,} "
        f"acknowledged messages ({stored.acknowledged - appends:,} opening + {appends:,} appends), "
        f"{stored.stored:,} stored; {dense}"
    )


def _health(healthy: bool) -> str:
    return "SERVING" if healthy else "NOT SERVING"


def _log_lines(problems: dict[str, int]) -> list[str]:
    if not problems:
        return ["server log above INFO: none"]
    top = sorted(problems.items(), key=lambda item: -item[1])[:10]
    return ["server log above INFO:", *(f"  {count:,} x {entry}" for entry, count in top)]


def verdict(result: SoakResult) -> str:
    return "soak passed" if result.passed else "soak FAILED: " + "; ".join(result.failures)


def reproduce(options: Options) -> str:
    command = [
        "episodic-lab soak",
        f"--backends {','.join(options.backends)}",
        f"--seconds {options.seconds:g}",
        f"--warmup {options.warmup:g}",
        f"--streams {options.streams}",
        f"--appenders {options.appenders}",
        f"--conversations {options.conversations}",
        f"--max-rss-growth-pct {options.max_rss_growth_pct:g}",
    ]
    if "postgres" in options.backends:
        command.append(f"--postgres-admin-url {options.postgres_admin_url}")
    return "reproduce: " + " ".join(command)


def to_json(machine: dict[str, str], options: Options, results: Sequence[SoakResult]) -> str:
    document = {
        "machine": machine,
        "options": dataclasses.asdict(options),
        "backends": [_result_json(result) for result in results],
        "passed": all(result.passed for result in results),
    }
    return json.dumps(finite(document), indent=2) + "\n"


def _result_json(result: SoakResult) -> dict[str, Any]:
    document = dataclasses.asdict(result)
    if result.load is not None:
        rss = result.load.rss
        document["load"]["rss"].update(
            growth_mib=rss.growth_mib, growth_pct=rss.growth_pct, bounded=rss.bounded
        )
    if result.stored is not None:
        document["stored"]["passed"] = result.stored.passed
    return {**document, "passed": result.passed, "failures": result.failures}
