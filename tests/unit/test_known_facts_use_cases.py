"""What "[Known Facts]" renders through BuildContext over the fakes, with the real extractor:
a turn that shares no word with a standing fact still sees it, and the same fact written by
the client and extracted from the user's words is rendered once, the client's words first."""

from __future__ import annotations

import pytest

from episodic.domain.memories import MemoryKind
from episodic.domain.memory_rules import CreateRequest, MemoryDraft
from episodic.domain.model import Role
from episodic.service.context import ContextRequest
from tests.unit.use_cases import CALLER, UseCases, use_cases


@pytest.fixture
async def uc() -> UseCases:
    cases = use_cases()
    await cases.new_agent()
    return cases


async def remember(uc: UseCases, text: str, kind: MemoryKind = MemoryKind.FACT) -> None:
    await uc.memories.create(CALLER, CreateRequest([MemoryDraft(text=text, kind=kind)], "helper", "alice"))


async def rendered_facts(uc: UseCases, question: str) -> list[str]:
    episode = await uc.open(user_id="alice")
    call, _ = await uc.context.build(CALLER, ContextRequest(episode, user_message=question))
    facts = [
        m.content for m in call.messages if m.role is Role.CONTEXT and m.content.startswith("[Known Facts]")
    ]
    return [line for text in facts for line in text.splitlines() if line.startswith("- (")]


async def test_a_turn_without_a_matching_word_still_sees_the_users_standing_facts(uc: UseCases) -> None:
    await remember(uc, "Alice is vegetarian")
    await remember(uc, "Alice ran the Lisbon marathon", MemoryKind.EVENT)
    lines = await rendered_facts(uc, "What should I cook for dinner tonight?")
    assert lines[0] == "- (fact) Alice is vegetarian"


async def test_the_same_fact_in_first_and_third_person_is_rendered_once_in_the_clients_words(
    uc: UseCases,
) -> None:
    await remember(uc, "Alice is vegetarian")
    await uc.remembered("ep-diet", "I'm vegetarian.", "Noted!", user_id="alice")
    for question in ("is Alice vegetarian?", "What should I cook for dinner tonight?"):
        lines = await rendered_facts(uc, question)
        assert [line for line in lines if "vegetarian" in line] == ["- (fact) Alice is vegetarian"], question


async def test_an_extracted_sentence_that_says_more_comes_after_the_clients_fact(uc: UseCases) -> None:
    await remember(uc, "Alice is vegetarian")
    await uc.remembered(
        "ep-trip", "I'm vegetarian and I want to visit Lisbon in May.", "Nice!", user_id="alice"
    )
    lines = await rendered_facts(uc, "I'm going to Lisbon in May, any restaurant tips?")
    assert lines[0] == "- (fact) Alice is vegetarian"
    assert any("Lisbon" in line for line in lines[1:])
