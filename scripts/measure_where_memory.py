"""Measures the memory one inspector "where did it go?" search costs on a huge episode: seeds
a fresh SQLite file through the services (an episode of 2,000 messages of 200 KiB each, a
model call every 100 messages, and a small episode to warm up on), then, in a fresh process
so the seeding's own peak does not hide the search's, runs one small search to warm up and
one search of the huge episode, and prints the growth of peak RSS (ru_maxrss) over that
one search (and, with --tracemalloc, the peak of Python's own allocations, which slows it).

    .venv/bin/python scripts/measure_where_memory.py [--messages 2000] [--kib 200] [--tracemalloc]
        [--db PATH]   # seeded once, then reused (to compare two versions of the code)
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from episodic.bootstrap.lifecycle import open_app
from episodic.domain.agents import AgentDraft
from episodic.domain.model import Caller, NewMessage, Role
from episodic.service.context import ContextRequest
from tests.server_harness import TENANT_A, settings_for

CALLER = Caller(TENANT_A)
BATCH = 20
CALL_EVERY = 100
PHRASE = "zanzibar"
FILLER = "water the tomatoes at dawn and check the basil before the heat; "


def text(i: int, size: int) -> str:
    """`size` characters; the phrase in the first message and in every 100th."""
    head = f"note {i}: " + ("my cat is called Zanzibar. " if i % 100 == 0 else "")
    return (head + FILLER * (size // len(FILLER) + 1))[:size]


async def seed(url: str, messages: int, size: int) -> None:
    async with open_app(settings_for(url)) as app:
        s = app.services
        await s.agents.create_agent(
            CALLER, AgentDraft("where-agent", system_prompt="Be brief.", model="gpt-4")
        )
        small, _ = await s.episodes.open_episode(
            CALLER, agent_id="where-agent", user_id="u", episode_id="small"
        )
        await s.episodes.add_messages(CALLER, small.episode_id, [NewMessage(Role.USER, "hello zanzibar")])
        big, _ = await s.episodes.open_episode(CALLER, agent_id="where-agent", user_id="u", episode_id="big")
        for first in range(0, messages, BATCH):
            batch = [NewMessage(Role.USER, text(i, size)) for i in range(first, min(first + BATCH, messages))]
            await s.episodes.add_messages(CALLER, big.episode_id, batch)
            if (first + BATCH) % CALL_EVERY == 0:
                await s.context.build(CALLER, ContextRequest(big.episode_id, "what next?"))


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


async def search(url: str, traced_memory: bool) -> None:
    async with open_app(settings_for(url)) as app:
        inspect = app.services.inspection
        await inspect.where(CALLER, "small", PHRASE)  # warm up: imports, connections, caches
        before = peak_mib()
        if traced_memory:
            tracemalloc.start()
        started = time.perf_counter()
        traced = await inspect.where(CALLER, "big", PHRASE)
        seconds = time.perf_counter() - started
        growth = peak_mib() - before
    t = traced.trace
    print(
        f"where {PHRASE!r}: {len(t.messages)} messages, {len(t.calls)} calls, "
        f"{len(t.dropped)} dropped, truncated={traced.truncated}, {seconds:.1f} s"
    )
    print(f"peak RSS growth {growth:,.0f} MiB (from {before:,.0f} MiB)")
    if traced_memory:
        print(f"tracemalloc peak {tracemalloc.get_traced_memory()[1] / 2**20:,.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--kib", type=int, default=200)
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--db", type=Path, help="a SQLite file: seeded unless it exists")
    parser.add_argument("--phase", choices=["seed", "search"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase == "seed":
        asyncio.run(seed(f"sqlite:///{args.db}", args.messages, args.kib * 1024))
    elif args.phase == "search":
        asyncio.run(search(f"sqlite:///{args.db}", args.tracemalloc))
    elif args.db:
        run(args, args.db)
    else:
        with tempfile.TemporaryDirectory() as folder:
            run(args, Path(folder) / "where.db")


def run(args: argparse.Namespace, db: Path) -> None:
    """Each phase in a process of its own, so that the search's peak is its own."""
    common = [
        sys.executable,
        __file__,
        "--db",
        str(db),
        "--messages",
        str(args.messages),
        "--kib",
        str(args.kib),
    ]
    if not db.exists():
        started = time.perf_counter()
        subprocess.run([*common, "--phase", "seed"], check=True)
        print(
            f"seeded {args.messages:,} × {args.kib} KiB in {time.perf_counter() - started:.0f} s", flush=True
        )
    subprocess.run(
        [*common, "--phase", "search", *(["--tracemalloc"] if args.tracemalloc else [])], check=True
    )


if __name__ == "__main__":
    main()
