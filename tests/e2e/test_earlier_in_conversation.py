"""Recall inside the live episode, end to end: what the summary let go of comes back through
"[Earlier in this conversation]" when the turn asks about it, the report names its messages,
and the stored model call holds it exactly as streamed."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from episodic.v1 import agent_pb2, context_pb2, episode_pb2, episode_service_pb2
from tests.e2e.context_helpers import TRIP, Built, build, create_agent, get_call
from tests.e2e.helpers import Client, assert_serving
from tests.server_harness import KEY_A, RunningServer, bearer

EARLIER = context_pb2.CONTEXT_SECTION_EARLIER


@pytest.fixture
async def client(server: RunningServer) -> AsyncIterator[Client]:
    async with server.channel() as channel:
        yield Client.of(channel, KEY_A)
        await assert_serving(channel, bearer(KEY_A))


def reply(text: str) -> episode_pb2.MessageInput:
    return episode_pb2.MessageInput(role=episode_pb2.ROLE_ASSISTANT, content=text)


async def turn(client: Client, episode_id: str, said: str, answer: str) -> Built:
    built = await build(client, episode_id, user_message=said, append_user_message=True)
    await client.add(episode_id, reply(answer))
    return built


async def talk_about_the_trip(client: Client, episode_id: str, turns: int = 30) -> None:
    for i in range(turns):
        said, answer = TRIP[i % len(TRIP)]
        await turn(client, episode_id, said, answer)


def earlier_text(built: Built) -> str:
    return "".join(m.content for m in built.messages if m.section == EARLIER)


async def test_the_cat_named_before_thirty_turns_about_a_trip_comes_back_when_the_cat_comes_up(
    client: Client,
) -> None:
    agent_id = await create_agent(client, max_working_memory_tokens=250)
    episode_id = await client.open_episode(agent_id)
    first = await turn(client, episode_id, "My cat is called Zanzibar.", "What a grand name for a cat!")
    named_at = first.report.user_message_seq
    await talk_about_the_trip(client, episode_id)

    built = await build(client, episode_id, user_message="Who will look after my cat while I'm away?")
    report = built.report
    assert report.summary_to_seq >= named_at + 1  # compacted: the tail no longer holds it
    assert "Zanzibar" in earlier_text(built)
    assert report.total_tokens <= report.budget_tokens
    rendered = [p for p in report.earlier_passages if p.fate != context_pb2.PASSAGE_FATE_DROPPED]
    assert any(named_at in p.seqs for p in rendered)
    assert report.section_tokens.earlier == sum(m.token_count for m in built.messages if m.section == EARLIER)
    stored = await get_call(client, report.model_call_id)
    assert list(stored.messages) == built.messages and stored.report == report


async def test_a_turn_about_something_never_said_renders_no_earlier_passage(client: Client) -> None:
    agent_id = await create_agent(client, max_working_memory_tokens=250)
    episode_id = await client.open_episode(agent_id)
    await turn(client, episode_id, "My cat is called Zanzibar.", "What a grand name for a cat!")
    await talk_about_the_trip(client, episode_id, 12)
    built = await build(client, episode_id, user_message="ok")  # nothing to match
    assert earlier_text(built) == "" and not built.report.earlier_passages


async def test_an_agent_with_no_share_for_it_renders_no_earlier_section(client: Client) -> None:
    agent_id = await create_agent(client, max_working_memory_tokens=250, earlier_budget_percent=0)
    episode_id = await client.open_episode(agent_id)
    await turn(client, episode_id, "My cat is called Zanzibar.", "What a grand name for a cat!")
    await talk_about_the_trip(client, episode_id, 12)
    built = await build(client, episode_id, user_message="Who will look after my cat?")
    assert earlier_text(built) == ""
    share = agent_pb2.MemoryConfig(earlier_budget_percent=40)  # overridable per request, as the others
    again = await build(client, episode_id, user_message="Who will look after my cat?", memory_config=share)
    assert "Zanzibar" in earlier_text(again)


async def test_a_retracted_message_never_comes_back_through_earlier_passages(client: Client) -> None:
    agent_id = await create_agent(client, max_working_memory_tokens=250)
    episode_id = await client.open_episode(agent_id)
    said = await turn(client, episode_id, "My door code for the cat sitter is 4711.", "Noted.")
    retract = episode_service_pb2.RetractMessageRequest(
        episode_id=episode_id, seq=said.report.user_message_seq
    )
    await client.episodes.RetractMessage(retract, metadata=client.auth)
    await talk_about_the_trip(client, episode_id)
    built = await build(client, episode_id, user_message="What is the door code for the cat sitter?")
    assert all("4711" not in m.content for m in built.messages)
