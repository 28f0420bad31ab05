"""BuildContext latency against the length of the log, warm and cold, with HYBRID recall and
MiniLM. One database, several server processes:

1. a writing server: the user's ten digested past episodes, then per length one log that it
   renders once (its first call compacts: "compacted before") and, per trial, one log it
   never renders ("never compacted"), and one imported log of `imported` messages;
2. per trial, a fresh server process on that database: one BuildContext of a short episode
   of the same user first (the process's own first costs: model, agent, the user's recall
   index), then the first BuildContext of each log, timed alone: cold, since no working set
   of these logs is in that process's RAM (the database file may be in the OS page cache);
3. a fresh server for the imported log's cold first call, and one more for each
   compacted-before log in the steady state (warm)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from episodic_lab.bench.databases import throwaway_database
from episodic_lab.bench.report import Figures
from episodic_lab.bench_context import progress
from episodic_lab.bench_context.cells import CellTiming, Rendered, Tally, build_call, measured
from episodic_lab.bench_context.client import HYBRID, Client
from episodic_lab.bench_context.conversations import Writer, user_id
from episodic_lab.bench_context.history import Cold, cold_call
from episodic_lab.bench_context.server import context_server
from episodic_lab.connect import lab_client
from episodic_lab.report.presets import Preset
from episodic_lab.report.served import EMBEDDER

USER = user_id(0)
PROBE_MESSAGES = 10
IDLE_TIMEOUT = timedelta(days=1)  # the logs must stay open through every restart of a full run


@dataclass(frozen=True, slots=True)
class LengthRow:
    messages: int
    first_call: Cold  # in the writing server, right after the log was written: it compacts
    cold_compacted: tuple[Cold, ...]  # one per trial (fresh process)
    cold_never: tuple[Cold, ...]  # one per trial, each on its own never-rendered log
    warm: Figures
    rendered: Rendered


@dataclass(frozen=True, slots=True)
class Imported:
    messages: int
    write_seconds: float  # AddMessages in batches of 500
    cold: Cold


@dataclass(frozen=True, slots=True)
class History:
    rows: tuple[LengthRow, ...]
    imported: Imported
    trials: int


@dataclass(frozen=True, slots=True)
class _Logs:
    agent_id: str
    probe: str
    compacted: list[str]  # by length
    never: list[list[str]]  # by trial, then by length
    imported: str
    first_calls: list[Cold]
    write_seconds: float


async def history(backend: str, workdir: Path, admin_url: str, preset: Preset) -> History:
    async with throwaway_database(backend, workdir, admin_url) as url:
        logs = await _write(url, workdir, preset)
        trials = [await _trial(url, workdir, logs, trial) for trial in range(preset.cold_trials)]
        imported = Imported(preset.imported, logs.write_seconds, await _cold_import(url, workdir, logs))
        warm = await _warm(url, workdir, logs, preset)
    rows = [
        LengthRow(length, logs.first_calls[i], tuple(t.compacted[i] for t in trials),
                  tuple(t.never[i] for t in trials), *warm[i])
        for i, length in enumerate(preset.history)
    ]  # fmt: skip
    return History(tuple(rows), imported, preset.cold_trials)


async def _write(url: str, workdir: Path, preset: Preset) -> _Logs:
    async with context_server(url, workdir, EMBEDDER) as server, lab_client(server.target) as lab:
        client = await Client.with_new_agent(lab, idle_timeout=IDLE_TIMEOUT)
        writer = Writer(client)
        progress(
            f"  writing server (pid {server.pid}): past episodes, then logs of {preset.history} messages"
        )
        await writer.past_episodes(USER)
        probe = await writer.conversation(USER, PROBE_MESSAGES)
        compacted = [await writer.conversation(USER, length) for length in preset.history]
        first_calls = [await cold_call(client, episode, HYBRID) for episode in compacted]
        never = [
            [await writer.conversation(USER, length) for length in preset.history]
            for _ in range(preset.cold_trials)
        ]
        progress(f"  importing {preset.imported:,} messages into one episode")
        began = time.perf_counter()
        imported = await writer.conversation(USER, preset.imported)
        write_seconds = time.perf_counter() - began
    return _Logs(client.agent_id, probe, compacted, never, imported, first_calls, write_seconds)


@dataclass(frozen=True, slots=True)
class _Trial:
    compacted: list[Cold]  # by length
    never: list[Cold]  # by length


@asynccontextmanager
async def _fresh_server(url: str, workdir: Path, logs: _Logs) -> AsyncIterator[tuple[Client, int]]:
    """A new server process on the written database, past its own first costs: the probe's
    BuildContext loads the model's session, the agent and the user's recall index."""
    async with context_server(url, workdir, EMBEDDER) as server, lab_client(server.target) as lab:
        client = Client(lab, logs.agent_id)
        await client.build(logs.probe, HYBRID)
        yield client, server.pid


async def _trial(url: str, workdir: Path, logs: _Logs, trial: int) -> _Trial:
    async with _fresh_server(url, workdir, logs) as (client, _):
        progress(f"  fresh server, trial {trial + 1}: cold first calls")
        compacted = [await cold_call(client, episode, HYBRID) for episode in logs.compacted]
        never = [await cold_call(client, episode, HYBRID) for episode in logs.never[trial]]
    return _Trial(compacted, never)


async def _cold_import(url: str, workdir: Path, logs: _Logs) -> Cold:
    """In a process of its own, so that no other log's first call ran before it."""
    async with _fresh_server(url, workdir, logs) as (client, _):
        progress("  fresh server: cold first call of the imported log")
        return await cold_call(client, logs.imported, HYBRID)


async def _warm(url: str, workdir: Path, logs: _Logs, timing: CellTiming) -> list[tuple[Figures, Rendered]]:
    """Each compacted-before log at one call in flight, after the cell's warm-up calls."""
    rows = []
    async with _fresh_server(url, workdir, logs) as (client, server_pid):
        for episode_id in logs.compacted:
            tally = Tally()
            figures = await measured(build_call(client, [episode_id], tally, HYBRID), 1, server_pid, timing)
            rows.append((figures, tally.rendered()))
            progress(f"  warm: p50 {figures.p50_ms:.2f} ms, p99 {figures.p99_ms:.2f} ms")
    return rows
