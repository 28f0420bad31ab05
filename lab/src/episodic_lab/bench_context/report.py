"""The printed report: a header with the machine's facts, per backend the three tables
(throughput against Echo, latency by log length, memory), the targets, the command."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from episodic_lab.bench.report import Figures
from episodic_lab.bench_context.client import BUDGET_TOKENS, RECALL_TOP_K
from episodic_lab.bench_context.conversations import FILL_SHARE, PAST_EPISODE_MESSAGES, PAST_EPISODES
from episodic_lab.bench_context.history import HistoryRow, p50_ratio
from episodic_lab.bench_context.memory import Growth, PerConversation
from episodic_lab.bench_context.messages import pool
from episodic_lab.bench_context.options import Options
from episodic_lab.bench_context.throughput import ThroughputRow
from episodic_lab.bench_recall.embedding import EmbeddingCost
from episodic_lab.bench_recall.report import _table as text_table

TARGET_RATIO = 0.30
TARGET_P99_MS = 10.0
TARGET_P50_GROWTH = 1.2
THROUGHPUT_HEADERS = (
    "recall", "in-flight", "echo rps", "echo p50/p99 ms", "build rps", "build p50/p99 ms", "build/echo",
    "srv CPU ms/call", "tokens", "recalled",
)  # fmt: skip
THROUGHPUT_LEGEND = (
    "(build/echo = BuildContext rps / Echo rps; srv CPU = server user+sys CPU per call, echo / build;\n"
    " tokens = mean report.total_tokens; recalled = mean recalled episodes rendered)"
)
_Check = Callable[[ThroughputRow], bool]
HISTORY_HEADERS = (
    "messages",
    "cold ms",
    "cold compaction",
    "calls",
    "p50 ms",
    "p90 ms",
    "p99 ms",
    "max ms",
    "tokens",
)


@dataclass(frozen=True, slots=True)
class BackendReport:
    backend: str
    database: str = ""  # e.g. "SQLite 3.46.1"
    server_command: tuple[str, ...] = ()
    throughput: tuple[ThroughputRow, ...] = ()
    history: tuple[HistoryRow, ...] = ()
    per_conversation: PerConversation | None = None
    growth: Growth | None = None
    skipped: str = ""  # why the backend was not measured; empty when it was


def header(machine: dict[str, str], options: Options) -> str:
    facts = ", ".join(f"{key} {value}" for key, value in machine.items())
    past = f"{PAST_EPISODES} closed, digested episodes ({PAST_EPISODE_MESSAGES} turns each)"
    return "\n".join(
        [
            "Episodic bench-context: BuildContext vs Echo, served by the same server process",
            f"machine: {facts}",
            f"agent: budget {BUDGET_TOKENS} tokens, recall RECENCY top {RECALL_TOP_K} "
            "(hybrid rows: recall_mode HYBRID set per call)",
            f"throughput: per worker its own user with {past} and an open conversation filled to "
            f"~{FILL_SHARE:.0%} of the budget;",
            f"        each call passes {_messages(options)} and appends nothing, so the log stays as it is",
            f"each cell: closed loop, N calls in flight on one channel; {options.warmup:g} s warm-up, "
            f"then {options.seconds:g} s measured",
            f"server: a subprocess with default settings (INFO access log), embedder {options.embedder}; "
            "load: this process",
        ]
    )


def _messages(options: Options) -> str:
    if options.same_message:
        return "the same user message (--same-message: the query-embedding cache answers)"
    return f"a different user message (a pool of {len(pool()):,}, more than the query-embedding cache holds)"


def section(report: BackendReport) -> str:
    title = f"== {report.backend}" + (f" ({report.database})" if report.database else "") + " =="
    if report.skipped:
        return f"{title}\nskipped: {report.skipped}"
    lines = [title, "server: " + " ".join(report.server_command), ""]
    lines += [*_throughput_lines(report.throughput), "", *_history_lines(report.history), ""]
    lines += [*_memory_lines(report.per_conversation, report.growth), ""]
    return "\n".join(lines + target_lines(report))


def _throughput_lines(rows: Sequence[ThroughputRow]) -> list[str]:
    title = (
        f"BuildContext vs Echo (~{BUDGET_TOKENS // 1000}k-token context, {RECALL_TOP_K} recalled episodes)"
    )
    table = text_table(THROUGHPUT_HEADERS, [_throughput_cells(row) for row in rows])
    return [title, table, THROUGHPUT_LEGEND, *_error_lines(rows)]


def _throughput_cells(row: ThroughputRow) -> tuple[str, ...]:
    cpu = f"{row.echo.server_cpu_ms_per_call:.2f} / {row.build.server_cpu_ms_per_call:.2f}"
    rendered = (f"{row.rendered.mean_tokens:,.0f}", f"{row.rendered.mean_recalled:.1f}")
    rates = (f"{row.echo.rps:,.0f}", _p50_p99(row.echo), f"{row.build.rps:,.0f}", _p50_p99(row.build))
    return (row.recall, str(row.in_flight), *rates, f"{row.ratio:.0%}", cpu, *rendered)


def _p50_p99(figures: Figures) -> str:
    return f"{figures.p50_ms:.2f} / {figures.p99_ms:.2f}"


def _error_lines(rows: Sequence[ThroughputRow]) -> list[str]:
    cells = [(f"echo at {r.in_flight}", r.echo) for r in rows] + [
        (f"BuildContext ({r.recall}) at {r.in_flight}", r.build) for r in rows
    ]
    return [f"{f.errors} failed {name} in flight: {f.first_error[:200]}" for name, f in cells if f.errors]


def _history_lines(rows: Sequence[HistoryRow]) -> list[str]:
    title = "Latency vs history length (1 in flight; cold = the first call, which builds the working set)"
    lines = [title, text_table(HISTORY_HEADERS, [_history_cells(row) for row in rows])]
    if len(rows) > 1:
        lines.append(f"p50({rows[-1].messages:,}) / p50({rows[0].messages:,}) = {p50_ratio(rows):.2f}x")
    return lines


def _history_cells(row: HistoryRow) -> tuple[str, ...]:
    w, cold = row.warm, row.cold
    compaction = cold.compaction + (f" {cold.messages_summarized:,}" if cold.messages_summarized else "")
    latencies = (f"{w.p50_ms:.2f}", f"{w.p90_ms:.2f}", f"{w.p99_ms:.2f}", f"{w.max_ms:.2f}")
    return (f"{row.messages:,}", f"{cold.ms:.1f}", compaction, f"{w.calls:,}", *latencies, _tokens(row))


def _tokens(row: HistoryRow) -> str:
    return f"{row.rendered.mean_tokens:,.0f}"


def _memory_lines(per: PerConversation | None, growth: Growth | None) -> list[str]:
    lines = ["Memory (server VmRSS)"]
    if per is not None:
        lines.append(
            f"per active conversation: {per.conversations} conversations of {per.messages_each} messages, "
            f"first BuildContext each: {per.before_mib:.1f} -> {per.after_mib:.1f} MiB, "
            f"{per.kib_each:.1f} KiB each"
        )
    if growth is not None and growth.points:
        steps = ", ".join(f"{messages:,} msgs {mib:.1f} MiB" for messages, mib in growth.points)
        lines.append(f"one conversation growing: {steps} ({growth.change_mib:+.1f} MiB)")
    return lines


def target_lines(report: BackendReport) -> list[str]:
    """The issue's targets, judged on the RECENCY rows (the agent's own configuration)."""
    judged = [row for row in report.throughput if row.recall == "recency"]
    lines = [
        _verdict(f"target build/echo >= {TARGET_RATIO:.0%}", judged, lambda r: r.ratio >= TARGET_RATIO),
        _verdict(f"target p99 <= {TARGET_P99_MS:g} ms", judged, lambda r: r.build.p99_ms <= TARGET_P99_MS),
    ]
    if len(report.history) > 1:
        ratio = p50_ratio(report.history)
        met = "met" if ratio <= TARGET_P50_GROWTH else "MISSED"
        lines.append(
            f"target p50 growth <= {TARGET_P50_GROWTH:g}x over the history lengths: {met} ({ratio:.2f}x)"
        )
    return lines


def _verdict(name: str, rows: Sequence[ThroughputRow], passes: _Check) -> str:
    met = ", ".join(str(row.in_flight) for row in rows if passes(row)) or "none"
    missed = ", ".join(str(row.in_flight) for row in rows if not passes(row)) or "none"
    return f"{name} (recency): met at in-flight {met}; missed at {missed}"


def embedding_section(cost: EmbeddingCost, server_embedder: str) -> str:
    f, where = cost.figures, "included in" if server_embedder == "minilm" else "NOT included in"
    return "\n".join(
        [
            f"== query embedding: {cost.model_id}, in this process ==",
            f"what SEMANTIC/HYBRID recall adds to each BuildContext with the default embedder "
            f"({where} the hybrid rows above, which ran --embedder {server_embedder}):",
            f"{f.calls} short questions, one per call: p50 {f.p50_ms:.2f} ms, p99 {f.p99_ms:.2f} ms, "
            f"max {f.max_ms:.2f} ms (model load {cost.load_seconds:.1f} s)",
        ]
    )


def reproduce(options: Options) -> str:
    command = [
        "episodic-lab bench-context",
        f"--backends {','.join(options.backends)}",
        f"--seconds {options.seconds:g}",
        f"--warmup {options.warmup:g}",
        f"--concurrency {','.join(map(str, options.concurrency))}",
        f"--history {','.join(map(str, options.history))}",
        f"--conversations {options.conversations}",
        f"--embedder {options.embedder}",
        f"--embed-queries {options.embed_queries}",
    ]
    if options.same_message:
        command.append("--same-message")
    if "postgres" in options.backends:
        command.append(f"--postgres-admin-url {options.postgres_admin_url}")
    return "reproduce: " + " ".join(command)
