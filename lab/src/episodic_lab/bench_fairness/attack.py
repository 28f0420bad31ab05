"""Tenant A in a process of its own, so that its client-side work (serializing, event loop)
never delays tenant B's calls in the orchestrator: only the server can.

    python -m episodic_lab.bench_fairness.attack < plan.json

prints "go" when the abuse starts, then, after the plan's seconds, its Tally as one JSON line."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable

from episodic_lab.bench_fairness.hammer import bulk_memories, erase_loop, flood
from episodic_lab.bench_fairness.http_abuse import inspector_searches, slowloris
from episodic_lab.bench_fairness.plan import Plan, Tally
from episodic_lab.bench_fairness.streams import unread_streams, watches

GO = "go"
Abuse = Callable[[Plan, Callable[[], None]], Awaitable[Tally]]
ABUSES: dict[str, Abuse] = {
    "flood": flood,
    "bulk-memories": bulk_memories,
    "watches": watches,
    "unread-streams": unread_streams,
    "inspector-searches": inspector_searches,
    "erase-loop": erase_loop,
    "slowloris": slowloris,
}


def _started() -> None:
    print(GO, flush=True)


async def _attack(plan: Plan) -> Tally:
    tally = await ABUSES[plan.abuse](plan, _started)
    # Shown with the results: the attacker shares the server's machine, and its CPU is not the server's.
    tally.notes["abuser_cpu_s"] = round(time.process_time(), 1)
    return tally


def main() -> None:
    plan = Plan.from_json(sys.stdin.read())
    print(asyncio.run(_attack(plan)).to_json(), flush=True)


if __name__ == "__main__":
    main()
