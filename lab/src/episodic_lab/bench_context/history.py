"""BuildContext latency against the length of the log, one call in flight, same agent and
budget, same user (so the same ten recalled episodes). A conversation's first call builds
its working set from the whole log and compacts what does not fit: timed alone, as
"cold"; the steady state is measured after a warm-up."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from episodic_client.v1 import context_pb2
from episodic_lab.bench.report import Figures
from episodic_lab.bench_context import progress
from episodic_lab.bench_context.cells import Rendered, Tally, build_call, measured
from episodic_lab.bench_context.client import RECENCY, Client, RecallMode
from episodic_lab.bench_context.conversations import Writer, user_id
from episodic_lab.bench_context.options import Options


@dataclass(frozen=True, slots=True)
class Cold:
    ms: float
    compaction: str  # what the first call's compaction did, e.g. "summarized"
    messages_summarized: int


@dataclass(frozen=True, slots=True)
class HistoryRow:
    messages: int
    cold: Cold
    warm: Figures
    rendered: Rendered


def p50_ratio(rows: Sequence[HistoryRow]) -> float:
    """Warm p50 at the longest log over the shortest's."""
    shortest, longest = min(rows, key=_length), max(rows, key=_length)
    return longest.warm.p50_ms / shortest.warm.p50_ms if shortest.warm.p50_ms else math.nan


def _length(row: HistoryRow) -> int:
    return row.messages


async def history_rows(client: Client, server_pid: int, options: Options) -> list[HistoryRow]:
    """Every log is written (and every working set built) before any is measured, so all
    lengths are measured against the same database."""
    writer = Writer(client)
    episodes = [await writer.conversation(user_id(0), messages) for messages in options.history]
    colds = [await cold_call(client, episode_id) for episode_id in episodes]
    rows = []
    for messages, episode_id, cold in zip(options.history, episodes, colds, strict=True):
        tally = Tally()
        warm = await measured(build_call(client, [episode_id], tally), 1, server_pid, options)
        rows.append(HistoryRow(messages, cold, warm, tally.rendered()))
        progress(f"  {messages:,} messages: cold {cold.ms:.0f} ms, then p50 {warm.p50_ms:.2f} ms")
    return rows


async def cold_call(client: Client, episode_id: str, recall: RecallMode = RECENCY) -> Cold:
    """One BuildContext timed alone, with what its compaction did."""
    began = time.perf_counter()
    report = await client.build(episode_id, recall)
    ms = (time.perf_counter() - began) * 1000
    compaction = context_pb2.Compaction.Name(report.compaction).removeprefix("COMPACTION_").lower()
    return Cold(ms, compaction, report.messages_summarized)
