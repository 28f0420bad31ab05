"""Orchestration: a throwaway database and one server with two tenants; both tenants' data;
B alone (the baseline), then B during each of A's abuses; the table, the JSON."""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from episodic.progress import say
from episodic_client import AsyncEpisodicClient, EpisodicClientError
from episodic_lab.bench import BenchError
from episodic_lab.bench.machine import machine_facts
from episodic_lab.bench_fairness.abuser import USER as A_USER
from episodic_lab.bench_fairness.abuser import WHERE_PHRASE, AbuserData
from episodic_lab.bench_fairness.options import Options, options_from
from episodic_lab.bench_fairness.phases import PhaseResult, Phases
from episodic_lab.bench_fairness.plan import Plan
from episodic_lab.bench_fairness.report import notes, table, to_json
from episodic_lab.bench_fairness.server import FairnessServer, Keys, fairness_server, shown_command
from episodic_lab.bench_fairness.victim import Victim
from episodic_lab.connect import CALL_TIMEOUT_SECONDS

B_TIMEOUT_SECONDS = 60.0  # B measures: a call slower than this is an error, not a latency


def run_bench_fairness(args: argparse.Namespace) -> int:
    """The `episodic-lab bench-fairness` command: prints, asserts nothing (0 unless it could not run)."""
    try:
        return asyncio.run(_run(options_from(args)))
    except (BenchError, EpisodicClientError) as exc:  # the server did not start, or refused the setup
        print(f"episodic-lab bench-fairness: {exc}", file=sys.stderr)
        return 1


async def _run(options: Options) -> int:
    keys = Keys.new()
    with tempfile.TemporaryDirectory(prefix="episodic-fairness-") as workdir:
        async with fairness_server(options, Path(workdir), keys) as server:
            pid, port = server.server.pid, server.server.port
            say(f"server pid {pid} on port {port}, inspector on port {server.inspector_port}")
            header = _header(options, server, keys)
            base, phases = await _phases(options, server, keys, Path(workdir))
    print("\n".join(f"{key}: {value}" for key, value in header.items()), end="\n\n")
    print(table(base, phases), end="\n\n")
    print(notes(phases, base), flush=True)
    if options.json_path:
        await asyncio.to_thread(Path(options.json_path).write_text, to_json(header, base, phases))
    return 0


async def _phases(
    options: Options, server: FairnessServer, keys: Keys, workdir: Path
) -> tuple[PhaseResult, list[PhaseResult]]:
    target = server.server.target
    async with (
        AsyncEpisodicClient(target, api_key=keys.b, timeout=B_TIMEOUT_SECONDS) as b_client,
        AsyncEpisodicClient(target, api_key=keys.a, timeout=CALL_TIMEOUT_SECONDS) as a_client,
    ):
        started = time.monotonic()
        victim, data = Victim(b_client), AbuserData(a_client)
        await victim.prepare()
        await data.prepare(options.abuses)
        say(f"both tenants' data written in {time.monotonic() - started:.0f} s")
        phases = Phases(
            victim, _plan(options, server, keys, data), server.server.pid, options.b_rate, workdir
        )
        await phases.warm_up()
        base = await phases.baseline()
        say(f"{base.name}: done")
        results = []
        for abuse in options.abuses:
            results.append(await phases.abuse(abuse))
            say(f"{abuse}: done")
    return base, results


def _plan(options: Options, server: FairnessServer, keys: Keys, data: AbuserData) -> Plan:
    return Plan(
        abuse="",
        target=server.server.target,
        inspector_port=server.inspector_port,
        api_key=keys.a,
        seconds=options.seconds,
        honour_retry=options.honour_retry,
        agent_id=data.agent_id,
        user_id=A_USER,
        episodes=tuple(data.episodes),
        big_episode=data.big_episode,
        where_episode=data.where_episode,
        where_phrase=WHERE_PHRASE,
    )


def _header(options: Options, server: FairnessServer, keys: Keys) -> dict[str, object]:
    return {
        "machine": ", ".join(f"{key} {value}" for key, value in machine_facts().items()),
        "backend": options.backend,
        "server": shown_command(server.server.command, keys),
        "phases": f"{options.seconds:g} s each; B {options.b_rate:g} calls/s (and Echo at a third of that)",
        "abuser": "honours RetryInfo" if options.honour_retry else "hostile (retries at once)",
    }
