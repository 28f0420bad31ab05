"""The Python client's ContextService and SearchEpisodes methods against a live server: both
clients build a context (split messages joined back), read the model-call audit, attach
replies, and get typed errors, also from inside the stream."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import grpc
import pytest

from episodic_client import (
    AlreadyExistsError,
    AsyncEpisodicClient,
    BuiltContext,
    EpisodicClient,
    EpisodicClientError,
    InvalidArgumentError,
    MemoryConfig,
    ModelCall,
    NotFoundError,
    UnavailableError,
)
from episodic_client.context import join_frames
from episodic_client.v1 import context_pb2, context_service_pb2, episode_pb2, episode_service_pb2
from tests.conftest import unique
from tests.e2e.helpers import DIGEST_SETTLE_SECONDS
from tests.polling import eventually
from tests.ports import refusing_port
from tests.server_harness import KEY_A, KEY_B, RunningServer, running_server, settings_for

S = context_pb2
BIG_WINDOW = MemoryConfig(max_working_memory_tokens=100_000, context_window_tokens=200_000)
BIG_MESSAGE = "naïve café 東京 " * 12_000  # ~200 KB of multi-byte text: several 64 KiB frames


@pytest.fixture
def database_url(sqlite_url: str) -> str:
    """One backend: what these tests check is the same over either store (the stores are
    held to one behaviour on both by tests/contracts and tests/integration)."""
    return sqlite_url


def async_client(server: RunningServer, api_key: str = KEY_A) -> AsyncEpisodicClient:
    return AsyncEpisodicClient(server.address, api_key=api_key, timeout=10.0)


def sync_client(address: str, api_key: str = KEY_A) -> EpisodicClient:
    return EpisodicClient(address, api_key=api_key, timeout=10.0)


async def start_episode(client: AsyncEpisodicClient, memory: MemoryConfig | None = None) -> str:
    created = await client.create_agent(unique("agent"), system_prompt="Be brief.", memory_config=memory)
    opened = await client.open_episode(created.agent.agent_id, unique("user"))
    return opened.episode.episode_id


async def test_async_build_context_returns_what_the_model_call_stores(server: RunningServer) -> None:
    async with async_client(server) as client:
        episode_id = await start_episode(client)
        await client.add_message(episode_id, "user", "Hello")
        await client.add_message(episode_id, "assistant", "Hi!")
        built = await client.build_context(episode_id, user_message="Any news?", append_user_message=True)
        stored = (await client.get_model_call(built.report.model_call_id)).model_call
    assert isinstance(built, BuiltContext)
    assert [m.section for m in built.messages] == [
        S.CONTEXT_SECTION_SYSTEM,
        S.CONTEXT_SECTION_HISTORY,
        S.CONTEXT_SECTION_HISTORY,
        S.CONTEXT_SECTION_USER_MESSAGE,
    ]
    assert [m.content for m in built.messages] == ["Be brief.", "Hello", "Hi!", "Any news?"]
    assert [m.index for m in built.messages] == [0, 1, 2, 3]
    assert built.report.user_message_seq == 3 and built.report.total_tokens > 0
    assert list(stored.messages) == built.messages and stored.report == built.report


async def test_async_model_calls_page_newest_first_and_take_one_reply(server: RunningServer) -> None:
    async with async_client(server) as client:
        episode_id = await start_episode(client)
        built = [await client.build_context(episode_id, user_message=f"turn {i}") for i in range(3)]
        ids = [b.report.model_call_id for b in built]
        page = await client.list_model_calls(episode_id, page_size=2)
        walked = [c.model_call_id async for c in client.iter_model_calls(episode_id, page_size=2)]
        reply = await client.record_model_reply(
            ids[0], input_tokens=120, output_tokens=30, latency=timedelta(milliseconds=1500)
        )
        again = await client.record_model_reply(
            ids[0], input_tokens=120, output_tokens=30, latency=timedelta(milliseconds=1500)
        )
        with pytest.raises(AlreadyExistsError):
            await client.record_model_reply(ids[0], input_tokens=120, output_tokens=31)
    assert [c.model_call_id for c in page.model_calls] == [ids[2], ids[1]] and page.next_page_token
    assert walked == ids[::-1]
    assert (reply.model_call.reply.input_tokens, reply.model_call.reply.output_tokens) == (120, 30)
    assert reply.model_call.reply.latency.ToMilliseconds() == 1500
    assert again.model_call.reply == reply.model_call.reply


async def test_async_build_context_errors_are_typed(server: RunningServer) -> None:
    async with async_client(server) as client:
        episode_id = await start_episode(client)
        with pytest.raises(NotFoundError) as missing:
            await client.build_context(unique("ep-missing"), user_message="hi")
        with pytest.raises(InvalidArgumentError) as invalid:
            await client.build_context(episode_id, memory_config=MemoryConfig(max_working_memory_tokens=0))
    async with async_client(server, api_key=KEY_B) as other_tenant:
        with pytest.raises(NotFoundError):
            await other_tenant.build_context(episode_id, user_message="hi")
    assert missing.value.code == grpc.StatusCode.NOT_FOUND and missing.value.reason == "EPISODE_NOT_FOUND"
    assert [f for f, _ in invalid.value.field_violations] == ["memory_config.max_working_memory_tokens"]


def sync_context_round_trip(address: str, episode_id: str) -> tuple[BuiltContext, ModelCall, list[str]]:
    with sync_client(address) as client:
        built = client.build_context(episode_id, user_message="What did I say?", request_id="turn-1")
        replayed = client.build_context(episode_id, user_message="What did I say?", request_id="turn-1")
        assert replayed == built  # a request_id replays the stored call
        client.build_context(episode_id, user_message="And now?", system_prompt="Answer in French.")
        recorded = client.record_model_reply(
            built.report.model_call_id, input_tokens=10, output_tokens=2, assistant_message_seq=1
        )
        walked = [c.model_call_id for c in client.iter_model_calls(episode_id, page_size=1)]
        with pytest.raises(NotFoundError):
            client.build_context("ep-missing-sync", user_message="hi")
        return built, recorded.model_call, walked


async def test_sync_client_builds_contexts_and_records_replies(server: RunningServer) -> None:
    async with async_client(server) as client:
        episode_id = await start_episode(client)
        await client.add_message(episode_id, "assistant", "Bonjour.")
        built, recorded, walked = await asyncio.to_thread(sync_context_round_trip, server.address, episode_id)
        listed = [c.model_call_id for c in (await client.list_model_calls(episode_id)).model_calls]
    assert [m.content for m in built.messages] == ["Be brief.", "Bonjour.", "What did I say?"]
    assert list(recorded.messages) == built.messages and recorded.reply.assistant_message_seq == 1
    assert walked == listed and len(walked) == 2 and walked[-1] == built.report.model_call_id


def sync_build_big(address: str, episode_id: str) -> BuiltContext:
    with sync_client(address) as client:
        return client.build_context(episode_id, user_message=BIG_MESSAGE, timeout=30.0)


async def test_both_clients_join_a_message_split_over_frames(database_url: str) -> None:
    settings = settings_for(database_url, max_send_message_bytes=64 * 1024)
    async with running_server(settings) as server, async_client(server) as client:
        episode_id = await start_episode(client, BIG_WINDOW)
        built = await client.build_context(episode_id, user_message=BIG_MESSAGE, timeout=30.0)
        built_sync = await asyncio.to_thread(sync_build_big, server.address, episode_id)
    for result in (built, built_sync):
        assert [m.section for m in result.messages] == [
            S.CONTEXT_SECTION_SYSTEM,
            S.CONTEXT_SECTION_USER_MESSAGE,
        ]
        user = result.messages[-1]
        assert user.content == BIG_MESSAGE and not user.content_continues
        assert user.index == 1 and user.role == episode_pb2.ROLE_USER and user.token_count > 0
    async with running_server(settings_for(database_url)) as server, async_client(server) as client:
        stored = (await client.get_model_call(built.report.model_call_id)).model_call
    assert list(stored.messages) == built.messages  # joined == stored whole


async def test_search_episodes_finds_the_closed_episode(server: RunningServer) -> None:
    async with async_client(server) as client:
        agent_id = (await client.create_agent(unique("agent"))).agent.agent_id
        user_id = unique("user")
        episode_id = (await client.open_episode(agent_id, user_id)).episode.episode_id
        await client.add_message(episode_id, "user", "Book a quiet hotel in Kyoto near Gion.")
        await client.close_episode(episode_id)
        found = await search_until_ready(client, agent_id, user_id)
        future = datetime.now(UTC) + timedelta(days=1)
        none_later = await client.search_episodes(agent_id, user_id, mode="recency", ended_after=future)
        with pytest.raises(InvalidArgumentError):
            await client.search_episodes(agent_id, user_id, mode="semantic")  # no query
    assert [s.episode_id for s in found.snippets] == [episode_id]
    assert not none_later.snippets


async def search_until_ready(
    client: AsyncEpisodicClient, agent_id: str, user_id: str
) -> episode_service_pb2.SearchEpisodesResponse:
    """The search once the closed episode's digest has made it findable (polled: a loaded
    machine digests late; the guard is against a hang, never a measurement)."""
    found = episode_service_pb2.SearchEpisodesResponse()

    async def searchable() -> bool:
        nonlocal found
        found = await client.search_episodes(agent_id, user_id, "hotel in Kyoto", mode="hybrid", top_k=3)
        return bool(found.snippets)

    assert await eventually(searchable, DIGEST_SETTLE_SECONDS), "the digest never became searchable"
    return found


def frame(*parts: tuple[int, str, bool], report: bool = False) -> context_service_pb2.BuildContextResponse:
    messages = [S.ContextMessage(index=i, content=text, content_continues=more) for i, text, more in parts]
    out = context_service_pb2.BuildContextResponse(messages=messages)
    if report:
        out.report.model_call_id = "mc_1"
    return out


def test_parts_are_joined_across_frames_and_a_truncated_stream_is_an_error() -> None:
    frames = [
        frame((0, "sys", False), (1, "ab", True)),
        frame((1, "cd", True)),
        frame((1, "e", False), report=True),
    ]
    built = join_frames(frames)
    assert [(m.index, m.content, m.content_continues) for m in built.messages] == [
        (0, "sys", False),
        (1, "abcde", False),
    ]
    assert built.report.model_call_id == "mc_1"
    for broken in (frames[:2], [frame((0, "a", True)), frame((1, "b", False), report=True)]):
        with pytest.raises(EpisodicClientError) as err:
            join_frames(broken)
        assert err.value.code == grpc.StatusCode.INTERNAL


async def test_an_unreachable_server_fails_the_async_stream_with_a_typed_error() -> None:
    with refusing_port() as port:
        async with AsyncEpisodicClient(f"127.0.0.1:{port}", timeout=2.0) as client:
            with pytest.raises(UnavailableError):
                await client.build_context("ep_x", user_message="hi")


def test_an_unreachable_server_fails_the_sync_stream_with_a_typed_error() -> None:
    with (
        refusing_port() as port,
        EpisodicClient(f"127.0.0.1:{port}", timeout=2.0) as client,
        pytest.raises(UnavailableError),
    ):
        client.build_context("ep_x", user_message="hi")
