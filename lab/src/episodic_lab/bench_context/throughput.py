"""BuildContext at N calls in flight against Echo in the same run. Each worker has its own
user (ten closed, digested episodes) and its own open conversation rendered at ~4k tokens
with ten recalled episodes; nothing is appended, so every call renders the same history
(the user message differs call by call, as in a conversation: see messages.py)."""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass

from episodic_lab.bench.report import Figures
from episodic_lab.bench_context import progress
from episodic_lab.bench_context.cells import Rendered, Tally, build_call, echo_call, measured
from episodic_lab.bench_context.client import HYBRID, RECENCY, Client
from episodic_lab.bench_context.conversations import Writer, user_id
from episodic_lab.bench_context.options import Options

RECALL_MODES = {"recency": RECENCY, "hybrid": HYBRID}


@dataclass(frozen=True, slots=True)
class ThroughputRow:
    in_flight: int
    recall: str  # a key of RECALL_MODES
    echo: Figures
    build: Figures
    rendered: Rendered

    @property
    def ratio(self) -> float:
        return self.build.rps / self.echo.rps if self.echo.rps else math.nan


async def worker_conversations(writer: Writer, workers: int) -> list[str]:
    """Per worker: its user's past episodes, then its filled open conversation."""

    async def prepare(worker: int) -> str:
        await writer.past_episodes(user_id(worker))
        return await writer.filled(user_id(worker))

    return list(await asyncio.gather(*(prepare(worker) for worker in range(workers))))


async def throughput_rows(
    client: Client, conversations: list[str], server_pid: int, options: Options
) -> list[ThroughputRow]:
    rows = []
    for in_flight in options.concurrency:
        echo = await measured(echo_call(client), in_flight, server_pid, options)
        for name, mode in RECALL_MODES.items():
            tally = Tally()
            build = await measured(
                build_call(client, conversations, tally, mode), in_flight, server_pid, options
            )
            rows.append(ThroughputRow(in_flight, name, echo, build, tally.rendered()))
            progress(f"  {in_flight:>3} in flight, {name}: {build.rps:.0f} calls/s (echo {echo.rps:.0f})")
    return rows
