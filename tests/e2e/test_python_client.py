"""The Python client (clients/python, installed with `pip install -e clients/python`) against a
live server: both clients round-trip, iterators walk every page, errors arrive typed."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import grpc
import pytest

from episodic.edges.grpc.episodes import MAX_DIGEST_WAIT_SECONDS as SERVER_DIGEST_WAIT_SECONDS
from episodic_client import (
    AlreadyExistsError,
    AsyncEpisodicClient,
    EpisodicClient,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    UnauthenticatedError,
    UnavailableError,
    memory_input,
    message_input,
    tool_call,
    tool_result,
)
from episodic_client.v1 import agent_pb2, diagnostics_service_pb2, episode_pb2
from tests.conftest import unique
from tests.e2e.helpers import DIGEST_SETTLE_SECONDS
from tests.polling import eventually
from tests.ports import refusing_port
from tests.server_harness import KEY_A, RunningServer

CLOSED = episode_pb2.Episode.STATE_CLOSED
# a digest's settled states, in the client's enum: a call waiting for one ends on them
SETTLED_DIGESTS = frozenset({episode_pb2.DIGEST_STATE_READY, episode_pb2.DIGEST_STATE_FAILED})
# the call's deadline: longer than the server's wait for a digest (30 s), so that wait is whole
WAIT_DEADLINE_SECONDS = 60.0


@pytest.fixture
def database_url(sqlite_url: str) -> str:
    """One backend: what these tests check is the same over either store (the stores are
    held to one behaviour on both by tests/contracts and tests/integration)."""
    return sqlite_url


def async_client(server: RunningServer, api_key: str = KEY_A) -> AsyncEpisodicClient:
    return AsyncEpisodicClient(server.address, api_key=api_key, timeout=5.0)


async def test_async_client_creates_updates_and_reads_back_an_agent(server: RunningServer) -> None:
    agent_id = unique("agent")
    async with async_client(server) as client:
        memory = agent_pb2.MemoryConfig(recall_top_k=5, recall_mode=agent_pb2.RECALL_MODE_NONE)
        created = (await client.create_agent(agent_id, model="gpt-4o", memory_config=memory)).agent
        created.system_prompt = "Be very brief."
        await client.update_agent(created, ["system_prompt"])
        fetched = (await client.get_agent(agent_id)).agent
        assert (await client.echo(b"ping")).payload == b"ping"
    assert created.token_encoding == "o200k_base" and fetched.memory_config.recall_top_k == 5
    assert fetched.system_prompt == "Be very brief."


async def test_async_client_round_trips_a_tool_using_conversation(server: RunningServer) -> None:
    # a recent start: one long past is idle at once, and the idle reaper may close it first
    started = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
    async with async_client(server) as client:
        agent_id = (await client.create_agent(unique("agent"))).agent.agent_id
        opened = await client.open_episode(agent_id, "mary", metadata={"channel": "web"}, start_time=started)
        episode_id = opened.episode.episode_id
        assert opened.created and opened.episode.start_time.ToDatetime(tzinfo=UTC) == started
        assert dict(opened.episode.metadata) == {"channel": "web"}

        first = await client.add_message(episode_id, "user", "Weather in Paris?", client_message_id="m1")
        call = tool_call("call-1", "weather", {"city": "Paris"})
        await client.add_message(episode_id, episode_pb2.ROLE_ASSISTANT, tool_calls=[call])
        result = tool_result("call-1", {"celsius": 21}, duration=timedelta(milliseconds=40))
        await client.add_messages(
            episode_id, [message_input("tool", tool_result=result), message_input("assistant", "21°C.")]
        )
        retried = await client.add_message(episode_id, "user", "Weather in Paris?", client_message_id="m1")
        assert retried.deduplicated and retried.message.seq == first.message.seq == 1

        log = (await client.list_messages(episode_id)).messages
        assert [m.seq for m in log] == [4, 3, 2, 1]
        assert log[1].tool_result.output.struct_value["celsius"] == 21
        assert log[2].tool_calls[0].input["city"] == "Paris"

        closed = (await client.close_episode(episode_id, reason="agent_decision", note="answered")).episode
        assert closed.state == CLOSED and closed.close_reason == episode_pb2.CLOSE_REASON_AGENT_DECISION
        assert (await client.get_episode(episode_id)).episode.message_count == 4


def sync_round_trip(address: str, agent_id: str) -> tuple[list[int], episode_pb2.Episode]:
    with EpisodicClient(address, api_key=KEY_A, timeout=5.0) as client:
        client.create_agent(agent_id, model="gpt-4")
        episode_id = client.open_episode(agent_id, "john").episode.episode_id
        client.add_message(episode_id, "user", "Hello")
        client.add_message(episode_id, "assistant", "Hi!")
        seqs = [m.seq for m in client.iter_messages(episode_id, page_size=1)]
        return seqs, client.close_episode(episode_id).episode


async def test_sync_client_round_trips_a_conversation(server: RunningServer) -> None:
    agent_id = unique("agent")
    seqs, closed = await asyncio.to_thread(sync_round_trip, server.address, agent_id)
    assert seqs == [2, 1]
    assert closed.state == CLOSED and closed.close_reason == episode_pb2.CLOSE_REASON_USER_ENDED
    assert closed.agent_id == agent_id and closed.token_encoding == "cl100k_base"


async def test_close_episode_can_wait_for_the_digest(server: RunningServer) -> None:
    # the feature's promise, not its speed: the call answers with the digest READY, or, on a
    # machine too loaded to digest within the server's 30 s wait, with it unsettled only once
    # that wait has run out (and the digest then settles READY)
    async with AsyncEpisodicClient(server.address, api_key=KEY_A, timeout=WAIT_DEADLINE_SECONDS) as client:
        agent_id = (await client.create_agent(unique("agent"))).agent.agent_id
        episode_id = (await client.open_episode(agent_id, "mary")).episode.episode_id
        await client.add_message(episode_id, "user", "My flight to Lisbon leaves on Friday.")
        began = time.monotonic()
        closed = (await client.close_episode(episode_id, wait_for_digest=True)).episode
        waited = time.monotonic() - began
        if closed.digest.state not in SETTLED_DIGESTS:  # the server's wait ran out first
            assert waited >= SERVER_DIGEST_WAIT_SECONDS - 0.5, (waited, closed.digest)

            async def settled() -> bool:
                closed.CopyFrom((await client.get_episode(episode_id)).episode)
                return closed.digest.state in SETTLED_DIGESTS

            assert await eventually(settled, DIGEST_SETTLE_SECONDS), closed.digest
    assert closed.digest.state == episode_pb2.DIGEST_STATE_READY


async def test_iterators_follow_page_tokens_through_every_page(server: RunningServer) -> None:
    agent_id, user_id = unique("agent"), unique("user")
    async with async_client(server) as client:
        await client.create_agent(agent_id)
        opened = [(await client.open_episode(agent_id, user_id)).episode.episode_id for _ in range(5)]
        await client.close_episode(opened[0])
        batch = [message_input("user", f"turn {i}") for i in range(7)]
        await client.add_messages(opened[-1], batch)

        episodes = [e.episode_id async for e in client.iter_episodes(user_id=user_id, page_size=2)]
        closed = [
            e.episode_id async for e in client.iter_episodes(user_id=user_id, state="closed", page_size=1)
        ]
        seqs = [m.seq async for m in client.iter_messages(opened[-1], page_size=3)]
        agents = [a.agent_id async for a in client.iter_agents(page_size=2)]
    assert sorted(episodes) == sorted(opened) and len(episodes) == 5
    assert closed == [opened[0]]
    assert seqs == [7, 6, 5, 4, 3, 2, 1]
    assert agent_id in agents and len(agents) == len(set(agents))


async def test_invalid_argument_arrives_with_its_field_violation(server: RunningServer) -> None:
    async with async_client(server) as client:
        agent_id = (await client.create_agent(unique("agent"))).agent.agent_id
        with pytest.raises(InvalidArgumentError) as err:
            await client.open_episode(agent_id, user_id="")
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [field for field, _ in err.value.field_violations] == ["user_id"]


async def test_wrong_api_key_is_unauthenticated(server: RunningServer) -> None:
    async with async_client(server, api_key="epk_not_a_real_key") as client:
        with pytest.raises(UnauthenticatedError) as err:
            await client.get_episode("ep_anything")
    assert err.value.reason == "API_KEY_INVALID"


async def test_errors_carry_the_servers_reason(server: RunningServer) -> None:
    async with async_client(server) as client:
        agent_id = (await client.create_agent(unique("agent"))).agent.agent_id
        with pytest.raises(AlreadyExistsError):
            await client.create_agent(agent_id)
        with pytest.raises(NotFoundError) as missing:
            await client.get_episode("ep_missing")
        episode_id = (await client.open_episode(agent_id, "mary")).episode.episode_id
        await client.close_episode(episode_id)
        with pytest.raises(FailedPreconditionError):
            await client.add_message(episode_id, "user", "too late")
    assert missing.value.reason == "EPISODE_NOT_FOUND"


def test_an_unknown_role_name_is_rejected_before_sending() -> None:
    with EpisodicClient("127.0.0.1:1") as client, pytest.raises(ValueError, match="robot") as refused:
        client.add_message("ep_x", "robot", "beep")
    assert "unspecified" not in str(refused.value), "the zero value is not a role to offer"


async def test_memories_list_by_state_and_erase_user_removes_them_and_the_index_stays_consistent(
    server: RunningServer,
) -> None:
    async with async_client(server) as client:
        agent_id = (await client.create_agent(unique("agent"))).agent.agent_id
        user = unique("user")
        episode_id = (await client.open_episode(agent_id, user)).episode.episode_id
        await client.create_memories([memory_input("Prefers window seats")], agent_id=agent_id, user_id=user)
        await client.create_memories(
            [memory_input("Flying to Oslo on Friday", "event")], episode_id=episode_id
        )
        pending = await client.list_memories(agent_id, user, state="pending")
        promoted = await client.list_memories(agent_id, user, state="promoted", include_superseded=True)
        assert [m.text for m in pending.memories] == ["Flying to Oslo on Friday"]
        assert [m.text for m in promoted.memories] == ["Prefers window seats"]
        receipt = (await client.erase_user(user, agent_id=agent_id)).receipt
        assert receipt.episodes == 1 and receipt.erasure_id
        assert not (await client.list_memories(agent_id, user)).memories
        checked = await client.check_index(agent_id)
    assert checked.status == diagnostics_service_pb2.CHECK_INDEX_STATUS_CONSISTENT


def test_an_unreachable_server_is_unavailable_without_rich_details() -> None:
    with (
        refusing_port() as port,
        EpisodicClient(f"127.0.0.1:{port}", timeout=2.0) as client,
        pytest.raises(UnavailableError) as err,
    ):
        client.echo(b"")
    assert err.value.reason == "" and err.value.field_violations == []
