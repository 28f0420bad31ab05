"""Tenant A in its own process, hammering compaction with hostile text: several workers, each
on its own episodes of 256 KiB unpunctuated, self-repeating messages, call BuildContext with
deadlines too short for a compaction, cancel calls midway, retry, and after each turn that
completes add another such message so the next turn compacts again.

    python -m tests.chaos.hostile_tenant ADDRESS

prints "ready" once its episodes are filled, attacks while a "go" line on stdin is in force,
pauses on "pause", stops on "stop" (or end of input) and prints what it did as one JSON line."""

from __future__ import annotations

import asyncio
import json
import random
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import grpc

from episodic.v1 import context_service_pb2
from tests.e2e.context_helpers import create_agent
from tests.e2e.helpers import Client, user_message
from tests.server_harness import KEY_A

HOSTILE = ("the stream will be cancelled " * 10_000)[: 256 * 1024]
WORKERS = 4
EPISODES_PER_WORKER = 2
MESSAGES_PER_EPISODE = 3
SHORT_DEADLINES = (0.002, 0.005, 0.01)
PATIENT_CALLS = 0.05
# A client's pause before retrying. Without one, calls that give up after 5 ms come back at
# hundreds per second, and a flood of any RPC fills the event loop whatever the compaction
# does; that is a matter for rate limits, not for this test.
RETRY_BACKOFF_SECONDS = (0.1, 0.3)


@dataclass
class Tally:
    completed: int = 0
    deadline_exceeded: int = 0
    cancelled: int = 0
    other_errors: list[str] = field(default_factory=list)


async def fill_episodes(client: Client, agent_id: str) -> list[str]:
    episodes = []
    for _ in range(WORKERS * EPISODES_PER_WORKER):
        episode_id = await client.open_episode(agent_id)
        for _ in range(MESSAGES_PER_EPISODE):
            await client.add(episode_id, user_message(HOSTILE))
        episodes.append(episode_id)
    return episodes


async def one_call(client: Client, episode_id: str, timeout: float, cancel_after: float | None) -> None:
    request = context_service_pb2.BuildContextRequest(episode_id=episode_id, user_message="And now?")
    call = client.context.BuildContext(request, metadata=client.auth, timeout=timeout)
    if cancel_after is not None:
        await asyncio.sleep(cancel_after)
        call.cancel()
    async for _frame in call:
        pass


async def turn(client: Client, episode_id: str, rng: random.Random, tally: Tally) -> None:
    """Gives up on a short deadline or cancels midway (leaving its compaction behind, as the
    issue's abandoned calls did) or now and then waits; a call that completes stored a summary,
    so another hostile message is added for the next call to compact again."""
    cancel, patient = rng.random() < 0.3, rng.random() < PATIENT_CALLS
    timeout = 30 if cancel or patient else rng.choice(SHORT_DEADLINES)
    try:
        await one_call(client, episode_id, timeout, 0.01 if cancel else None)
        tally.completed += 1
        await client.add(episode_id, user_message(HOSTILE))
    except asyncio.CancelledError:
        tally.cancelled += 1
    except grpc.aio.AioRpcError as err:
        _count_error(err, tally)
    await asyncio.sleep(rng.uniform(*RETRY_BACKOFF_SECONDS))


def _count_error(err: grpc.aio.AioRpcError, tally: Tally) -> None:
    if err.code() is grpc.StatusCode.DEADLINE_EXCEEDED:
        tally.deadline_exceeded += 1
    elif err.code() is grpc.StatusCode.CANCELLED:
        tally.cancelled += 1
    else:
        tally.other_errors.append(f"{err.code().name}: {err.details()}")


async def worker(
    client: Client, episodes: list[str], seed: int, attacking: asyncio.Event, tally: Tally
) -> None:
    rng = random.Random(seed)
    while True:
        for episode_id in episodes:
            await attacking.wait()
            await turn(client, episode_id, rng, tally)


async def commands() -> AsyncIterator[str]:
    """Lines of stdin, read off the event loop; "stop" at the end of input."""
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        yield line.strip()
    yield "stop"


async def main(address: str) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        client = Client.of(channel, KEY_A)
        agent_id = await create_agent(client, max_working_memory_tokens=8000)
        episodes = await fill_episodes(client, agent_id)
        print("ready", flush=True)
        attacking, tally = asyncio.Event(), Tally()
        share = [episodes[i::WORKERS] for i in range(WORKERS)]
        tasks = [
            asyncio.create_task(worker(client, mine, i, attacking, tally)) for i, mine in enumerate(share)
        ]
        async for command in commands():
            if command == "stop":
                break
            if command == "go":
                attacking.set()
            elif command == "pause":
                attacking.clear()
            print(command, flush=True)  # acknowledged
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        print(json.dumps(tally.__dict__), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
