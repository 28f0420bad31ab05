"""BuildContext end to end on a live server: order, budget, compaction, recall, the stream
and its frames, the model-call audit (stored == streamed), replies, and bad input."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from episodic.v1 import agent_pb2, context_pb2, context_service_pb2, episode_pb2, episode_service_pb2
from tests.conftest import unique
from tests.e2e.context_helpers import build, create_agent, get_call, list_calls
from tests.e2e.helpers import (
    Client,
    assert_serving,
    expect_code,
    expect_invalid,
    rpc_error,
    tool_call_message,
    tool_result_message,
    user_message,
)
from tests.server_harness import KEY_A, KEY_B, RunningServer, bearer, running_server, settings_for

S = context_pb2
CHAT = [
    "I am planning a trip to Kyoto in April with my sister.",
    "Lovely. Cherry blossoms usually peak in early April, so book early.",
    "We want a quiet hotel near Gion for under 25000 yen a night.",
    "Gion Hatanaka and Sakura Terrace both fit; Sakura Terrace is cheaper.",
]


@pytest.fixture
async def client(server: RunningServer) -> AsyncIterator[Client]:
    async with server.channel() as channel:
        yield Client.of(channel, KEY_A)
        await assert_serving(channel, bearer(KEY_A))


def assistant(text: str) -> episode_pb2.MessageInput:
    return episode_pb2.MessageInput(role=episode_pb2.ROLE_ASSISTANT, content=text)


async def chat(client: Client, episode_id: str, turns: int) -> None:
    lines = [CHAT[i % 4] for i in range(turns)]
    messages = [user_message(t) if i % 2 == 0 else assistant(t) for i, t in enumerate(lines)]
    for start in range(0, len(messages), 400):
        await client.add(episode_id, *messages[start : start + 400])


async def test_context_renders_in_order_and_is_stored_exactly_as_streamed(client: Client) -> None:
    agent_id = await create_agent(client, system_prompt="You are a travel agent.")
    episode_id = await client.open_episode(agent_id)
    await chat(client, episode_id, 4)
    built = await build(client, episode_id, user_message="Any restaurants nearby?", append_user_message=True)
    sections = [m.section for m in built.messages]
    assert sections == [
        S.CONTEXT_SECTION_SYSTEM,
        *[S.CONTEXT_SECTION_HISTORY] * 4,
        S.CONTEXT_SECTION_USER_MESSAGE,
    ]
    assert built.messages[0].content == "You are a travel agent."
    assert [m.content for m in built.messages[1:5]] == CHAT
    report = built.report
    assert report.user_message_seq == 5 and (report.history_from_seq, report.history_to_seq) == (1, 4)
    assert (
        report.total_tokens
        == sum(m.token_count for m in built.messages) + report.section_tokens.reply_priming
    )
    assert report.total_tokens <= report.budget_tokens <= report.ceiling_tokens
    assert report.compaction == S.COMPACTION_NONE and report.token_encoding == "cl100k_base"
    stored = await get_call(client, report.model_call_id)
    assert list(stored.messages) == built.messages  # byte for byte what was streamed
    assert stored.report == report
    assert (await client.log_of(episode_id))[-1].content == "Any restaurants nearby?"


async def test_a_retried_append_with_the_same_client_id_is_logged_once(client: Client) -> None:
    episode_id = await client.open_episode()
    for _ in range(2):
        await build(client, episode_id, user_message="hi", append_user_message=True, client_message_id="m-1")
    assert [m.content for m in await client.log_of(episode_id)] == ["hi"]


async def test_a_request_id_replays_the_stored_model_call(client: Client) -> None:
    episode_id = await client.open_episode()
    first = await build(client, episode_id, user_message="hello", request_id="turn-1")
    await chat(client, episode_id, 2)
    again = await build(client, episode_id, user_message="hello", request_id="turn-1")
    assert again.report.model_call_id == first.report.model_call_id
    assert again.messages == first.messages
    assert len(await list_calls(client, episode_id)) == 1


async def test_past_conversations_come_between_the_system_prompt_and_history(client: Client) -> None:
    agent_id = await create_agent(client, recall_mode=agent_pb2.RECALL_MODE_RECENCY)
    before = await client.open_episode(agent_id, user_id="mary")
    await chat(client, before, 4)
    await client.close_digested(before)
    episode_id = await client.open_episode(agent_id, user_id="mary")
    built = await build(client, episode_id, user_message="Where were we?")
    sections = [m.section for m in built.messages]
    assert sections[:3] == [
        S.CONTEXT_SECTION_SYSTEM,
        S.CONTEXT_SECTION_KNOWN_FACTS,
        S.CONTEXT_SECTION_PAST_CONVERSATIONS,
    ]
    past = built.messages[2]  # after the memories extracted when `before` closed
    assert past.role == episode_pb2.ROLE_CONTEXT
    assert past.content.startswith("[Past Conversations]\nThe following are relevant conversations")
    assert "Date: " in past.content and "Summary: " in past.content
    assert past.content.endswith("Use this context to personalise your response.")
    assert [(e.episode_id, e.rendered) for e in built.report.recalled_episodes] == [(before, True)]
    assert list(built.report.recalled_episodes[0].signals) == [episode_service_pb2.MATCH_SIGNAL_RECENCY]
    other_user = await client.open_episode(agent_id, user_id="someone-else")
    assert not (await build(client, other_user, user_message="Where were we?")).report.recalled_episodes


async def test_a_long_conversation_is_compacted_into_a_persisted_summary(client: Client) -> None:
    agent_id = await create_agent(client, max_working_memory_tokens=600)
    episode_id = await client.open_episode(agent_id)
    await chat(client, episode_id, 300)
    first = await build(client, episode_id, user_message="Summarize our plan.")
    report = first.report
    assert report.compaction == S.COMPACTION_SUMMARIZED
    assert report.summary_from_seq == 1 and report.summary_to_seq > 200
    assert report.history_from_seq == report.summary_to_seq + 1 and report.history_to_seq == 300
    summary = [m for m in first.messages if m.section == S.CONTEXT_SECTION_SUMMARY]
    assert len(summary) == 1 and summary[0].content.startswith("[Summary of earlier conversation]")
    assert report.total_tokens <= 600
    await chat(client, episode_id, 2)
    second = await build(client, episode_id, user_message="And then?")
    assert second.report.compaction == S.COMPACTION_NONE  # the tail fits again: no summary every turn
    assert second.report.summary_to_seq == report.summary_to_seq
    assert len(await client.log_of(episode_id)) == 302  # the log keeps everything


async def test_old_tool_results_are_stubbed_in_the_context_but_kept_in_the_log(client: Client) -> None:
    agent_id = await create_agent(client, tool_results_kept_verbatim=1)
    episode_id = await client.open_episode(agent_id)
    for i in range(3):
        await client.add(episode_id, tool_call_message(f"c{i}"), tool_result_message(f"c{i}"))
    built = await build(client, episode_id)
    tools = [m for m in built.messages if m.role == episode_pb2.ROLE_TOOL]
    assert [m.stubbed for m in tools] == [True, True, False]
    assert tools[0].content == "[search result elided (ok); log seq 2]"
    assert built.report.tool_results_stubbed == 2
    log = await client.log_of(episode_id)
    assert log[1].tool_result.output.string_value == "ok"


async def test_messages_larger_than_a_frame_are_split_and_joined_back(database_url: str) -> None:
    settings = settings_for(database_url, max_send_message_bytes=64 * 1024)
    async with running_server(settings) as server, server.channel() as channel:
        client = Client.of(channel, KEY_A)
        agent_id = await create_agent(
            client, max_working_memory_tokens=100_000, context_window_tokens=200_000
        )
        episode_id = await client.open_episode(agent_id)
        big = "naïve café 東京 " * 12_000  # ~200 KB of multi-byte text
        built = await build(client, episode_id, user_message=big)
        assert len(built.frames) >= 4
        assert all(f.ByteSize() <= 64 * 1024 for f in built.frames)
        assert built.messages[-1].content == big
        too_big = await expect_code(
            get_call(client, built.report.model_call_id), grpc.StatusCode.FAILED_PRECONDITION
        )
        assert "max_send_message_bytes" in (too_big.details() or "")
    async with running_server(settings_for(database_url)) as server, server.channel() as channel:
        stored = await get_call(Client.of(channel, KEY_A), built.report.model_call_id)
        assert list(stored.messages) == built.messages


async def test_model_replies_attach_once_and_calls_page_newest_first(client: Client) -> None:
    episode_id = await client.open_episode()
    ids = [(await build(client, episode_id, user_message=f"turn {i}")).report.model_call_id for i in range(3)]
    assert [c.model_call_id for c in await list_calls(client, episode_id, page_size=2)] == ids[::-1]
    reply = context_service_pb2.RecordModelReplyRequest(
        model_call_id=ids[0],
        input_tokens=120,
        output_tokens=30,
        latency=Duration(seconds=1, nanos=500_000_000),
    )
    recorded = (await client.context.RecordModelReply(reply, metadata=client.auth)).model_call
    assert (recorded.reply.input_tokens, recorded.reply.output_tokens) == (120, 30)
    assert recorded.reply.latency.ToMilliseconds() == 1500
    again = await client.context.RecordModelReply(reply, metadata=client.auth)  # a retry is fine
    assert again.model_call.reply.input_tokens == 120
    reply.output_tokens = 31
    await expect_code(
        client.context.RecordModelReply(reply, metadata=client.auth), grpc.StatusCode.ALREADY_EXISTS
    )
    reply.input_tokens = -1
    await expect_invalid(client.context.RecordModelReply(reply, metadata=client.auth), "input_tokens")
    (answer,) = await client.add(episode_id, assistant("Here is turn 1."))
    linked = context_service_pb2.RecordModelReplyRequest(
        model_call_id=ids[1], assistant_message_seq=answer.seq
    )
    stored = (await client.context.RecordModelReply(linked, metadata=client.auth)).model_call
    assert stored.reply.assistant_message_seq == answer.seq
    linked.model_call_id, linked.assistant_message_seq = ids[2], 999
    await expect_invalid(
        client.context.RecordModelReply(linked, metadata=client.auth), "assistant_message_seq"
    )


async def test_another_tenant_sees_neither_the_episode_nor_its_model_calls(server: RunningServer) -> None:
    async with server.channel() as channel:
        alice, bob = Client.of(channel, KEY_A), Client.of(channel, KEY_B)
        episode_id = await alice.open_episode()
        call_id = (await build(alice, episode_id, user_message="secret")).report.model_call_id
        await expect_code(build(bob, episode_id, user_message="x"), grpc.StatusCode.NOT_FOUND)
        await expect_code(get_call(bob, call_id), grpc.StatusCode.NOT_FOUND)
        await expect_code(list_calls(bob, episode_id), grpc.StatusCode.NOT_FOUND)


async def test_a_closed_episode_is_rendered_read_only(client: Client) -> None:
    episode_id = await client.open_episode()
    await chat(client, episode_id, 2)
    close = episode_service_pb2.CloseEpisodeRequest(episode_id=episode_id)
    await client.episodes.CloseEpisode(close, metadata=client.auth)
    built = await build(client, episode_id, user_message="one more thing")
    assert built.report.compaction == S.COMPACTION_SKIPPED_CLOSED
    await expect_code(
        build(client, episode_id, user_message="x", append_user_message=True),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    assert len(await client.log_of(episode_id)) == 2


async def test_bad_input_gets_a_clear_status_naming_the_field(client: Client) -> None:
    episode_id = await client.open_episode()
    mem = agent_pb2.MemoryConfig
    await expect_code(build(client, unique("missing"), user_message="x"), grpc.StatusCode.NOT_FOUND)
    await expect_invalid(build(client, "", user_message="x"), "episode_id")
    appending: dict[str, Any] = {"user_message": "hello", "append_user_message": True}  # refused: no append
    await expect_invalid(
        build(client, episode_id, memory_config=mem(max_working_memory_tokens=0), **appending),
        "memory_config.max_working_memory_tokens",
    )
    await expect_invalid(
        build(client, episode_id, memory_config=mem(max_working_memory_tokens=100_000)),
        "memory_config.max_working_memory_tokens",  # above the ceiling (70 % of 128k)
    )
    await expect_code(
        build(client, episode_id, model="gpt-4o", **appending), grpc.StatusCode.FAILED_PRECONDITION
    )
    await expect_invalid(build(client, episode_id, append_user_message=True), "user_message")
    await expect_invalid(build(client, episode_id, user_message="x" * (256 * 1024 + 1)), "user_message")
    small = mem(context_window_tokens=1000, max_working_memory_tokens=500)  # ceiling 700
    await expect_invalid(
        build(client, episode_id, system_prompt="word " * 800, memory_config=small, **appending),
        "system_prompt",
    )
    await expect_invalid(
        build(client, episode_id, user_message="word " * 800, memory_config=mem(context_window_tokens=1000,
              max_working_memory_tokens=500)),
        "user_message",
    )  # fmt: skip
    assert not await list_calls(client, episode_id)  # nothing refused was recorded
    assert not await client.log_of(episode_id)


async def test_an_agent_prompt_over_the_ceiling_is_a_failed_precondition(client: Client) -> None:
    agent_id = await create_agent(
        client, system_prompt="word " * 800, context_window_tokens=1000, max_working_memory_tokens=500
    )
    episode_id = await client.open_episode(agent_id)
    await expect_code(build(client, episode_id, user_message="hi"), grpc.StatusCode.FAILED_PRECONDITION)


async def test_an_unknown_model_name_is_a_label_and_a_known_one_must_share_the_encoding(
    client: Client,
) -> None:
    episode_id = await client.open_episode()
    built = await build(client, episode_id, user_message="hi", model="my-local-llama")
    assert built.report.model == "my-local-llama"
    assert (await build(client, episode_id, user_message="hi", model="gpt-3.5-turbo")).report.model


async def test_a_cancelled_stream_leaves_no_half_written_model_call(database_url: str) -> None:
    settings = settings_for(database_url, max_send_message_bytes=16 * 1024)
    async with running_server(settings) as server, server.channel() as channel:
        client = Client.of(channel, KEY_A)
        agent_id = await create_agent(
            client, max_working_memory_tokens=100_000, context_window_tokens=200_000
        )
        episode_id = await client.open_episode(agent_id)
        request = context_service_pb2.BuildContextRequest(
            episode_id=episode_id, user_message="word " * 40_000
        )
        for _ in range(5):
            call = client.context.BuildContext(request, metadata=client.auth, timeout=30)
            async for _frame in call:
                call.cancel()
                break
        late = await rpc_error(build(client, episode_id, user_message="x", timeout=0.0001))
        assert late.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        await asyncio.sleep(0.2)
        await assert_serving(channel, bearer(KEY_A))
    # The late call may still be served whole: the server can finish it before it sees the
    # deadline its client gave up on (a fresh-clone CI run stored it once).
    async with running_server(settings_for(database_url)) as server, server.channel() as channel:
        for stored in await list_calls(Client.of(channel, KEY_A), episode_id, page_size=2):
            assert stored.report.model_call_id == stored.model_call_id  # each one whole, or none at all
            assert len(stored.messages) == 2 and stored.messages[-1].content in ("word " * 40_000, "x")
