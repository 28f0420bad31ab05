"""Prints how much tenant A's hostile compactions slow tenant B down: B's BuildContext p99 on a
tiny episode while idle and while A (another process, tests/chaos/hostile_tenant.py) hammers
BuildContext over 256 KiB unpunctuated, self-repeating messages with short deadlines, cancels
and retries; and the ratio of the two. An in-process server on a fresh SQLite file; idle and
attack windows alternate (idle, attack, idle, attack...), so a slow machine, or load that comes
and goes on it, weighs on both alike.

    .venv/bin/python scripts/hostile_compaction_isolation.py                # 4 + 4 windows of 150 calls
    .venv/bin/python scripts/hostile_compaction_isolation.py --windows 8 --samples 300

A figure, not a test: it asserts nothing (the ratio depends on the machine and on what else
runs on it). What CI checks of the same attack, structurally, is in
tests/chaos/test_hostile_compaction_isolation.py. Once 2.3x on an idle 2-core machine, 3.6x on
a busy CI one.

What is left of the slowdown is A's traffic itself, not its compactions: each call that
completes adds a 256 KiB message, which the store writes and reads back; the summaries read a
bounded prefix of each message and run in the summary pool, shared by retries."""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc

from tests.chaos.attacker import attacker, attacking, b_turn, tiny_episode
from tests.e2e.helpers import Client
from tests.server_harness import KEY_B, running_server, settings_for

WARM_UP_CALLS = 30


def p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[max(0, int(len(ordered) * 0.99) - 1)]


async def latencies(client: Client, episode_id: str, samples: int) -> list[float]:
    measured = []
    for _ in range(samples):
        started = time.perf_counter()
        await b_turn(client, episode_id)
        measured.append(time.perf_counter() - started)
    return measured


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


async def measure(database_url: str, windows: int, samples: int) -> None:
    idle: list[float] = []
    attacked: list[float] = []
    settings = settings_for(database_url, migrate_on_start=True)
    async with (
        running_server(settings) as server,
        attacker(server.address) as a,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        tenant_b = Client.of(channel, KEY_B)
        episode_id = await tiny_episode(tenant_b)
        await latencies(tenant_b, episode_id, WARM_UP_CALLS)
        for window in range(1, windows + 1):
            calm = await latencies(tenant_b, episode_id, samples)
            async with attacking(a):
                hit = await latencies(tenant_b, episode_id, samples)
            idle += calm
            attacked += hit
            print(f"window {window}: B p99 idle {ms(p99(calm))}, attacked {ms(p99(hit))}", flush=True)
        tally = await a.stop()
    ratio = p99(attacked) / p99(idle)
    print(
        f"B p99 idle {ms(p99(idle))}, attacked {ms(p99(attacked))} ({ratio:.2f}x), "
        f"{len(idle)} + {len(attacked)} calls"
    )
    print(f"A: {tally}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int, default=4, help="idle/attack window pairs (default 4)")
    parser.add_argument("--samples", type=int, default=150, help="B's calls per window (default 150)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(measure(f"sqlite:///{folder}/isolation.db", args.windows, args.samples))


if __name__ == "__main__":
    main(sys.argv[1:])
