"""One measured cell: warm-up (connections, caches and pools grown to this level), then a
closed loop of N calls in flight, with the server's CPU per call; and the BuildContext
call that also tallies what each context rendered, so the figures say what they cost for."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from episodic_client.v1 import context_pb2
from episodic_lab.bench.load import Call, closed_loop
from episodic_lab.bench.report import Figures
from episodic_lab.bench.server_process import cpu_seconds
from episodic_lab.bench_context.client import RECENCY, Client, RecallMode


@dataclass(frozen=True, slots=True)
class Rendered:
    """Means over the BuildContext calls of a cell (warm-up included: they are the same)."""

    mean_tokens: float  # report.total_tokens
    mean_recalled: float  # recalled episodes rendered, not merely found


@dataclass(slots=True)
class Tally:
    tokens: list[int] = field(default_factory=list)
    recalled: list[int] = field(default_factory=list)

    def add(self, report: context_pb2.ContextReport) -> None:
        self.tokens.append(report.total_tokens)
        self.recalled.append(sum(1 for found in report.recalled_episodes if found.rendered))

    def rendered(self) -> Rendered:
        return Rendered(_mean(self.tokens), _mean(self.recalled))


def _mean(values: Sequence[int]) -> float:
    return statistics.fmean(values) if values else float("nan")


def build_call(client: Client, episodes: Sequence[str], tally: Tally, recall: RecallMode = RECENCY) -> Call:
    """Worker i renders episode i, over and over."""

    async def call(worker: int) -> None:
        tally.add(await client.build(episodes[worker], recall))

    return call


def echo_call(client: Client) -> Call:
    async def call(_worker: int) -> None:
        await client.echo()

    return call


class CellTiming(Protocol):
    """How long a cell warms up and is measured: this bench's Options, or `episodic-lab report`'s size."""

    @property
    def warmup(self) -> float: ...

    @property
    def seconds(self) -> float: ...


async def measured(call: Call, in_flight: int, server_pid: int, timing: CellTiming) -> Figures:
    await closed_loop(call, in_flight, timing.warmup)
    cpu_before = cpu_seconds(server_pid)
    result = await closed_loop(call, in_flight, timing.seconds)
    return Figures.of(result, cpu_seconds(server_pid) - cpu_before)
