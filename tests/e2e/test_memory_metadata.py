"""Memories addressed by the client's own ids (a framework's key-value store): metadata kept
as given, keep_separate stores each memory under its id without merging or superseding, and
listings filter by topic. On each backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from google.protobuf import field_mask_pb2, json_format, struct_pb2

from episodic.v1 import memory_pb2, memory_service_pb2
from tests.e2e.helpers import Client, expect_invalid
from tests.server_harness import KEY_A, RunningServer

FACT = memory_pb2.MEMORY_KIND_FACT
EAGER = memory_service_pb2.MEMORY_PLACEMENT_EAGER


@pytest.fixture
async def client(server: RunningServer) -> AsyncIterator[Client]:
    async with server.channel() as channel:
        yield Client.of(channel, KEY_A)


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(value)
    return out


def memory(
    memory_id: str, text: str, topics: tuple[str, ...] = (), metadata: dict[str, Any] | None = None
) -> memory_service_pb2.MemoryInput:
    return memory_service_pb2.MemoryInput(
        memory_id=memory_id, text=text, kind=FACT, topics=topics, metadata=struct(metadata or {})
    )


async def create(
    client: Client, agent_id: str, *memories: memory_service_pb2.MemoryInput, keep_separate: bool = True
) -> list[memory_service_pb2.MemoryResult]:
    request = memory_service_pb2.CreateMemoriesRequest(
        agent_id=agent_id, user_id="mary", placement=EAGER, memories=memories, keep_separate=keep_separate
    )
    return list((await client.memories.CreateMemories(request, metadata=client.auth)).results)


async def test_metadata_round_trips_and_is_updated_by_mask(client: Client) -> None:
    agent_id = await client.create_agent()
    value = {"text": "likes tea", "nested": {"n": [1, 2.5, "ü"]}, "flag": True}
    (made,) = await create(client, agent_id, memory("lg-1", "Mary likes tea.", metadata=value))
    got = await client.memories.GetMemory(
        memory_service_pb2.GetMemoryRequest(memory_id="lg-1"), metadata=client.auth
    )
    assert json_format.MessageToDict(got.memory.metadata) == json_format.MessageToDict(struct(value))
    assert made.memory.metadata == got.memory.metadata
    changed = memory_pb2.Memory(memory_id="lg-1", metadata=struct({"text": "likes coffee"}))
    update = memory_service_pb2.UpdateMemoryRequest(
        memory=changed, update_mask=field_mask_pb2.FieldMask(paths=["metadata"])
    )
    updated = (await client.memories.UpdateMemory(update, metadata=client.auth)).memory
    assert dict(updated.metadata) == {"text": "likes coffee"} and updated.text == "Mary likes tea."


async def test_kept_separate_repeats_and_contradictions_are_each_stored_under_their_ids(
    client: Client,
) -> None:
    agent_id = await client.create_agent()
    results = await create(
        client,
        agent_id,
        memory("k-1", "Mary lives in Paris."),
        memory("k-2", "Mary lives in Paris."),
        memory("k-3", "Mary lives in Rome."),
    )
    assert [(r.memory.memory_id, r.outcome) for r in results] == [
        (i, memory_service_pb2.MEMORY_OUTCOME_CREATED) for i in ("k-1", "k-2", "k-3")
    ]
    listed = await client.memories.ListMemories(
        memory_service_pb2.ListMemoriesRequest(agent_id=agent_id, user_id="mary"), metadata=client.auth
    )
    assert sorted((m.memory_id, m.superseded_by, m.merge_count) for m in listed.memories) == [
        ("k-1", "", 0), ("k-2", "", 0), ("k-3", "", 0)
    ]  # fmt: skip
    merged = await create(client, agent_id, memory("k-4", "Mary lives in Paris."), keep_separate=False)
    assert merged[0].outcome == memory_service_pb2.MEMORY_OUTCOME_MERGED, "the default still merges"


async def test_listings_filter_by_topic(client: Client) -> None:
    agent_id = await client.create_agent()
    await create(
        client,
        agent_id,
        memory("t-1", "Mary plays chess.", ("ns:prefs",)),
        memory("t-2", "Mary plays golf.", ("ns:prefs", "ns:prefs/sport")),
        memory("t-3", "Mary owns a cat.", ("ns:facts",)),
    )
    for topics, expected in (
        (["ns:prefs"], ["t-1", "t-2"]),
        (["ns:prefs/sport", "ns:facts"], ["t-2", "t-3"]),
    ):
        request = memory_service_pb2.ListMemoriesRequest(agent_id=agent_id, user_id="mary", topics=topics)
        listed = await client.memories.ListMemories(request, metadata=client.auth)
        assert sorted(m.memory_id for m in listed.memories) == expected
    paged = memory_service_pb2.ListMemoriesRequest(
        agent_id=agent_id, user_id="mary", topics=["ns:prefs"], page_size=1
    )
    first = await client.memories.ListMemories(paged, metadata=client.auth)
    paged.page_token = first.next_page_token
    second = await client.memories.ListMemories(paged, metadata=client.auth)
    assert sorted(m.memory_id for m in [*first.memories, *second.memories]) == ["t-1", "t-2"]


async def test_oversized_metadata_and_lazy_keep_separate_are_refused_by_field(client: Client) -> None:
    agent_id = await client.create_agent()
    await expect_invalid(
        create(client, agent_id, memory("big", "x", metadata={"blob": "y" * 17_000})), "memories[0].metadata"
    )
    episode_id = await client.open_episode(agent_id)
    lazy = memory_service_pb2.CreateMemoriesRequest(
        episode_id=episode_id, memories=[memory("lazy", "Mary sings.")], keep_separate=True
    )
    await expect_invalid(client.memories.CreateMemories(lazy, metadata=client.auth), "keep_separate")
