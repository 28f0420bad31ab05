"""RetractMessage over the wire, on each backend: a retracted message stays in the log
(scrollback shows it, with its retract_time) and leaves every projection: the context's
history, the digest made at close and the memories extracted from it. What a projection has
already folded in (a summary), a closed log, or a call whose results still show cannot be
retracted, and each refusal names why."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from episodic.v1 import episode_pb2, episode_service_pb2, memory_service_pb2
from tests.e2e.context_helpers import build, create_agent
from tests.e2e.helpers import (
    Client,
    error_reason,
    expect_code,
    expect_invalid,
    tool_call_message,
    tool_result_message,
    user_message,
)
from tests.server_harness import KEY_A, RunningServer


@pytest.fixture
async def client(server: RunningServer) -> AsyncIterator[Client]:
    async with server.channel() as channel:
        yield Client.of(channel, KEY_A)


def said(role: episode_pb2.Role.ValueType, text: str) -> episode_pb2.MessageInput:
    return episode_pb2.MessageInput(role=role, content=text)


async def retract(client: Client, episode_id: str, seq: int) -> episode_pb2.Message:
    request = episode_service_pb2.RetractMessageRequest(episode_id=episode_id, seq=seq)
    return (await client.episodes.RetractMessage(request, metadata=client.auth)).message


async def test_a_retracted_message_stays_in_scrollback_and_leaves_the_context(client: Client) -> None:
    episode_id = await client.open_episode(await create_agent(client))
    await client.add(
        episode_id,
        user_message("My locker code is Zanzibar 4411."),
        said(episode_pb2.ROLE_ASSISTANT, "Noted."),
        user_message("What should I pack for Oslo?"),
    )
    assert "Zanzibar" in "".join(m.content for m in (await build(client, episode_id)).messages)

    retracted = await retract(client, episode_id, 1)
    assert retracted.seq == 1 and retracted.HasField("retract_time")
    again = await retract(client, episode_id, 1)
    assert again.retract_time == retracted.retract_time, "retracting twice changes nothing"

    log = await client.log_of(episode_id)
    assert [m.HasField("retract_time") for m in log] == [True, False, False]
    assert "Zanzibar" in log[0].content, "the log keeps what was said"
    built = await build(client, episode_id, user_message="And the weather?")
    rendered = "".join(m.content for m in built.messages)
    assert "Zanzibar" not in rendered and "Oslo" in rendered
    assert all(m.seq != 1 for m in built.messages)


async def test_the_digest_and_extracted_memories_ignore_a_retracted_message(client: Client) -> None:
    agent_id = await create_agent(client)
    episode_id = await client.open_episode(agent_id, user_id="tom")
    await client.add(
        episode_id,
        user_message("I live in Zanzibar and my favourite food is durian."),
        user_message("I work as a pilot at Lufthansa."),
    )
    await retract(client, episode_id, 1)
    digest = (await client.close_digested(episode_id)).digest
    assert digest.state == episode_pb2.DIGEST_STATE_READY
    told = " ".join([digest.summary, *digest.key_facts])
    assert "pilot" in told or "Lufthansa" in told, told
    assert "Zanzibar" not in told and "durian" not in told
    listed = await client.memories.ListMemories(
        memory_service_pb2.ListMemoriesRequest(agent_id=agent_id, user_id="tom"), metadata=client.auth
    )
    assert not any("Zanzibar" in m.text or "durian" in m.text for m in listed.memories)


async def test_a_call_is_retracted_only_after_its_results(client: Client) -> None:
    episode_id = await client.open_episode(await create_agent(client))
    await client.add(
        episode_id, user_message("Find it."), tool_call_message("call_1"), tool_result_message("call_1")
    )
    err = await expect_code(retract(client, episode_id, 2), grpc.StatusCode.FAILED_PRECONDITION)
    assert error_reason(err) == "TOOL_RESULTS_NOT_RETRACTED" and "3" in (err.details() or "")
    await retract(client, episode_id, 3)
    assert (await retract(client, episode_id, 2)).HasField("retract_time")
    rendered = (await build(client, episode_id, user_message="Well?")).messages
    assert not any(m.tool_calls or m.tool_call_id for m in rendered)


async def test_refusals_name_what_is_wrong(client: Client) -> None:
    episode_id = await client.open_episode(await create_agent(client))
    await client.add(episode_id, user_message("hello"))
    await expect_invalid(retract(client, episode_id, 0), "seq")
    await expect_invalid(retract(client, "", 1), "episode_id")
    missing = await expect_code(retract(client, episode_id, 9), grpc.StatusCode.NOT_FOUND)
    assert error_reason(missing) == "MESSAGE_NOT_FOUND"
    await expect_code(retract(client, "no-such-episode", 1), grpc.StatusCode.NOT_FOUND)
    close = episode_service_pb2.CloseEpisodeRequest(episode_id=episode_id)
    await client.episodes.CloseEpisode(close, metadata=client.auth)
    closed = await expect_code(retract(client, episode_id, 1), grpc.StatusCode.FAILED_PRECONDITION)
    assert error_reason(closed) == "EPISODE_CLOSED"
