"""Figures from raw latencies (nearest-rank percentiles), the text tables, and the JSON."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from episodic_lab.bench.durability import DurabilityCheck
from episodic_lab.bench.load import LoadResult
from episodic_lab.bench.options import Options

PER_WORKER = "episode per worker"
SHARED = "one shared episode"
TARGET_RATIO = 0.5
LEGEND = "(ratio = add rps / echo rps; srv CPU = server process user+sys CPU per call, echo / add)"
HEADERS = (
    "in-flight",
    "add episodes",
    "echo rps",
    "echo p50/p99 ms",
    "add rps",
    "add p50/p99 ms",
    "add/echo",
    "srv CPU ms/call",
)


@dataclass(frozen=True, slots=True)
class Figures:
    calls: int
    errors: int
    seconds: float
    rps: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    server_cpu_ms_per_call: float  # NaN where /proc is missing
    first_error: str

    @classmethod
    def of(cls, result: LoadResult, server_cpu_seconds: float) -> Figures:
        ordered = sorted(result.latencies)
        p50, p90, p99, top = (percentile(ordered, q) * 1000 for q in (50, 90, 99, 100))
        cpu = server_cpu_seconds * 1000 / result.calls if result.calls else math.nan
        count = (result.calls, result.errors, result.seconds, result.rps)
        return cls(*count, p50, p90, p99, top, cpu, result.first_error)


@dataclass(frozen=True, slots=True)
class Row:
    in_flight: int
    variant: str
    echo: Figures
    add: Figures

    @property
    def ratio(self) -> float:
        return self.add.rps / self.echo.rps if self.echo.rps else math.nan


@dataclass(frozen=True, slots=True)
class BackendReport:
    backend: str
    rows: tuple[Row, ...] = ()
    durability: DurabilityCheck | None = None
    server_command: tuple[str, ...] = ()
    database: str = ""  # e.g. "PostgreSQL 16.4"
    skipped: str = ""  # why the backend was not measured; empty when it was


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of sorted values: a latency some call really had."""
    if not ordered:
        return math.nan
    rank = math.ceil(q / 100 * len(ordered))
    return ordered[max(rank, 1) - 1]


def table(rows: Sequence[Row]) -> str:
    cells = [HEADERS, *(_cells(row) for row in rows)]
    widths = [max(len(line[i]) for line in cells) for i in range(len(HEADERS))]
    lines = ["  ".join(_aligned(i, text, widths[i]) for i, text in enumerate(line)) for line in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def _cells(row: Row) -> tuple[str, ...]:
    return (
        str(row.in_flight),
        row.variant,
        f"{row.echo.rps:.0f}",
        _latency(row.echo),
        f"{row.add.rps:.0f}",
        _latency(row.add),
        f"{row.ratio:.0%}",
        f"{row.echo.server_cpu_ms_per_call:.2f} / {row.add.server_cpu_ms_per_call:.2f}",
    )


def _latency(figures: Figures) -> str:
    return f"{figures.p50_ms:.2f} / {figures.p99_ms:.2f}"


def _aligned(column: int, text: str, width: int) -> str:
    return text.ljust(width) if column == 1 else text.rjust(width)


def error_lines(rows: Sequence[Row]) -> list[str]:
    """One line per cell that had failed calls, with the first failure."""
    found: list[str] = []
    for row in rows:
        for name, figures in (("echo", row.echo), (f"add ({row.variant})", row.add)):
            if figures.errors:
                failure = figures.first_error[:200]
                found.append(f"{figures.errors} failed {name} calls at {row.in_flight} in flight: {failure}")
    return found


def target_line(rows: Sequence[Row]) -> str:
    """The issue's SQLite target, judged on the common case of an episode per worker."""
    judged = [row for row in rows if row.variant == PER_WORKER]
    met = ", ".join(str(row.in_flight) for row in judged if row.ratio >= TARGET_RATIO) or "none"
    missed = ", ".join(str(row.in_flight) for row in judged if not row.ratio >= TARGET_RATIO) or "none"
    return f"target add/echo >= {TARGET_RATIO:.0%} ({PER_WORKER}): met at in-flight {met}; missed at {missed}"


def to_json(machine: dict[str, str], options: Options, backends: Sequence[BackendReport]) -> str:
    document = {
        "machine": machine,
        "options": dataclasses.asdict(options),
        "backends": [_backend_json(report) for report in backends],
    }
    return json.dumps(_finite(document), indent=2) + "\n"


def _backend_json(report: BackendReport) -> dict[str, Any]:
    durability = report.durability
    return {
        "backend": report.backend,
        "skipped": report.skipped,
        "server_command": list(report.server_command),
        "durability": {**dataclasses.asdict(durability), "passed": durability.passed} if durability else None,
        "rows": [{**dataclasses.asdict(row), "ratio": row.ratio} for row in report.rows],
    }


def _finite(value: Any) -> Any:
    """NaN (a cell without one successful call) as null: strict JSON has no NaN."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def header(machine: dict[str, str], options: Options) -> str:
    facts = ", ".join(f"{key} {value}" for key, value in machine.items())
    cell = f"{options.warmup:g} s warm-up, then {options.seconds:g} s measured"
    return "\n".join(
        [
            "Episodic bench: durable AddMessage vs Echo, served by the same server process",
            f"machine: {facts}",
            f"each cell: closed loop, N calls in flight on one channel; {cell}",
            "server: a subprocess with default settings (INFO access log); load: this process",
        ]
    )


def section(report: BackendReport) -> str:
    title = f"== {report.backend}" + (f" ({report.database})" if report.database else "") + " =="
    if report.skipped:
        return f"{title}\nskipped: {report.skipped}"
    lines = [title, "server: " + " ".join(report.server_command), "", table(report.rows), LEGEND, ""]
    lines += error_lines(report.rows)
    lines += [report.durability.line()] if report.durability else []
    lines += [target_line(report.rows)] if report.backend == "sqlite" else []
    return "\n".join(lines)


def reproduce(options: Options) -> str:
    command = [
        "episodic-lab bench",
        f"--backends {','.join(options.backends)}",
        f"--seconds {options.seconds:g}",
        f"--warmup {options.warmup:g}",
        f"--concurrency {','.join(map(str, options.concurrency))}",
    ]
    if "postgres" in options.backends:
        command.append(f"--postgres-admin-url {options.postgres_admin_url}")
    return "reproduce: " + " ".join(command)
