"""`episodic erase` as an operator runs it against a live server (key from EPISODIC_API_KEY),
on each backend: the receipt printed (readable and as JSON), the user's episodes and
memories gone while another user's stay, an erasure limited to one agent, and a refusal
that is one line and exit code 1."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator

import pytest

from episodic.v1 import episode_service_pb2, memory_pb2, memory_service_pb2
from tests.conftest import unique
from tests.e2e.helpers import Client, Completed, operator_command, user_message
from tests.server_harness import KEY_A, RunningServer

pb = episode_service_pb2


@pytest.fixture
async def client(server: RunningServer) -> AsyncIterator[Client]:
    async with server.channel() as channel:
        yield Client.of(channel, KEY_A)


async def episodic(server: RunningServer, *argv: str) -> Completed:
    return await operator_command(server.address, KEY_A, *argv)


async def episodes_of(client: Client, user: str) -> list[str]:
    listed = await client.episodes.ListEpisodes(pb.ListEpisodesRequest(user_id=user), metadata=client.auth)
    return [e.episode_id for e in listed.episodes]


async def remember(client: Client, agent_id: str, user: str, text: str) -> None:
    await client.memories.CreateMemories(
        memory_service_pb2.CreateMemoriesRequest(
            agent_id=agent_id,
            user_id=user,
            memories=[memory_service_pb2.MemoryInput(text=text, kind=memory_pb2.MEMORY_KIND_FACT)],
        ),
        metadata=client.auth,
    )


async def test_a_user_is_erased_and_the_receipt_printed(server: RunningServer, client: Client) -> None:
    agent_id, mary, other = await client.create_agent(), unique("mary"), unique("ola")
    for user in (mary, other):
        episode_id = await client.open_episode(agent_id, user_id=user)
        await client.add(episode_id, user_message("I keep bees in Porto."), user_message("And goats."))
    await remember(client, agent_id, mary, "Mary keeps bees")

    done = await episodic(server, "erase", "--user", mary)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"erased user {mary}: 1 episodes, 2 messages, 1 memories"
    fields = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in lines[1:])
    assert fields["erasure id"].startswith("er_") and len(fields["user hash"].split()[0]) == 64
    assert (fields["episodes"], fields["messages"], fields["memories"]) == ("1", "2", "1")
    assert await episodes_of(client, mary) == []
    assert len(await episodes_of(client, other)) == 1

    again = await episodic(server, "erase", "--user", mary, "--json")
    assert again.returncode == 0, again.stderr
    receipt = json.loads(again.stdout)
    assert receipt["episodes"] == 0 and receipt["messages"] == 0 and receipt["erasure_id"].startswith("er_")


async def test_an_erasure_may_be_limited_to_one_agent(server: RunningServer, client: Client) -> None:
    kept_agent, erased_agent, user = await client.create_agent(), await client.create_agent(), unique("lee")
    for agent_id in (kept_agent, erased_agent):
        await client.add(await client.open_episode(agent_id, user_id=user), user_message("hello"))
    done = await episodic(server, "erase", "--user", user, "--agent", erased_agent, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["episodes"] == 1
    left = await client.episodes.ListEpisodes(pb.ListEpisodesRequest(user_id=user), metadata=client.auth)
    assert [e.agent_id for e in left.episodes] == [kept_agent]


async def test_a_refused_erasure_is_one_line_and_exit_1(server: RunningServer) -> None:
    done = await episodic(server, "erase", "--user", "bad id!")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("episodic: erase failed: INVALID_ARGUMENT") and "user_id" in done.stderr
