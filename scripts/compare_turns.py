"""Issue 47's ratios measured from outside, for one checkout or two side by side: a real
server (`episodic serve`, SQLite, default agent and embedder) per checkout, and one client
process that turns each in step, alternating which goes first, so the host's noise falls on
both alike. Each round, per server: BuildContext with a new question, BuildContext with the
same question (both appended; timed to the report, then 5 ms of quiet before the next call,
as a model call would leave: the record's commit may still run after the report), AddMessage
on another conversation, and Echo.
Prints p50/p99 of each and its rate as a share of Echo's (Echo p50 / call p50).

    .venv/bin/python scripts/compare_turns.py                    # this checkout
    .venv/bin/python scripts/compare_turns.py /tmp/before .      # two: `git worktree add /tmp/before <rev>`
        [--rounds 150]

A checkout other than this one needs its compiled extension: copy
server/episodic/index/_postings*.so into it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from turn_breakdown import PAST, QUESTIONS  # the same conversation and questions (scripts/)

from episodic_client import AsyncEpisodicClient
from episodic_client.requests import message_input

CALLS = ("new question", "same question", "AddMessage", "Echo")
WARM_UP = 10
FIRST_PORT = 50091


class Checkout:
    """One checkout's server and the client's conversations on it."""

    def __init__(self, root: Path, port: int, data: Path) -> None:
        self.root, self.port = root, port
        env = dict(os.environ, PYTHONPATH=f"{root}/server:{root}/clients/python/src")
        command = [
            sys.executable, "-m", "episodic", "serve", "--insecure-dev", "--migrate-on-start",
            "--no-access-log", "--address", f"127.0.0.1:{port}", "--database-url", f"sqlite:///{data}/{port}.db",
        ]  # fmt: skip
        log = (data / f"{port}.log").open("w")
        self.server = subprocess.Popen(command, env=env, cwd=data, stdout=log, stderr=log)
        self.client = AsyncEpisodicClient(f"127.0.0.1:{port}", timeout=60)
        self.times: dict[str, list[float]] = {call: [] for call in CALLS}
        self.episode, self.other = "", ""

    async def ready(self) -> None:
        for _ in range(300):
            try:
                await self.client.echo(b"x")
                break
            except Exception:
                await asyncio.sleep(0.2)
        await self.client.create_agent("compare", model="gpt-4o")
        past = (await self.client.open_episode("compare", "u")).episode.episode_id
        await self.client.add_messages(past, [message_input(r, t) for r, t in PAST])
        await self.client.close_episode(past, wait_for_digest=True)
        self.episode = (await self.client.open_episode("compare", "u")).episode.episode_id
        await self.client.add_messages(self.episode, [message_input(r, t) for r, t in PAST])
        self.other = (await self.client.open_episode("compare", "u2")).episode.episode_id

    async def round(self, i: int, kept: bool) -> None:
        c, turn = self.client, self.episode
        calls: list[tuple[str, Awaitable[Any]]] = [
            (
                "new question",
                c.build_context(turn, user_message=f"{QUESTIONS[i % len(QUESTIONS)]} ({i})", **_APPENDED),
            ),
            ("same question", c.build_context(turn, user_message=QUESTIONS[0], **_APPENDED)),
            ("AddMessage", c.add_message(self.other, "user", f"note {i}")),
            ("Echo", c.echo(b"x" * 64)),
        ]
        for call, running in calls:
            started = time.perf_counter()
            await running
            if kept:
                self.times[call].append((time.perf_counter() - started) * 1000)
            if call != "Echo":
                await asyncio.sleep(AFTER_A_CALL)

    def report(self) -> str:
        echo = statistics.median(self.times["Echo"])
        cells = []
        for call in CALLS[:-1]:
            p50, p99 = statistics.median(self.times[call]), _quantile(self.times[call], 0.99)
            cells.append(f"{call} p50 {p50:.2f} p99 {p99:.2f} ms ({100 * echo / p50:.1f} % of Echo)")
        return f"{self.root}: Echo p50 {echo:.2f} ms | " + " | ".join(cells)

    async def close(self) -> None:
        await self.client.close()
        self.server.terminate()
        self.server.wait(30)


_APPENDED: dict[str, Any] = {"append_user_message": True}
AFTER_A_CALL = 0.005  # seconds of quiet after a call (a model call is far longer)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


async def compare(roots: list[Path], rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        checkouts = [Checkout(root, FIRST_PORT + i, Path(tmp)) for i, root in enumerate(roots)]
        try:
            for checkout in checkouts:
                await checkout.ready()
            for i in range(WARM_UP + rounds):
                order = checkouts if i % 2 else checkouts[::-1]
                for checkout in order:
                    await checkout.round(i, kept=i >= WARM_UP)
            for checkout in checkouts:
                print(checkout.report())
        finally:
            for checkout in checkouts:
                await checkout.close()


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("checkouts", nargs="*", type=Path, help="checkouts to compare (default: this one)")
    parser.add_argument("--rounds", type=int, default=150, help="measured rounds per checkout")
    args = parser.parse_args()
    roots = [p.resolve() for p in args.checkouts] or [Path(__file__).resolve().parent.parent]
    asyncio.run(compare(roots, args.rounds))


if __name__ == "__main__":
    main()
