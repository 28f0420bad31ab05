"""EraseUser on a live server: a unique marker written through every path (messages, tool
calls, metadata, summaries, digests and their vectors and full-text rows, model calls) is
gone afterwards from the raw SQLite file bytes / every PostgreSQL table and from the
index; the receipt counts each kind; the audit keeps a hash, not the user id."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import grpc
import pytest
from google.protobuf import struct_pb2

from episodic.domain.erasure import user_hash
from episodic.v1 import (
    diagnostics_service_pb2,
    episode_pb2,
    episode_service_pb2,
    memory_pb2,
    memory_service_pb2,
)
from tests.conftest import unique
from tests.e2e.context_helpers import build, create_agent, list_calls
from tests.e2e.helpers import Client, assert_serving, expect_code, expect_invalid
from tests.polling import eventually
from tests.server_harness import KEY_A, KEY_B, TENANT_A, RunningServer, bearer

es = episode_service_pb2


@pytest.fixture
async def client(server: RunningServer) -> AsyncIterator[Client]:
    async with server.channel() as channel:
        yield Client.of(channel, KEY_A)
        await assert_serving(channel, bearer(KEY_A))


def tool_exchange(marker: str, call_id: str) -> list[episode_pb2.MessageInput]:
    arguments = struct_pb2.Struct()
    arguments.update({"query": f"flights for {marker}"})
    call = episode_pb2.ToolCall(tool_call_id=call_id, tool_name="search", input=arguments)
    result = episode_pb2.ToolResult(tool_call_id=call_id, succeeded=True)
    result.output.string_value = f"found {marker} itinerary"
    return [
        episode_pb2.MessageInput(role=episode_pb2.ROLE_ASSISTANT, tool_calls=[call]),
        episode_pb2.MessageInput(role=episode_pb2.ROLE_TOOL, tool_result=result),
    ]


def said(marker: str, i: int) -> episode_pb2.MessageInput:
    metadata = struct_pb2.Struct()
    metadata.update({"note": f"{marker} metadata"})
    role = episode_pb2.ROLE_USER if i % 2 == 0 else episode_pb2.ROLE_ASSISTANT
    text = f"My code word is {marker} and I am planning a trip to Kyoto in April, turn {i}."
    return episode_pb2.MessageInput(role=role, content=text, metadata=metadata)


async def remember_everywhere(client: Client, agent_id: str, user: str, marker: str) -> str:
    """A closed, digested episode and an open one compacted into a summary, with model calls."""
    closed = await client.open_episode(agent_id, user_id=user)
    await client.add(closed, *[said(marker, i) for i in range(6)], *tool_exchange(marker, "c1"))
    digest = (await client.close_digested(closed)).digest
    assert digest.state == episode_pb2.DIGEST_STATE_READY
    live = await client.open_episode(agent_id, user_id=user)
    await client.add(live, *[said(marker, i) for i in range(120)], *tool_exchange(marker, "c2"))
    built = await build(client, live, user_message=f"What is {marker}?", append_user_message=True)
    assert built.report.summary_to_seq > 0 and built.report.recalled_episodes  # a summary, a recall
    await remember_in_memories(client, agent_id, user, live, marker)
    return live


async def remember_in_memories(client: Client, agent_id: str, user: str, live: str, marker: str) -> None:
    """A long-term memory, a PENDING one in the open episode, and its session data."""
    note = memory_service_pb2.MemoryInput(text=f"The code word is {marker}", kind=memory_pb2.MEMORY_KIND_FACT)
    eager = memory_service_pb2.CreateMemoriesRequest(agent_id=agent_id, user_id=user, memories=[note])
    await client.memories.CreateMemories(eager, metadata=client.auth)
    pending = memory_service_pb2.MemoryInput(
        text=f"Wants {marker} kept", kind=memory_pb2.MEMORY_KIND_PREFERENCE
    )
    lazy = memory_service_pb2.CreateMemoriesRequest(episode_id=live, memories=[pending])
    await client.memories.CreateMemories(lazy, metadata=client.auth)
    data = struct_pb2.Struct()
    data.update({"code": marker})
    request = memory_service_pb2.UpdateSessionDataRequest(episode_id=live, data=data)
    await client.memories.UpdateSessionData(request, metadata=client.auth)


async def held_in(client: Client, agent_id: str, user: str, episode_id: str) -> int:
    """How many PENDING memories the open episode holds: the one created, and those extracted
    (in one write, in the background) from its compacted turns, once they are in."""

    async def listed() -> list[memory_pb2.Memory]:
        request = memory_service_pb2.ListMemoriesRequest(
            agent_id=agent_id, user_id=user, state=memory_pb2.MEMORY_STATE_PENDING, episode_id=episode_id,
            page_size=1000,
        )  # fmt: skip
        return list((await client.memories.ListMemories(request, metadata=client.auth)).memories)

    async def extracted() -> bool:
        return any(m.source.origin == memory_pb2.MEMORY_ORIGIN_EXTRACTED for m in await listed())

    assert await eventually(extracted), "nothing was extracted from the compacted turns"
    return len(await listed())


async def erase(client: Client, user: str, agent_id: str = "") -> es.ErasureReceipt:
    request = es.EraseUserRequest(user_id=user, agent_id=agent_id)
    return (await client.episodes.EraseUser(request, metadata=client.auth, timeout=60)).receipt


async def index_check(client: Client) -> diagnostics_service_pb2.CheckIndexResponse:
    return await client.diagnostics.CheckIndex(
        diagnostics_service_pb2.CheckIndexRequest(), metadata=client.auth
    )


def sqlite_bytes(url: str) -> bytes:
    path = Path(url.removeprefix("sqlite:///"))
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))  # db, -wal, -shm


async def postgres_rows_with(url: str, marker: str) -> list[str]:
    conn = await asyncpg.connect(url)
    try:
        tables = [
            r["tablename"]
            for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname='public'")
        ]
        return [
            t
            for t in tables
            if await conn.fetchval(f'SELECT count(*) FROM "{t}" x WHERE x::text LIKE $1', f"%{marker}%")
        ]
    finally:
        await conn.close()


async def marker_is_stored(database_url: str, marker: str) -> bool:
    if database_url.startswith("sqlite"):
        return marker.encode() in sqlite_bytes(database_url)
    return bool(await postgres_rows_with(database_url, marker))


async def test_an_erased_user_leaves_no_trace_in_the_database_files_or_the_index(
    client: Client, database_url: str
) -> None:
    marker = f"zq{uuid.uuid4().hex[:10]}xv"
    agent_id = await create_agent(client, max_working_memory_tokens=600)
    user = unique("erased-user")
    live = await remember_everywhere(client, agent_id, user, marker)
    pending = await held_in(client, agent_id, user, live)
    assert await marker_is_stored(database_url, marker)  # the test can see it before
    before = await index_check(client)
    receipt = await erase(client, user)
    assert receipt.episodes == 2 and receipt.messages == 6 + 2 + 120 + 2 + 1
    assert receipt.tool_calls == 2 and receipt.digests == 1 and receipt.summaries >= 1
    assert receipt.digest_vectors > 0 and receipt.text_rows == 1 and receipt.model_calls == 1
    assert receipt.memories >= 2 and receipt.session_data == 1  # + those extracted at close
    # every memory but those PENDING in the open episode was indexed
    assert receipt.index_vectors == receipt.digest_vectors + receipt.memories - pending
    assert receipt.storage_scrubbed
    assert receipt.user_hash == user_hash(TENANT_A, user) and user not in str(receipt)
    assert not await marker_is_stored(database_url, marker)
    after = await index_check(client)
    assert (after.missing, after.orphaned) == (0, 0)
    assert (
        after.index_vectors == before.index_vectors - receipt.digest_vectors
    )  # episodes; memories have their own index
    await expect_code(client.get_episode(live), grpc.StatusCode.NOT_FOUND)
    await expect_code(build(client, live, user_message="still there?"), grpc.StatusCode.NOT_FOUND)


async def test_erasure_is_idempotent_and_limited_to_the_named_agent_and_tenant(
    server: RunningServer, client: Client
) -> None:
    user = unique("user")
    first, second = await create_agent(client), await create_agent(client)
    keep = await client.open_episode(second, user_id=user)
    gone = await client.open_episode(first, user_id=user)
    async with server.channel() as channel:
        other_tenant = Client.of(channel, KEY_B)
        theirs = await other_tenant.open_episode(user_id=user)
        assert (await erase(client, user, agent_id=first)).episodes == 1
        again = await erase(client, user, agent_id=first)
        assert (again.episodes, again.messages, again.index_vectors) == (0, 0, 0)
        assert (await client.get_episode(keep)).episode_id == keep
        assert (await other_tenant.get_episode(theirs)).episode_id == theirs
    await expect_code(client.get_episode(gone), grpc.StatusCode.NOT_FOUND)


async def test_a_user_erased_mid_conversation_gets_not_found_on_the_next_call(client: Client) -> None:
    user = unique("user")
    episode_id = await client.open_episode(user_id=user)
    await build(client, episode_id, user_message="hello", append_user_message=True)  # cached working set
    await erase(client, user)
    await expect_code(client.add(episode_id, said("x", 0)), grpc.StatusCode.NOT_FOUND)
    await expect_code(build(client, episode_id, user_message="again"), grpc.StatusCode.NOT_FOUND)
    await expect_code(list_calls(client, episode_id), grpc.StatusCode.NOT_FOUND)


async def test_erasure_needs_a_user_id(client: Client) -> None:
    await expect_invalid(erase(client, ""), "user_id")
    await expect_invalid(erase(client, "u", agent_id="bad id with spaces"), "agent_id")
