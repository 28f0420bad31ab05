"""Recall and BuildContext on hostile but valid input, against a live server on SQLite and
PostgreSQL: one-word, foreign-script, punctuation-only and 10k-character queries, episodes
holding only tool messages or one token repeated, and top_k beyond the user's episodes. Each
answers OK with what the user owns; none answers INTERNAL or runs unbounded (the linear-time
properties are measured in tests/unit/test_excerpts.py and test_passages.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from episodic_client import AsyncEpisodicClient, message_input
from episodic_client.v1 import agent_pb2, context_pb2, episode_pb2
from tests.conftest import unique
from tests.e2e.helpers import DIGEST_SETTLE_SECONDS
from tests.polling import eventually
from tests.server_harness import KEY_A, RunningServer

PAST = context_pb2.CONTEXT_SECTION_PAST_CONVERSATIONS
# Weeks ago, within the default 90-day retention: a fixed date had fallen past it, and the
# server's retention sweep (its first one runs at start, when leadership is taken) could
# soft-delete the conversations while the test read them.
DAY0 = (datetime.now(UTC) - timedelta(days=30)).replace(hour=9, minute=0, second=0, microsecond=0)
CONVERSATIONS = [
    ["I booked a flight to Lisbon for the conference", "Great, the conference is in May"],
    ["My cat Miso needs a vet appointment", "The vet is open on Saturday mornings"],
]
HYBRID = agent_pb2.MemoryConfig(recall_mode=agent_pb2.RECALL_MODE_HYBRID, recall_top_k=5)
QUERIES = [
    "Lisbon",
    "vet",
    "猫のミソは獣医に行きましたか",
    "هل ذهبت القطة إلى الطبيب البيطري؟",
    "🐱🛫",
    "?!…",
    "Miso " + "x" * 9_994,
    ("what about the vet appointment " * 400)[:10_000],
    "what did we talk about last week, in May, 3 days ago, in 2026?",
]


def tool_call(call_id: str) -> episode_pb2.MessageInput:
    call = episode_pb2.ToolCall(tool_call_id=call_id, tool_name="search")
    return message_input("assistant", tool_calls=[call])


def tool_result(call_id: str) -> episode_pb2.MessageInput:
    result = episode_pb2.ToolResult(tool_call_id=call_id, succeeded=True)
    result.output.string_value = "spam result 42"
    return message_input("tool", tool_result=result)


async def digested(client: AsyncEpisodicClient, episode_id: str) -> None:
    """Waits on the digest's state (not on CloseEpisode's deadline) and checks it is READY."""
    settled = (episode_pb2.DIGEST_STATE_READY, episode_pb2.DIGEST_STATE_FAILED)

    async def done() -> bool:
        return (await client.get_episode(episode_id)).episode.digest.state in settled

    await eventually(done, DIGEST_SETTLE_SECONDS)
    digest = (await client.get_episode(episode_id)).episode.digest
    assert digest.state == episode_pb2.DIGEST_STATE_READY, digest


async def past(client: AsyncEpisodicClient, agent_id: str, user: str, lines: list[str], day: datetime) -> str:
    opened = await client.open_episode(agent_id, user, start_time=day)
    episode_id = opened.episode.episode_id
    roles = ["user", "assistant"]
    await client.add_messages(episode_id, [message_input(roles[i % 2], t) for i, t in enumerate(lines)])
    await client.close_episode(episode_id, end_time=day + timedelta(hours=1))
    await digested(client, episode_id)
    return episode_id


async def remembered(client: AsyncEpisodicClient) -> tuple[str, str, list[str]]:
    agent_id, user = unique("agent"), unique("user")
    await client.create_agent(agent_id, model="gpt-4o", memory_config=HYBRID)
    ids = [
        await past(client, agent_id, user, c, DAY0 + timedelta(days=i)) for i, c in enumerate(CONVERSATIONS)
    ]
    return agent_id, user, ids


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: f"{len(q)}-chars-{q[:12]}")
async def test_any_query_finds_only_the_users_own_episodes(server: RunningServer, query: str) -> None:
    async with AsyncEpisodicClient(server.address, api_key=KEY_A, timeout=20.0) as client:
        agent_id, user, ids = await remembered(client)
        for mode in ("semantic", "hybrid"):
            found = await client.search_episodes(agent_id, user, query, mode=mode, top_k=100)
            assert {s.episode_id for s in found.snippets} <= set(ids)
        probe = (await client.open_episode(agent_id, user)).episode.episode_id
        built = await client.build_context(probe, user_message=query)
    recalled = {r.episode_id for r in built.report.recalled_episodes}
    assert recalled <= set(ids)


async def test_top_k_beyond_the_users_episodes_returns_each_once(server: RunningServer) -> None:
    async with AsyncEpisodicClient(server.address, api_key=KEY_A, timeout=20.0) as client:
        agent_id, user, ids = await remembered(client)
        for mode in ("recency", "semantic", "hybrid"):
            found = await client.search_episodes(agent_id, user, "the vet in Lisbon", mode=mode, top_k=100)
            assert sorted(s.episode_id for s in found.snippets) == sorted(ids), mode


async def test_episodes_of_tool_messages_or_one_repeated_token_are_recalled_without_harm(
    server: RunningServer,
) -> None:
    repeated = ("spam " * 60_000)[:250_000]  # one token, the most a message may hold
    async with AsyncEpisodicClient(server.address, api_key=KEY_A, timeout=60.0) as client:
        agent_id, user, _ids = await remembered(client)
        tools = await client.open_episode(agent_id, user, start_time=DAY0 + timedelta(days=5))
        tools_id = tools.episode.episode_id
        await client.add_messages(tools_id, [tool_call("c1"), tool_result("c1")])
        await client.close_episode(tools_id, end_time=DAY0 + timedelta(days=5, hours=1))
        await digested(client, tools_id)
        spam_id = await past(client, agent_id, user, [repeated, repeated], DAY0 + timedelta(days=6))
        found = await client.search_episodes(agent_id, user, "spam", mode="hybrid", top_k=10)
        assert found.snippets[0].episode_id == spam_id
        probe = (await client.open_episode(agent_id, user)).episode.episode_id
        built = await client.build_context(probe, user_message="spam spam spam?")
    rendered = {r.episode_id for r in built.report.recalled_episodes if r.rendered}
    assert spam_id in rendered
    text = "\n".join(m.content for m in built.messages if m.section == PAST)
    assert len(text) < 20_000  # an excerpt is clipped, however long its message
    assert built.report.section_tokens.past_conversations <= built.report.budget_tokens // 2
