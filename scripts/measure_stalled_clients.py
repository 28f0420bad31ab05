"""The memory held for stalled clients' unsent responses, measured (docs/operations.md, "Slow
and stalled clients"): a real `episodic serve` process whose BuildContext renders ~300 KiB,
then clients advertising a zero HTTP/2 window. Two runs, as in
tests/chaos/test_stalled_clients.py (which checks the caps' behaviour, not memory): 200
streams on one connection capped at 16 per connection, and 4 connections of 16 streams
capped at 24 RPCs in all. Prints the server's RSS growth (VmRSS from /proc) against the
bound the docs promise (6 x the held responses + 24 MiB of slack here) and exits 1 if a
run grew past it. Linux only; about 30 s.

    .venv/bin/python scripts/measure_stalled_clients.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.chaos.test_stalled_clients import BUILD_CONTEXT, MIB, Stage, settled, stage

HELD_PER_RESPONSE_BYTE = 6  # the docs say about 4x; 6x allowed
SLACK = 24 * MIB  # what a busy process allocates meanwhile


def rss(s: Stage) -> int:
    for line in Path(f"/proc/{s.server.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS line")


def bound(streams: int, response_bytes: int) -> int:
    return streams * HELD_PER_RESPONSE_BYTE * response_bytes + SLACK


def report(name: str, growth: int, limit: int) -> bool:
    within = growth <= limit
    print(f"{name}: RSS +{growth / MIB:.1f} MiB, bound {limit / MIB:.1f} MiB: {'ok' if within else 'OVER'}")
    return within


async def one_connection(tmp: Path) -> bool:
    async with stage(tmp, "--max-concurrent-streams", "16") as s, AsyncExitStack() as stack:
        before = rss(s)
        (stalled,) = await s.stalling_clients(1)
        stack.push_async_callback(stalled.close)
        for _ in range(200):
            await stalled.call(BUILD_CONTEXT, s.request)
        await settled([stalled], lambda c: c.started + c.reset == 200)
        return report("200 streams, 16 per connection", rss(s) - before, bound(16, s.response_bytes))


async def every_connection(tmp: Path) -> bool:
    flags = ("--max-concurrent-streams", "16", "--max-concurrent-rpcs", "24")
    async with stage(tmp, *flags) as s, AsyncExitStack() as stack:
        before = rss(s)
        clients = await s.stalling_clients(4)
        for client in clients:
            stack.push_async_callback(client.close)
            for _ in range(16):
                await client.call(BUILD_CONTEXT, s.request)
        await settled(clients, lambda c: c.started + c.refused + c.reset >= 16)
        return report("4 connections x 16, 24 RPCs in all", rss(s) - before, bound(24, s.response_bytes))


async def main() -> int:
    if not await asyncio.to_thread(Path("/proc/self/status").exists):
        print("reads RSS from /proc: Linux only")
        return 2
    results = []
    for run in (one_connection, every_connection):
        with tempfile.TemporaryDirectory() as tmp:
            results.append(await run(Path(tmp)))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
