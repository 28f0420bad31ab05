"""Long-term memories over gRPC on both databases: create (eager and lazy), read, list,
update, delete, search, promotion and extraction at close, duplicates and contradictions,
the "[Known Facts]" section, session data, the memory tools, erasure and bad input."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2, field_mask_pb2, json_format, struct_pb2, timestamp_pb2

from episodic.v1 import (
    context_pb2,
    episode_pb2,
    episode_service_pb2,
    memory_pb2,
    memory_service_pb2,
)
from episodic_client import AsyncEpisodicClient, memory_input
from tests.conftest import unique
from tests.e2e.context_helpers import build, create_agent
from tests.e2e.helpers import Client, assert_serving, expect_code, expect_invalid, user_message
from tests.server_harness import KEY_A, KEY_B, RunningServer, bearer, running_server, settings_for

pb = memory_service_pb2
FACT, PREFERENCE, EVENT = (
    memory_pb2.MEMORY_KIND_FACT,
    memory_pb2.MEMORY_KIND_PREFERENCE,
    memory_pb2.MEMORY_KIND_EVENT,
)
EAGER, LAZY = pb.MEMORY_PLACEMENT_EAGER, pb.MEMORY_PLACEMENT_LAZY


@pytest.fixture
async def client(server: RunningServer) -> AsyncIterator[Client]:
    async with server.channel() as channel:
        yield Client.of(channel, KEY_A)
        await assert_serving(channel, bearer(KEY_A))


def memory(text: str, kind: int = FACT, **fields: Any) -> pb.MemoryInput:
    return pb.MemoryInput(text=text, kind=kind, **fields)  # type: ignore[arg-type]


async def create(client: Client, *inputs: pb.MemoryInput, **request: Any) -> list[pb.MemoryResult]:
    made = await client.memories.CreateMemories(
        pb.CreateMemoriesRequest(memories=inputs, **request), metadata=client.auth, timeout=30
    )
    return list(made.results)


async def search(client: Client, agent: str, user: str, query: str = "", **fields: Any) -> list[pb.MemoryHit]:
    fields.setdefault(
        "mode", episode_service_pb2.SEARCH_MODE_HYBRID if query else episode_service_pb2.SEARCH_MODE_RECENCY
    )
    request = pb.SearchMemoriesRequest(agent_id=agent, user_id=user, query=query, **fields)
    return list((await client.memories.SearchMemories(request, metadata=client.auth, timeout=30)).hits)


async def listed(client: Client, agent: str, user: str, **fields: Any) -> list[memory_pb2.Memory]:
    request = pb.ListMemoriesRequest(agent_id=agent, user_id=user, **fields)
    return list((await client.memories.ListMemories(request, metadata=client.auth)).memories)


async def get(client: Client, memory_id: str) -> memory_pb2.Memory:
    return (
        await client.memories.GetMemory(pb.GetMemoryRequest(memory_id=memory_id), metadata=client.auth)
    ).memory


async def close(client: Client, episode_id: str) -> None:
    closed = await client.close_digested(episode_id)
    assert closed.digest.state == episode_pb2.DIGEST_STATE_READY


def ts(value: datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(value)
    return out


async def test_eager_memories_round_trip_and_are_found_by_meaning(client: Client) -> None:
    agent = await client.create_agent()
    made = await create(
        client,
        memory("Mary is allergic to peanuts", PREFERENCE, topics=["health"], entities=["Mary"]),
        memory("Mary works as a nurse in Porto", FACT, entities=["Porto"]),
        memory("Mary ran the Lisbon marathon", EVENT, event_time=ts(datetime(2026, 4, 5, tzinfo=UTC))),
        agent_id=agent, user_id="mary", placement=EAGER,
    )  # fmt: skip
    assert [r.outcome for r in made] == [pb.MEMORY_OUTCOME_CREATED] * 3
    assert all(r.memory.state == memory_pb2.MEMORY_STATE_PROMOTED for r in made)
    assert all(r.memory.source.origin == memory_pb2.MEMORY_ORIGIN_CLIENT for r in made)
    hits = await search(client, agent, "mary", "peanuts allergy")
    assert hits[0].memory.memory_id == made[0].memory.memory_id
    assert episode_service_pb2.MATCH_SIGNAL_SEMANTIC in hits[0].signals
    assert [m.memory_id for m in await listed(client, agent, "mary")] == [
        r.memory.memory_id for r in reversed(made)
    ] or len(await listed(client, agent, "mary")) == 3
    assert await search(client, agent, "john", "peanuts allergy") == []  # another user's scope

    mask = field_mask_pb2.FieldMask(paths=["text"])
    changed = memory_pb2.Memory(memory_id=made[1].memory.memory_id, text="Mary works as a surgeon in Porto")
    await client.memories.UpdateMemory(
        pb.UpdateMemoryRequest(memory=changed, update_mask=mask), metadata=client.auth
    )
    assert (await get(client, changed.memory_id)).text == "Mary works as a surgeon in Porto"
    assert (await search(client, agent, "mary", "surgeon"))[0].memory.memory_id == changed.memory_id

    gone = await client.memories.DeleteMemory(
        pb.DeleteMemoryRequest(memory_id=changed.memory_id), metadata=client.auth
    )
    assert gone.memory.memory_id == changed.memory_id
    await expect_code(get(client, changed.memory_id), grpc.StatusCode.NOT_FOUND)
    assert changed.memory_id not in [
        h.memory.memory_id for h in await search(client, agent, "mary", "surgeon")
    ]


async def test_a_client_id_makes_creating_idempotent_and_other_content_conflicts(client: Client) -> None:
    agent = await client.create_agent()
    first = await create(
        client, memory("Likes green tea", PREFERENCE, memory_id="m-tea"), agent_id=agent, user_id="u"
    )
    again = await create(
        client, memory("Likes green tea", PREFERENCE, memory_id="m-tea"), agent_id=agent, user_id="u"
    )
    assert again[0].outcome == pb.MEMORY_OUTCOME_UNCHANGED
    assert again[0].memory.create_time == first[0].memory.create_time
    other = create(
        client, memory("Likes black tea", PREFERENCE, memory_id="m-tea"), agent_id=agent, user_id="u"
    )
    await expect_code(other, grpc.StatusCode.ALREADY_EXISTS)


async def test_duplicates_merge_and_a_contradiction_supersedes_the_older_memory(client: Client) -> None:
    agent = await client.create_agent()
    scope = {"agent_id": agent, "user_id": "mary"}
    (paris,) = await create(client, memory("I live in Paris", entities=["Paris"]), **scope)
    (repeat,) = await create(client, memory("i live in Paris.", entities=["Paris"]), **scope)
    assert repeat.outcome == pb.MEMORY_OUTCOME_MERGED
    assert repeat.memory.memory_id == paris.memory.memory_id and repeat.memory.merge_count == 1
    (berlin,) = await create(client, memory("I live in Berlin", entities=["Berlin"]), **scope)
    assert berlin.outcome == pb.MEMORY_OUTCOME_SUPERSEDED_OLDER
    assert list(berlin.superseded) == [paris.memory.memory_id]
    assert (await get(client, paris.memory.memory_id)).superseded_by == berlin.memory.memory_id
    found = [h.memory.memory_id for h in await search(client, agent, "mary", "where does she live")]
    assert paris.memory.memory_id not in found
    history = await search(client, agent, "mary", "where does she live", include_superseded=True)
    assert paris.memory.memory_id in [h.memory.memory_id for h in history]
    (python,) = await create(client, memory("I like Python", PREFERENCE, entities=["Python"]), **scope)
    (rust,) = await create(client, memory("I like Rust", PREFERENCE, entities=["Rust"]), **scope)
    assert rust.outcome == pb.MEMORY_OUTCOME_CREATED  # liking is not single-valued
    assert not (await get(client, python.memory.memory_id)).superseded_by


async def test_lazy_memories_render_in_their_episode_and_are_promoted_when_it_closes(client: Client) -> None:
    agent = await create_agent(client)
    episode = await client.open_episode(agent, user_id="ana")
    (made,) = await create(
        client, memory("Ana prefers aisle seats", PREFERENCE), episode_id=episode, placement=LAZY
    )
    assert made.memory.state == memory_pb2.MEMORY_STATE_PENDING and made.memory.episode_id == episode
    assert await search(client, agent, "ana", "aisle seats") == []  # not long-term yet
    built = await build(client, episode, user_message="book my flight")
    facts = [m for m in built.messages if m.section == context_pb2.CONTEXT_SECTION_KNOWN_FACTS]
    assert len(facts) == 1 and "Ana prefers aisle seats" in facts[0].content
    assert (
        built.messages[1].section == context_pb2.CONTEXT_SECTION_KNOWN_FACTS
    )  # right after the system prompt
    (recalled,) = built.report.recalled_memories
    assert recalled.memory_id == made.memory.memory_id and recalled.rendered
    assert recalled.state == memory_pb2.MEMORY_STATE_PENDING
    assert built.report.section_tokens.known_facts == facts[0].token_count

    await close(client, episode)
    promoted = await get(client, made.memory.memory_id)
    assert promoted.state == memory_pb2.MEMORY_STATE_PROMOTED and not promoted.episode_id
    later = await client.open_episode(agent, user_id="ana")
    again = await build(client, later, user_message="aisle seats please")
    assert any(
        "aisle seats" in m.content
        for m in again.messages
        if m.section == context_pb2.CONTEXT_SECTION_KNOWN_FACTS
    )
    assert again.report.recalled_memories[0].state == memory_pb2.MEMORY_STATE_PROMOTED


async def test_closing_an_episode_extracts_memories_with_their_source_messages(client: Client) -> None:
    agent = await client.create_agent()
    episode = await client.open_episode(agent, user_id="leo")
    await client.add(
        episode,
        user_message("I moved to Lisbon last year and I work as a carpenter."),
        episode_pb2.MessageInput(role=episode_pb2.ROLE_ASSISTANT, content="Nice! Do you like the city?"),
        user_message("I love surfing at Carcavelos on weekends."),
    )
    await close(client, episode)
    found = await listed(client, agent, "leo")
    assert found, "extraction found nothing"
    assert all(
        m.source.origin == memory_pb2.MEMORY_ORIGIN_EXTRACTED and m.source.episode_id == episode
        for m in found
    )
    assert all(m.source.from_seq in (1, 3) for m in found)
    assert any("surf" in m.text for m in found)
    await close(client, episode)  # closing again extracts nothing twice
    assert len(await listed(client, agent, "leo")) == len(found)


async def test_session_data_merges_with_optimistic_concurrency_and_renders_chosen_keys(
    client: Client,
) -> None:
    agent = await create_agent(client, session_data_keys=memory_pb2_keys(["plan", "cart"]))
    episode = await client.open_episode(agent)
    empty = await client.memories.GetSessionData(
        pb.GetSessionDataRequest(episode_id=episode), metadata=client.auth
    )
    assert not empty.session_data.etag and not empty.session_data.data.fields
    first = await update_session(client, episode, {"plan": "pro", "cart": {"items": 2}, "secret": "x"})
    second = await update_session(
        client, episode, {"cart": {"coupon": "A1"}, "secret": None}, etag=first.etag
    )
    data = json.loads(json.dumps(dict(second.data.items()), default=_plain))
    assert data == {"plan": "pro", "cart": {"items": 2, "coupon": "A1"}}
    await expect_code(
        update_session(client, episode, {"plan": "free"}, etag=first.etag), grpc.StatusCode.ABORTED
    )
    built = await build(client, episode, user_message="hello")
    facts = [m.content for m in built.messages if m.section == context_pb2.CONTEXT_SECTION_KNOWN_FACTS]
    assert facts and "plan: pro" in facts[0] and "secret" not in facts[0]
    assert list(built.report.session_data_keys) == ["plan", "cart"]
    expiring = await update_session(client, episode, {"x": 1}, ttl=duration_pb2.Duration(seconds=3600))
    assert expiring.HasField("expire_time")


def memory_pb2_keys(keys: list[str]) -> Any:
    from episodic.v1 import agent_pb2

    return agent_pb2.SessionDataKeys(keys=keys)


def _plain(value: object) -> object:
    if isinstance(value, struct_pb2.Struct):
        return dict(value.items())
    if isinstance(value, struct_pb2.ListValue):
        return list(value)
    return value


async def update_session(
    client: Client,
    episode: str,
    patch: dict[str, Any],
    etag: str = "",
    ttl: duration_pb2.Duration | None = None,
) -> memory_pb2.SessionData:
    data = struct_pb2.Struct()
    data.update(patch)
    request = pb.UpdateSessionDataRequest(episode_id=episode, data=data, etag=etag, ttl=ttl)
    return (await client.memories.UpdateSessionData(request, metadata=client.auth)).session_data


async def test_the_memory_tools_are_function_schemas_a_gateway_can_forward(client: Client) -> None:
    tools = (await client.memories.GetMemoryTools(pb.GetMemoryToolsRequest(), metadata=client.auth)).tools
    assert [t.name for t in tools] == ["add_memory", "search_memory"]
    definition = json.loads(json_format.MessageToJson(tools[0].definition))
    assert definition["type"] == "function"
    assert definition["function"]["parameters"]["required"] == ["text", "kind"]
    agent = await client.create_agent()
    episode = await client.open_episode(agent, user_id="zoe")

    async def call(name: str, arguments: dict[str, Any]) -> Any:
        request = pb.CallMemoryToolRequest(episode_id=episode, name=name, arguments=json.dumps(arguments))
        return json.loads(
            (await client.memories.CallMemoryTool(request, metadata=client.auth, timeout=30)).result
        )

    added = await call("add_memory", {"text": "Zoe's dog is called Pixel", "kind": "fact", "long_term": True})
    assert added["outcome"] == "created" and added["state"] == "promoted"
    pending = await call("add_memory", {"text": "Zoe wants a quiet hotel", "kind": "preference"})
    assert pending["state"] == "pending"
    found = await call("search_memory", {"query": "dog Pixel"})
    assert found["memories"][0]["text"] == "Zoe's dog is called Pixel"
    assert any(
        "quiet hotel" in m["text"]
        for m in (await call("search_memory", {"query": "quiet hotel"}))["memories"]
    )
    bad = pb.CallMemoryToolRequest(episode_id=episode, name="add_memory", arguments="{not json")
    await expect_invalid(client.memories.CallMemoryTool(bad, metadata=client.auth), "arguments")


async def test_erasing_a_user_removes_memories_session_data_and_vectors(client: Client) -> None:
    agent = await client.create_agent()
    episode = await client.open_episode(agent, user_id="eve")
    await create(client, memory("Eve is learning Greek"), agent_id=agent, user_id="eve")
    await create(client, memory("Eve wants window seats", PREFERENCE), episode_id=episode)
    await update_session(client, episode, {"k": "v"})
    (kept,) = await create(client, memory("Bob is learning Greek"), agent_id=agent, user_id="bob")
    request = episode_service_pb2.EraseUserRequest(user_id="eve")
    receipt = (await client.episodes.EraseUser(request, metadata=client.auth, timeout=30)).receipt
    assert receipt.memories == 2 and receipt.session_data == 1
    assert receipt.index_vectors >= 1
    assert await listed(client, agent, "eve") == []
    assert await search(client, agent, "eve", "Greek") == []
    assert (await search(client, agent, "bob", "Greek"))[0].memory.memory_id == kept.memory.memory_id


async def test_another_tenant_cannot_see_or_change_memories(server: RunningServer, client: Client) -> None:
    agent = await client.create_agent()
    (made,) = await create(client, memory("Private fact"), agent_id=agent, user_id="u")
    async with server.channel() as channel:
        other = Client.of(channel, KEY_B)
        await expect_code(get(other, made.memory.memory_id), grpc.StatusCode.NOT_FOUND)
        delete = other.memories.DeleteMemory(
            pb.DeleteMemoryRequest(memory_id=made.memory.memory_id), metadata=other.auth
        )
        await expect_code(delete, grpc.StatusCode.NOT_FOUND)
        await expect_code(search(other, agent, "u", "fact"), grpc.StatusCode.NOT_FOUND)
    assert (await get(client, made.memory.memory_id)).text == "Private fact"


async def test_bad_memory_input_names_the_field_and_writes_nothing(client: Client) -> None:
    agent = await client.create_agent()
    scope = {"agent_id": agent, "user_id": "u"}
    await expect_invalid(create(client, memory(""), **scope), "memories[0].text")
    await expect_invalid(create(client, memory("x" * 2001), **scope), "memories[0].text")
    await expect_invalid(create(client, memory("ok", kind=0), **scope), "memories[0].kind")
    await expect_invalid(create(client, memory("ok", kind=42), **scope), "memories[0].kind")
    past = ts(datetime.now(UTC) - timedelta(days=1))
    await expect_invalid(create(client, memory("ok", expire_time=past), **scope), "memories[0].expire_time")
    twice = [memory("a", memory_id="same"), memory("b", memory_id="same")]
    await expect_invalid(create(client, *twice, **scope), "memories[1].memory_id")
    await expect_invalid(create(client, memory("a", topics=[""]), **scope), "memories[0].topics[0]")
    await expect_invalid(create(client, **scope), "memories")
    await expect_invalid(create(client, memory("a"), agent_id=agent), "user_id")
    episode = await client.open_episode(agent, user_id="u")
    other_user = create(client, memory("a"), episode_id=episode, agent_id=agent, user_id="someone-else")
    await expect_invalid(other_user, "user_id")
    await expect_invalid(create(client, memory("a"), placement=LAZY, **scope), "episode_id")
    assert await listed(client, agent, "u") == []

    (made,) = await create(client, memory("keep me"), **scope)
    unknown = pb.UpdateMemoryRequest(
        memory=memory_pb2.Memory(memory_id=made.memory.memory_id),
        update_mask=field_mask_pb2.FieldMask(paths=["colour"]),
    )
    await expect_invalid(client.memories.UpdateMemory(unknown, metadata=client.auth), "update_mask")
    immutable = pb.UpdateMemoryRequest(
        memory=memory_pb2.Memory(memory_id=made.memory.memory_id, user_id="x"),
        update_mask=field_mask_pb2.FieldMask(paths=["user_id"]),
    )
    await expect_invalid(client.memories.UpdateMemory(immutable, metadata=client.auth), "update_mask")
    assert (await get(client, made.memory.memory_id)).text == "keep me"

    await close(client, episode)
    closed = create(client, memory("too late"), episode_id=episode, placement=LAZY)
    await expect_code(closed, grpc.StatusCode.FAILED_PRECONDITION)
    await expect_code(update_session(client, episode, {"a": 1}), grpc.StatusCode.FAILED_PRECONDITION)
    fresh = await client.open_episode(agent, user_id="u")
    await expect_invalid(update_session(client, fresh, {}), "data")
    await expect_invalid(update_session(client, fresh, {"big": "x" * 70_000}), "data")
    await expect_invalid(update_session(client, fresh, {"a": 1}, ttl=duration_pb2.Duration(seconds=0)), "ttl")
    assert unique("x")


async def test_the_python_client_creates_searches_and_forwards_tool_calls(server: RunningServer) -> None:
    async with AsyncEpisodicClient(server.address, api_key=KEY_A, timeout=30.0) as typed:
        agent = unique("agent")
        await typed.create_agent(agent, model="gpt-4")
        made = await typed.create_memories(
            [memory_input("Kim collects vinyl records", "preference", entities=["Kim"])],
            agent_id=agent,
            user_id="kim",
        )
        assert made.results[0].memory.memory_id.startswith("mem_")
        hits = (await typed.search_memories(agent, "kim", "vinyl records", mode="semantic")).hits
        assert hits[0].memory.text == "Kim collects vinyl records"
        episode = (await typed.open_episode(agent, "kim")).episode.episode_id
        tools = [json_format.MessageToDict(t.definition) for t in await typed.get_memory_tools()]
        assert {t["function"]["name"] for t in tools} == {"add_memory", "search_memory"}
        result = await typed.call_memory_tool(episode, "search_memory", json.dumps({"query": "vinyl"}))
        assert json.loads(result)["memories"][0]["text"] == "Kim collects vinyl records"
        data = (await typed.update_session_data(episode, {"mood": "curious"})).session_data
        assert data.etag and (await typed.get_session_data(episode)).session_data.etag == data.etag


async def test_memories_are_found_again_after_a_restart_from_sql_alone(database_url: str) -> None:
    """The memory index lives in RAM: a new process rebuilds it from the rows (the rule that
    makes a crash between the SQL commit and the index update harmless)."""
    settings = settings_for(database_url)
    async with running_server(settings) as first, first.channel() as channel:
        client = Client.of(channel, KEY_A)
        agent = await client.create_agent()
        (made,) = await create(client, memory("Noor keeps bees on her roof"), agent_id=agent, user_id="noor")
    async with running_server(settings) as second, second.channel() as channel:
        client = Client.of(channel, KEY_A)
        hits = await search(client, agent, "noor", "bees roof", mode=episode_service_pb2.SEARCH_MODE_SEMANTIC)
        assert [h.memory.memory_id for h in hits] == [made.memory.memory_id]
