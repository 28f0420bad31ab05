"""Memories while the episode is live, on a real server and both databases: a fact the user
stated early is compacted out of a small window, extracted in the background into a PENDING
memory of the episode, and shown in "[Known Facts]" on the turns after it; the close then
keeps it once, promoted."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from episodic.v1 import context_pb2, episode_pb2, memory_pb2, memory_service_pb2
from tests.e2e.context_helpers import Built, build, create_agent
from tests.e2e.helpers import Client, assert_serving
from tests.polling import eventually
from tests.server_harness import KEY_A, RunningServer, bearer

PENDING, PROMOTED = memory_pb2.MEMORY_STATE_PENDING, memory_pb2.MEMORY_STATE_PROMOTED
KNOWN_FACTS = context_pb2.CONTEXT_SECTION_KNOWN_FACTS


@pytest.fixture
async def client(server: RunningServer) -> AsyncIterator[Client]:
    async with server.channel() as channel:
        yield Client.of(channel, KEY_A)
        await assert_serving(channel, bearer(KEY_A))


async def turn(client: Client, episode_id: str, said: str, reply: str) -> Built:
    """One BuildContext that appends what the user said, then the assistant's reply."""
    built = await build(client, episode_id, user_message=said, append_user_message=True)
    await client.add(episode_id, episode_pb2.MessageInput(role=episode_pb2.ROLE_ASSISTANT, content=reply))
    return built


async def memories(client: Client, agent_id: str, **fields: object) -> list[memory_pb2.Memory]:
    request = memory_service_pb2.ListMemoriesRequest(agent_id=agent_id, user_id="mary", **fields)  # type: ignore[arg-type]
    return list((await client.memories.ListMemories(request, metadata=client.auth)).memories)


def facts(built: Built) -> str:
    return "".join(m.content for m in built.messages if m.section == KNOWN_FACTS)


async def test_a_fact_compacted_away_is_a_pending_memory_the_next_turns_know(client: Client) -> None:
    agent_id = await create_agent(client, max_working_memory_tokens=300)
    episode_id = await client.open_episode(agent_id)
    await turn(client, episode_id, "My cat is called Zanzibar.", "What a lovely name!")
    compacted = False
    for i in range(30):  # other talk, stating nothing about the user
        built = await turn(
            client,
            episode_id,
            f"What is a good fact about the number {i}?",
            f"The number {i} shows up in many puzzles and games.",
        )
        compacted = compacted or built.report.compaction == context_pb2.COMPACTION_SUMMARIZED
    assert compacted, "the small window compacted the early turns"

    async def held() -> bool:
        return bool(await memories(client, agent_id, state=PENDING, episode_id=episode_id))

    assert await eventually(held), "no PENDING memory was extracted from the compacted turns"
    (cat,) = await memories(client, agent_id, state=PENDING, episode_id=episode_id)
    assert "Zanzibar" in cat.text and cat.source.origin == memory_pb2.MEMORY_ORIGIN_EXTRACTED
    assert cat.source.episode_id == episode_id and cat.source.from_seq == 1

    built = await turn(client, episode_id, "What should I buy at the pet shop?", "Some toys.")
    assert "Zanzibar" in facts(built)
    recalled = {m.memory_id: m for m in built.report.recalled_memories}
    assert recalled[cat.memory_id].state == PENDING and recalled[cat.memory_id].rendered

    closed = await client.close_digested(episode_id)
    assert closed.digest.state == episode_pb2.DIGEST_STATE_READY
    kept = [m for m in await memories(client, agent_id) if "Zanzibar" in m.text]
    assert [(m.memory_id, m.state) for m in kept] == [(cat.memory_id, PROMOTED)]  # once, promoted
