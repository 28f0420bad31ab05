"""The extractive memory extractor's finer rules (issue 28, defect 5): things done without a
date, plans, feelings, what matters to the user, subjectless reports, habits of the past, and
the clause and sentence joins that keep each memory one self-contained statement."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from episodic.domain.memories import ExtractedMemory, MemoryKind
from episodic.domain.model import Message, Role
from episodic.summarize.memories import ExtractiveMemoryExtractor
from episodic.summarize.openai_memories import INSTRUCTIONS

NOW = datetime(2024, 6, 10, 15, 0, tzinfo=UTC)
EXTRACTOR = ExtractiveMemoryExtractor()


def _extract(*turns: tuple[Role, str]) -> list[ExtractedMemory]:
    transcript = [
        Message("ep", seq, role, text, 1, "cl100k_base", NOW + timedelta(minutes=seq))
        for seq, (role, text) in enumerate(turns, start=1)
    ]
    return EXTRACTOR.extract(transcript)


def _said(text: str) -> list[tuple[MemoryKind, str]]:
    return [(m.kind, m.text) for m in _extract((Role.USER, text))]


def test_a_thing_done_without_a_date_is_an_event_at_the_time_it_was_said() -> None:
    [memory] = _extract((Role.USER, "I repaired the old fence behind our barn."))
    assert (memory.kind, memory.text) == (MemoryKind.EVENT, "I repaired the old fence behind our barn")
    assert memory.event_time == NOW + timedelta(minutes=1)


def test_a_plan_without_a_date_is_a_fact() -> None:
    assert _said("I want to open a small bakery in my hometown.") == [
        (MemoryKind.FACT, "I want to open a small bakery in my hometown")
    ]


@pytest.mark.parametrize(
    "text",
    [
        "I'll keep pushing and working hard on the shop.",  # carrying on states nothing new
        "I think I'll just go to bed early tonight.",  # a hedged intention is a mood
        "I need a new passport photo for my visa application.",  # "need" is no past tense
        "I'm so excited.",  # a feeling about nothing named
        "Finding a good dentist is hard these days.",  # a gerund subject, not a report
    ],
)
def test_resolutions_moods_and_general_remarks_are_not_memories(text: str) -> None:
    assert _said(text) == []


def test_something_done_that_still_holds_is_a_fact() -> None:
    assert _said("I've known my neighbours for ten years.") == [
        (MemoryKind.FACT, "I've known my neighbours for ten years")
    ]


def test_how_the_user_feels_about_something_named_is_a_fact() -> None:
    assert _said("I'm really grateful for the volunteers at the animal shelter.") == [
        (MemoryKind.FACT, "I'm really grateful for the volunteers at the animal shelter")
    ]


def test_what_matters_to_the_user_is_a_fact_even_said_of_the_thing() -> None:
    assert _said("The painting above the old fireplace is so special to me.") == [
        (MemoryKind.FACT, "The painting above the old fireplace is so special to me")
    ]


def test_a_report_without_its_subject_speaks_for_the_user() -> None:
    [memory] = _extract(
        (Role.ASSISTANT, "What have you been up to?"),
        (Role.USER, "Started learning Portuguese at the community college last week."),
    )
    assert (memory.kind, memory.text) == (
        MemoryKind.EVENT,
        "Started learning Portuguese at the community college last week",
    )
    assert memory.event_time is not None and memory.event_time < NOW


def test_what_the_user_loved_doing_is_a_preference_and_used_to_do_a_fact() -> None:
    assert _said(
        "I loved hiking in the Scottish Highlands as a kid. I used to play cello in the school orchestra."
    ) == [
        (MemoryKind.PREFERENCE, "I loved hiking in the Scottish Highlands as a kid"),
        (MemoryKind.FACT, "I used to play cello in the school orchestra"),
    ]


def test_what_the_user_is_looking_into_is_a_fact() -> None:
    assert _said("I'm looking into evening classes in carpentry.") == [
        (MemoryKind.FACT, "I'm looking into evening classes in carpentry")
    ]


def test_a_comma_before_a_new_first_person_clause_splits_the_memories() -> None:
    texts = [text for _, text in _said("My flatmates are lovely, I've lived with them for three years.")]
    assert texts == ["My flatmates are lovely", "I've lived with them for three years"]


def test_a_sentence_that_goes_on_about_the_memory_joins_it() -> None:
    [memory] = _extract(
        (Role.USER, "I adopted a rescue greyhound. She loves long walks on the beach every morning.")
    )
    assert memory.text == "I adopted a rescue greyhound. She loves long walks on the beach every morning"


def test_a_sentence_that_goes_on_to_the_listener_does_not_join() -> None:
    [memory] = _extract((Role.USER, "I adopted a rescue greyhound. She would love to meet your dog someday."))
    assert memory.text == "I adopted a rescue greyhound"


def test_the_model_prompt_asks_for_the_same_first_person_grain() -> None:
    prompt = INSTRUCTIONS.casefold()
    for wanted in (
        "one short fact per clause",
        "first person",
        'never "the user"',
        "event_time",
        "relations",
    ):
        assert wanted in prompt, wanted
