"""What "[Known Facts]" renders, on the real stores (SQLite or PostgreSQL, the FAISS index, the
hashing embedder): a standing fact reaches a turn that shares no word with it, and the same
fact written in the first and the third person is rendered once."""

from __future__ import annotations

from episodic.domain.memories import MemoryKind
from episodic.domain.memory_rules import CreateRequest, MemoryDraft
from episodic.domain.model import Role
from episodic.service.context import ContextRequest
from tests.integration.conftest import Stack


async def remember(stack: Stack, agent_id: str, *drafts: tuple[str, MemoryKind]) -> None:
    request = CreateRequest([MemoryDraft(text=t, kind=k) for t, k in drafts], agent_id, "alice")
    await stack.services.memories.create(stack.caller, request)


async def rendered_facts(stack: Stack, agent_id: str, question: str) -> list[str]:
    episode, _ = await stack.services.episodes.open_episode(stack.caller, agent_id=agent_id, user_id="alice")
    call, _ = await stack.services.context.build(
        stack.caller, ContextRequest(episode.episode_id, user_message=question)
    )
    sections = [m.content for m in call.messages if m.role is Role.CONTEXT and "[Known Facts]" in m.content]
    return [line for text in sections for line in text.splitlines() if line.startswith("- (")]


async def test_what_to_cook_renders_the_dietary_fact_once(stack: Stack) -> None:
    agent_id = await stack.new_agent()
    await remember(
        stack,
        agent_id,
        ("Alice is vegetarian", MemoryKind.FACT),
        ("I'm vegetarian", MemoryKind.PREFERENCE),  # another kind: both are stored
        ("Alice ran the Lisbon marathon", MemoryKind.EVENT),
    )
    lines = await rendered_facts(stack, agent_id, "What should I cook for dinner tonight?")
    assert len([line for line in lines if "vegetarian" in line]) == 1  # either, not both
    assert lines[-1] == "- (event) Alice ran the Lisbon marathon"  # facts before events
