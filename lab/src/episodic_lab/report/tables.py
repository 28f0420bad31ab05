"""Each section's Markdown: what was measured, in a sentence or two, then its table and
plot. A section that failed shows its failure instead."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from episodic_lab.bench.report import Figures
from episodic_lab.bench.workloads import CONTENT
from episodic_lab.bench_context.client import BUDGET_TOKENS, RECALL_TOP_K
from episodic_lab.bench_context.conversations import FILL_SHARE, PAST_EPISODES
from episodic_lab.bench_context.history import Cold
from episodic_lab.bench_context.messages import pool
from episodic_lab.bench_recall.digest import DigestRun
from episodic_lab.bench_recall.report import SizeReport
from episodic_lab.bench_recall.words import RARE_FROM_RANK
from episodic_lab.bench_recall.workload import TOP_K as SEARCH_TOP_K
from episodic_lab.report.history import History, LengthRow
from episodic_lab.report.markdown import count, ms, share, table
from episodic_lab.report.memory import RssCurve
from episodic_lab.report.presets import Preset
from episodic_lab.report.search import SearchBySize
from episodic_lab.report.sections import Section
from episodic_lab.report.throughput import Cell

T = TypeVar("T")
QUERY_CACHE_ENTRIES = 1024  # episodic.state.query_vectors.ENTRIES, quoted (importing it loads the server)


def section_lines(
    title: str, section: Section[T], plot: str | None, body: Callable[[T], list[str]]
) -> list[str]:
    lines = [f"## {title}", ""]
    if section.result is None:
        return [*lines, f"**Failed**: `{section.error}`", ""]
    lines += body(section.result)
    return lines + ([f"![{title}]({plot})", ""] if plot else [])


def throughput_lines(cells: Sequence[Cell], preset: Preset) -> list[str]:
    intro = (
        f"Closed loop, N calls in flight on one channel, {preset.warmup:g} s warm-up then "
        f"{preset.seconds:g} s measured per row; Echo measured on the same server just before each "
        f"level's rows. Each worker has its own user with {PAST_EPISODES} digested past episodes and "
        f"its own conversation filled to ~{FILL_SHARE:.0%} of the budget. BuildContext: "
        f"{BUDGET_TOKENS:,}-token budget, recall top {RECALL_TOP_K}, MiniLM, a different user message "
        f"per call (a pool of {len(pool()):,} texts, more than the server's {QUERY_CACHE_ENTRIES:,}-entry "
        "query-embedding cache), nothing appended. SearchEpisodes: top "
        f"{RECALL_TOP_K} of the worker's user's episodes, the next message as the query. AddMessage: "
        f"one episode per worker, {len(CONTENT)}-character turns. Echo carries a user message's bytes."
    )
    rows = []
    for level in sorted({cell.in_flight for cell in cells}):
        at_level = [cell for cell in cells if cell.in_flight == level]
        rows.append(_echo_cells(at_level[0].echo, level))
        rows += [_rpc_cells(cell) for cell in at_level]
    headers = (
        "RPC",
        "in flight",
        "calls/s",
        "share of Echo",
        "p50 ms",
        "p99 ms",
        "server CPU ms/call",
        "errors",
    )
    return [intro, "", table(headers, rows), "", *_rendered_lines(cells), *_error_lines(cells)]


def _echo_cells(echo: Figures, level: int) -> tuple[str, ...]:
    return ("Echo", str(level), count(echo.rps), "100%", *_figures(echo))


def _rpc_cells(cell: Cell) -> tuple[str, ...]:
    return (
        cell.rpc,
        str(cell.in_flight),
        count(cell.figures.rps),
        share(cell.ratio),
        *_figures(cell.figures),
    )


def _figures(f: Figures) -> tuple[str, ...]:
    return (ms(f.p50_ms), ms(f.p99_ms), ms(f.server_cpu_ms_per_call), str(f.errors))


def _rendered_lines(cells: Sequence[Cell]) -> list[str]:
    rendered = [
        f"{cell.rpc} at {cell.in_flight}: {cell.rendered.mean_tokens:,.0f} tokens, "
        f"{cell.rendered.mean_recalled:.1f} recalled episodes"
        for cell in cells
        if cell.rendered is not None
    ]
    return ["What each BuildContext rendered (means): " + "; ".join(rendered) + ".", ""] if rendered else []


def _error_lines(cells: Sequence[Cell]) -> list[str]:
    failures = [
        f"- {name} at {cell.in_flight} in flight: {f.errors} failed, first: `{f.first_error[:200]}`"
        for cell in cells
        for name, f in (("Echo", cell.echo), (cell.rpc, cell.figures))
        if f.errors
    ]
    return ["Failed calls:", *dict.fromkeys(failures), ""] if failures else []


def history_lines(found: History, preset: Preset) -> list[str]:
    trials = (
        f"{found.trials} fresh server processes, one value each" if found.trials > 1 else "one fresh server"
    )
    intro = (
        f"One call in flight, BuildContext with HYBRID recall and MiniLM, {BUDGET_TOKENS:,}-token budget, "
        "the user's ten digested episodes recalled; logs written with AddMessages in batches of 500. "
        f"**Warm**: p50/p99 after {preset.warmup:g} s of warm-up, {preset.seconds:g} s measured. **Cold**: "
        f"the first BuildContext of a log in a server process that never held it ({trials}; the process "
        "first rendered a short episode of the same user, so its own start-up costs are not counted; the "
        "database file may still be in the OS page cache): of a log that an earlier process had "
        "compacted, and of one never rendered before, which this call compacts. **First call**: in the "
        "process that had just written the log. Cold cells: ms, then what the call's compaction did and "
        "how many log messages the summary it rendered covers (the server reads a bounded tail of a log)."
    )
    headers = (
        "messages", "warm p50 ms", "warm p99 ms", "warm calls", "cold, compacted before",
        "cold, never compacted", "first call (writing server)", "tokens",
    )  # fmt: skip
    imported = found.imported
    note = "" if imported.messages >= 100_000 else f" (size {preset.name}: full imports 100,000)"
    tail = (
        f"Imported {imported.messages:,} messages into one episode{note} in {imported.write_seconds:.1f} s "
        f"({imported.messages / imported.write_seconds:,.0f} messages/s); its cold first BuildContext in a "
        f"fresh server: **{_cold_cell([imported.cold])}**."
    )
    return [intro, "", table(headers, [_length_cells(row) for row in found.rows]), "", tail, ""]


def _length_cells(row: LengthRow) -> tuple[str, ...]:
    warm = (ms(row.warm.p50_ms), ms(row.warm.p99_ms), count(row.warm.calls))
    colds = (_cold_cell(row.cold_compacted), _cold_cell(row.cold_never), _cold_cell([row.first_call]))
    return (f"{row.messages:,}", *warm, *colds, count(row.rendered.mean_tokens))


def _cold_cell(colds: Sequence[Cold]) -> str:
    """Each trial's ms, then what the slowest call's compaction did and how many log messages
    the summary it rendered covers."""
    values = " / ".join(ms(cold.ms) for cold in colds)
    slowest = max(colds, key=lambda cold: cold.ms)
    covered = f"; summary covers {slowest.messages_summarized:,}" if slowest.messages_summarized else ""
    return f"{values} ms ({slowest.compaction}{covered})"


def search_lines(found: SearchBySize) -> list[str]:
    intro = (
        "bench-recall's corpus: N closed episodes with READY digests over U = min(10k, N/10) users, "
        "served in the report's own process (SQLite, no background work, hashing query embedder, so "
        f"the rows are recall's own cost); one call in flight, a random user per call, top {SEARCH_TOP_K}. "
        "Queries are three words drawn like the corpus's (Zipf), so `hybrid` meets common words; "
        f"`hybrid, rare words` leaves out the {RARE_FROM_RANK:,} most frequent."
    )
    headers = ("episodes", "call", "calls", "p50 ms", "p99 ms", "p50 / Echo p50")
    rows = [cells for size in found.sizes for cells in _size_rows(size)]
    e, f = found.embedding, found.embedding.figures
    embedding = (
        f"Query embedding with MiniLM ({e.model_id}, in this process, {f.calls} questions one by one): "
        f"p50 **{ms(f.p50_ms)} ms**, p99 {ms(f.p99_ms)} ms (model load {e.load_seconds:.1f} s). The server "
        "pays it before a `semantic` or `hybrid` search with its default embedder: add it to those rows."
    )
    return [intro, "", table(headers, rows, names=2), "", embedding, ""]


def _size_rows(size: SizeReport) -> list[tuple[str, ...]]:
    calls = {"Echo": size.echo} | {f"SearchEpisodes {mode}": f for mode, f in size.searches.items()}
    echo_p50 = size.echo.p50_ms
    return [
        (
            f"{size.episodes:,}",
            name,
            f"{f.calls:,}",
            ms(f.p50_ms),
            ms(f.p99_ms),
            f"{f.p50_ms / echo_p50:.1f}x",
        )
        for name, f in calls.items()
    ]


def rss_lines(curve: RssCurve) -> list[str]:
    intro = (
        f"A fresh server, one conversation rendered first (the process's one-time costs), then "
        f"conversations of {curve.messages_each} messages written (each has outgrown the "
        f"{BUDGET_TOKENS:,}-token budget) and given their first BuildContext in steps; VmRSS after each "
        "step. Memory the allocator freed earlier is reused unseen, so the slope is a floor."
    )
    rows = [(f"{conversations:,}", f"{mib:,.1f}") for conversations, mib in curve.points]
    slope = f"Slope: {curve.kib_each:,.1f} KiB per active conversation."
    return [intro, "", table(("conversations", "RSS MiB"), rows), "", slope, ""]


def digest_lines(run: DigestRun) -> list[str]:
    rest = run.seconds - run.summarize_seconds - run.embed_seconds
    headers = (
        "episodes",
        "messages each",
        "episodes/s",
        "ms per episode",
        "summarize s",
        "embed s",
        "SQL and rest s",
    )
    seconds = (run.summarize_seconds, run.embed_seconds, rest)
    row = (
        f"{run.episodes:,}", str(run.messages_per_episode), f"{run.episodes_per_second:.1f}",
        f"{run.ms_per_episode:.0f}", *(f"{value:.1f}" for value in seconds),
    )  # fmt: skip
    intro = (
        f"bench-recall's digest run: the {run.summarizer} summarizer and {run.embedder} (the defaults) "
        "over closed episodes of ~150-character turns, the digester's rounds timed in this process "
        f"({run.texts_embedded:,} texts embedded; model load {run.load_seconds:.1f} s and writing the "
        f"episodes {run.fill_seconds:.1f} s not counted)."
    )
    return [intro, "", table(headers, [row]), ""]
