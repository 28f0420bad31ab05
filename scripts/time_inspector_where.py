"""Times the inspector's "where did it go?" on a long episode: an in-process server on a fresh
SQLite file, one episode of 10,001 messages (AddMessages, 400 a batch) with 75 model calls
under a 2,000-token budget (so they compact), then five searches each for a phrase said once
at the start and for one said in half the messages. Prints the median and worst time, and
the median as a multiple of an Echo round trip measured in the same run.

    .venv/bin/python scripts/time_inspector_where.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from episodic.v1 import diagnostics_service_pb2, episode_pb2
from tests.e2e.context_helpers import build, create_agent
from tests.e2e.helpers import Client, user_message
from tests.e2e.inspector_helpers import Inspector, inspector

BATCHES = 25
BATCH = 400
CALLS_PER_BATCH = 3
SEARCHES = 5


def batch(number: int) -> list[episode_pb2.MessageInput]:
    def one(i: int) -> episode_pb2.MessageInput:
        if i % 2:
            reply = f"ok {number}-{i}, noted"
            return episode_pb2.MessageInput(role=episode_pb2.ROLE_ASSISTANT, content=reply)
        return user_message(f"note {number}-{i}: water the tomatoes at dawn and check the basil")

    return [one(i) for i in range(BATCH)]


async def seed(client: Client) -> str:
    agent_id = await create_agent(client, max_working_memory_tokens=2000)
    episode_id = await client.open_episode(agent_id)
    await client.add(episode_id, user_message("my cat is called Zanzibar"))
    for number in range(BATCHES):
        await client.add(episode_id, *batch(number))
        for _ in range(CALLS_PER_BATCH):
            await build(client, episode_id, user_message="what next?")
    return episode_id


async def echo_ms(client: Client) -> float:
    """The median Echo round trip, the yardstick for this machine's speed right now."""
    times = []
    for _ in range(200):
        started = time.perf_counter()
        await client.diagnostics.Echo(diagnostics_service_pb2.EchoRequest(payload=b"x"), metadata=client.auth)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def time_searches(ins: Inspector, episode_id: str, phrase: str, echo: float) -> None:
    times = []
    for _ in range(SEARCHES):
        started = time.perf_counter()
        answer = await ins.get(f"/api/episodes/{episode_id}/where", query={"phrase": phrase})
        times.append((time.perf_counter() - started) * 1000)
    median = statistics.median(times)
    print(
        f"where {phrase!r}: HTTP {answer.status_code}, {len(answer.text):,} characters, "
        f"median {median:.0f} ms ({median / echo:,.0f} Echo round trips), worst {max(times):.0f} ms"
    )


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        async with inspector(f"sqlite:///{folder}/where.db") as ins:
            episode_id = await seed(ins.grpc)
            echo = await echo_ms(ins.grpc)
            calls = BATCHES * CALLS_PER_BATCH
            print(f"{BATCHES * BATCH + 1:,} messages, {calls} model calls; Echo {echo:.2f} ms")
            for phrase in ("zanzibar", "basil"):
                await time_searches(ins, episode_id, phrase, echo)


if __name__ == "__main__":
    asyncio.run(main())
