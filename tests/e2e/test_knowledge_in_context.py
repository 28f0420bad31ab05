"""Caller-supplied knowledge through a live server: rendered in the "[Knowledge]" section
under the budget, and stored in the model call exactly as streamed, each item findable by the
report's span with its source id; malformed items refused naming their field."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from episodic.v1 import context_pb2, knowledge_pb2
from tests.e2e.context_helpers import build, create_agent, get_call
from tests.e2e.helpers import Client, expect_invalid
from tests.server_harness import KEY_A, RunningServer

S, K = context_pb2, knowledge_pb2
POLICY = "Employees get 25 days of paid leave a year; unused days carry over until March."
SICK = "Sick leave needs a doctor's note after three consecutive days."


@pytest.fixture
def database_url(sqlite_url: str) -> str:
    """One backend: what these tests check is the same over either store (the stores are
    held to one behaviour on both by tests/contracts and tests/integration)."""
    return sqlite_url


@pytest.fixture
async def client(server: RunningServer) -> AsyncIterator[Client]:
    async with server.channel() as channel:
        yield Client.of(channel, KEY_A)


async def test_caller_knowledge_is_rendered_and_stored_exactly_as_the_model_saw_it(client: Client) -> None:
    agent_id = await create_agent(client, system_prompt="You are the HR assistant.")
    episode_id = await client.open_episode(agent_id)
    items = [
        K.KnowledgeItem(text=SICK, source_id="hr/sick.md#2", score=0.4),
        K.KnowledgeItem(
            text=POLICY,
            source_id="hr/leave.md#1",
            title="Leave policy",
            uri="https://hr.example/leave",
            score=0.9,
            metadata={"team": "hr"},
        ),
    ]
    built = await build(
        client, episode_id, user_message="How many days of leave?", append_user_message=True, knowledge=items
    )
    sections = [m.section for m in built.messages]
    assert sections == [S.CONTEXT_SECTION_SYSTEM, S.CONTEXT_SECTION_KNOWLEDGE, S.CONTEXT_SECTION_USER_MESSAGE]
    section = built.messages[1].content
    assert "Source: Leave policy <https://hr.example/leave>" in section
    report = built.report
    assert [(k.source_id, k.origin, k.fate) for k in report.knowledge] == [
        ("hr/leave.md#1", K.KNOWLEDGE_ORIGIN_REQUEST, K.KNOWLEDGE_FATE_WHOLE),
        ("hr/sick.md#2", K.KNOWLEDGE_ORIGIN_REQUEST, K.KNOWLEDGE_FATE_WHOLE),
    ]
    assert [section[k.start_char : k.end_char] for k in report.knowledge] == [POLICY, SICK]
    assert report.section_tokens.knowledge == built.messages[1].token_count
    assert report.total_tokens <= report.budget_tokens
    stored = await get_call(client, report.model_call_id)
    assert list(stored.messages) == built.messages and stored.report == report


async def test_knowledge_that_alone_passes_the_budget_is_trimmed_and_the_rest_dropped(client: Client) -> None:
    agent_id = await create_agent(client, max_working_memory_tokens=600)
    episode_id = await client.open_episode(agent_id)
    long = " ".join(f"Clause {i} of the handbook applies to contractors." for i in range(300))
    items = [
        K.KnowledgeItem(text=long, source_id="a", score=1.0),
        K.KnowledgeItem(text=long + ".", source_id="b"),
    ]
    built = await build(client, episode_id, user_message="Contractors?", knowledge=items)
    first, second = built.report.knowledge
    assert (first.fate, second.fate) == (K.KNOWLEDGE_FATE_TRIMMED, K.KNOWLEDGE_FATE_DROPPED)
    assert long.startswith(built.messages[1].content[first.start_char : first.end_char])
    assert built.report.section_tokens.knowledge <= 600 * 25 // 100
    assert built.report.total_tokens <= 600


async def test_a_malformed_knowledge_item_is_invalid_argument_naming_it(client: Client) -> None:
    agent_id = await create_agent(client)
    episode_id = await client.open_episode(agent_id)
    items = [K.KnowledgeItem(text="fine"), K.KnowledgeItem(text="   ")]
    await expect_invalid(build(client, episode_id, user_message="hi", knowledge=items), "knowledge[1].text")
    await expect_invalid(
        build(client, episode_id, knowledge=[K.KnowledgeItem(text="x" * 70_000)]), "knowledge[0].text"
    )
