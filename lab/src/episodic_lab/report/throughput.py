"""Each RPC's throughput as a share of Echo's, measured on one server in one run, at 1 and
16 calls in flight: AddMessage, BuildContext with HYBRID recall (the product's default
mode) and with RECENCY, SearchEpisodes in each mode. Each worker has its own user with ten
digested past episodes and its own conversation filled to ~97 % of the 4k budget; every
BuildContext and search carries a different user message (bench_context.messages)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from episodic_lab.bench.load import Call
from episodic_lab.bench.report import Figures
from episodic_lab.bench.workloads import Session
from episodic_lab.bench_context import progress
from episodic_lab.bench_context.cells import CellTiming, Rendered, Tally, build_call, echo_call, measured
from episodic_lab.bench_context.client import HYBRID, RECENCY, Client
from episodic_lab.bench_context.conversations import Writer, user_id
from episodic_lab.bench_context.throughput import worker_conversations
from episodic_lab.report.presets import Preset
from episodic_lab.report.served import minilm_server

LEVELS = (1, 16)
SEARCH_MODES = ("semantic", "hybrid", "recency")
ADD = "AddMessage"
BUILD_HYBRID = "BuildContext, HYBRID recall"
BUILD_RECENCY = "BuildContext, RECENCY recall"


@dataclass(frozen=True, slots=True)
class Cell:
    rpc: str
    in_flight: int
    figures: Figures
    echo: Figures  # Echo at the same level, same server, just before
    rendered: Rendered | None = None  # BuildContext only

    @property
    def ratio(self) -> float:
        return self.figures.rps / self.echo.rps if self.echo.rps else math.nan


async def throughput(backend: str, workdir: Path, admin_url: str, preset: Preset) -> list[Cell]:
    async with minilm_server(backend, workdir, admin_url) as (client, server_pid):
        return await throughput_cells(client, server_pid, preset)


async def throughput_cells(client: Client, server_pid: int, timing: CellTiming) -> list[Cell]:
    progress(f"  writing {max(LEVELS)} users' past episodes (digested with MiniLM) and conversations")
    conversations = await worker_conversations(Writer(client), max(LEVELS))
    appends = Session(client.client)
    await appends.create_agent()
    cells = []
    for level in LEVELS:
        echo = await measured(echo_call(client), level, server_pid, timing)
        progress(f"  {level:>3} in flight, Echo: {echo.rps:,.0f} calls/s")
        tallies = {BUILD_HYBRID: Tally(), BUILD_RECENCY: Tally()}
        calls: dict[str, Call] = {
            ADD: await appends.add_message(level),
            BUILD_HYBRID: build_call(client, conversations, tallies[BUILD_HYBRID], HYBRID),
            BUILD_RECENCY: build_call(client, conversations, tallies[BUILD_RECENCY], RECENCY),
        }
        calls |= {f"SearchEpisodes {mode}": _search_call(client, mode) for mode in SEARCH_MODES}
        for rpc, call in calls.items():
            figures = await measured(call, level, server_pid, timing)
            rendered = tallies[rpc].rendered() if rpc in tallies else None
            cells.append(Cell(rpc, level, figures, echo, rendered))
            progress(
                f"  {level:>3} in flight, {rpc}: {figures.rps:,.0f} calls/s ({cells[-1].ratio:.0%} of Echo)"
            )
    return cells


def _search_call(client: Client, mode: str) -> Call:
    """Worker i searches its own user's ten digested episodes."""

    async def call(worker: int) -> None:
        await client.search(user_id(worker), mode)

    return call
