"""Shared pieces of the backup and restore tests: the `episodic` command run as a process of
its own, a user's conversations and memories written through the API, and what of them a
server still has."""

from __future__ import annotations

import json
import sys

from episodic.v1 import episode_service_pb2, memory_pb2, memory_service_pb2
from tests.e2e.helpers import Client, Completed, clean_environment, run_process, user_message

EPISODIC = (sys.executable, "-m", "episodic")
RE_ERASED_ONE = "restore: re-erased 1 user erased after this database's backup"


async def episodic(*args: str, timeout: float = 120) -> Completed:
    """`episodic ARGS` in a process of its own, configured by its flags only."""
    return await run_process(*EPISODIC, *args, timeout=timeout, env=clean_environment())


async def remember(client: Client, agent_id: str, user_id: str, marker: str) -> None:
    """A closed, digested conversation, an open one, and a long-term memory, each holding
    `marker`."""
    closed = await client.open_episode(agent_id, user_id=user_id)
    await client.add(closed, user_message(f"My code word is {marker}."), user_message(f"Remember {marker}."))
    await client.close_digested(closed)
    live = await client.open_episode(agent_id, user_id=user_id)
    await client.add(live, user_message(f"Still thinking about {marker}."))
    note = memory_service_pb2.MemoryInput(text=f"The code word is {marker}", kind=memory_pb2.MEMORY_KIND_FACT)
    request = memory_service_pb2.CreateMemoriesRequest(agent_id=agent_id, user_id=user_id, memories=[note])
    await client.memories.CreateMemories(request, metadata=client.auth)


async def holdings(client: Client, agent_id: str, user_id: str) -> tuple[int, int]:
    """(episodes, memories) the server has of the user."""
    listed = episode_service_pb2.ListEpisodesRequest(user_id=user_id, page_size=100)
    episodes = (await client.episodes.ListEpisodes(listed, metadata=client.auth)).episodes
    asked = memory_service_pb2.ListMemoriesRequest(agent_id=agent_id, user_id=user_id, page_size=100)
    memories = (await client.memories.ListMemories(asked, metadata=client.auth)).memories
    return len(episodes), len(memories)


async def erase(client: Client, user_id: str) -> episode_service_pb2.ErasureReceipt:
    request = episode_service_pb2.EraseUserRequest(user_id=user_id)
    return (await client.episodes.EraseUser(request, metadata=client.auth, timeout=60)).receipt


def logged(stderr: str, message: str) -> list[dict[str, object]]:
    """The JSON log lines of a process's stderr whose message is `message`."""
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("message") == message]
