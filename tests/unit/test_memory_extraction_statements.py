"""The extractive memory extractor's finer rules (issue 28, defect 5; issue 46): things done
without a date, what matters to the user and what helps them, habits of the past, what the user
does and is, said in the present, remarks to the listener, and the clause splits that keep each
memory one self-contained statement. Issue 46 dropped the rules that lowered precision on both
LoCoMo dev conversations (`episodic-lab eval-extraction --ablate`): answers without "I", the
join of a following "It/She ..." sentence, subjectless reports, and the feeling word list;
what they made memories of is asserted here to be none now."""

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


def test_what_matters_to_the_user_is_a_fact_even_said_of_the_thing() -> None:
    assert _said("The painting above the old fireplace is so special to me.") == [
        (MemoryKind.FACT, "The painting above the old fireplace is so special to me")
    ]


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


def test_what_a_named_thing_does_for_the_user_is_a_fact() -> None:
    assert _said("Pottery helps me switch off after long shifts at the hospital.") == [
        (MemoryKind.FACT, "Pottery helps me switch off after long shifts at the hospital")
    ]


def test_what_it_does_for_the_user_says_nothing_without_what_it_is() -> None:
    assert _said("It helps me switch off after long shifts at the hospital.") == []


def test_a_time_clause_with_its_own_subject_is_a_memory_of_its_own() -> None:
    assert _said("My grandmother was thrilled when I graduated from nursing school last spring.") == [
        (MemoryKind.FACT, "My grandmother was thrilled"),
        (MemoryKind.EVENT, "I graduated from nursing school last spring"),
    ]


def test_a_time_clause_after_for_stays_with_its_clause() -> None:
    assert _said("I'm building a reading nook for when I have kids.") == [
        (MemoryKind.FACT, "I'm building a reading nook for when I have kids")
    ]


def test_a_colon_that_only_names_the_thing_stays_in_the_memory() -> None:
    assert _said("I finally started my dream business: a small bakery.") == [
        (MemoryKind.EVENT, "I finally started my dream business: a small bakery")
    ]


@pytest.mark.parametrize(
    "text",
    [
        "I've learned that being kind to yourself matters most.",  # a maxim for the listener
        "Check out this photo I took at the lake.",  # showing, not telling
    ],
)
def test_remarks_and_requests_to_the_listener_are_not_memories(text: str) -> None:
    assert _said(text) == []


def test_a_proposal_after_a_statement_is_cut_off_it() -> None:
    assert _said("I'm moving to Lisbon in May, so let's look at flats near the river.") == [
        (MemoryKind.FACT, "I'm moving to Lisbon in May")
    ]


def test_the_same_words_unasked_are_no_memory() -> None:
    assert _said("Long walks by the river with the dog, usually after dinner.") == []


@pytest.mark.parametrize(
    ("question", "reply"),
    [
        # An offer asks for no fact about the user.
        (
            "Would you like me to summarise the article?",
            "The article covers the history of the Hanseatic trade routes.",
        ),
        # "It" only goes on about what the question named.
        (
            "How was the concert you went to?",
            "It was loud but the band played every song from their first album.",
        ),
        # Showing is no answer, after an interjection too.
        ("Do you have any pets?", "And sure, check out this photo of my parrot on the balcony."),
        # An aside in brackets (an attachment, a stage direction) is not speech.
        ("What did you get for your birthday?", "[image: a red bicycle leaning on the garden wall]"),
    ],
)
def test_replies_that_state_nothing_of_the_user_are_not_answers(question: str, reply: str) -> None:
    assert _extract((Role.ASSISTANT, question), (Role.USER, reply)) == []


def test_a_plan_without_a_date_is_a_fact() -> None:
    assert [
        (m.kind, m.text) for m in _extract((Role.USER, "I want to open a small bakery in my hometown."))
    ] == [(MemoryKind.FACT, "I want to open a small bakery in my hometown")]


@pytest.mark.parametrize(
    ("turns", "texts"),
    [
        # The feeling word list ("grateful", "excited", ...): dropped.
        ([(Role.USER, "I'm really grateful for the volunteers at the animal shelter.")], []),
        # A report without its subject: dropped.
        (
            [
                (Role.ASSISTANT, "What have you been up to?"),
                (Role.USER, "Started learning Portuguese at the community college last week."),
            ],
            [],
        ),
        # A following "She ..." sentence no longer joins the memory.
        (
            [(Role.USER, "I adopted a rescue greyhound. She loves long walks on the beach every morning.")],
            ["I adopted a rescue greyhound"],
        ),
        # An answer without "I" to a question about the user: dropped.
        (
            [
                (Role.ASSISTANT, "What do you do to unwind after work?"),
                (Role.USER, "Long walks by the river with the dog, usually after dinner."),
            ],
            [],
        ),
        (
            [
                (Role.ASSISTANT, "Have you been anywhere nice lately?"),
                (Role.USER, "Our town held a food festival last weekend."),
            ],
            [],
        ),
    ],
)
def test_the_rules_dropped_as_over_fitted_make_no_memory(
    turns: list[tuple[Role, str]], texts: list[str]
) -> None:
    assert [m.text for m in _extract(*turns)] == texts


@pytest.mark.parametrize(
    "text",
    [
        "I work from home three days a week.",
        "I mentor a transgender teen at the youth center.",
        "I'm the only admin on our account.",
        "I'm a student at the University of Leeds.",
    ],
)
def test_what_the_user_does_or_is_said_in_the_present_is_a_fact(text: str) -> None:
    [memory] = _extract((Role.USER, text))
    assert memory.kind is MemoryKind.FACT


@pytest.mark.parametrize(
    "text",
    [
        "I think I know the answer.",
        "I mean it's fine.",
        "I hope so too.",
        "I guess we'll see.",
        "I can do it.",
    ],
)
def test_talk_thought_and_modals_in_the_present_are_not_memories(text: str) -> None:
    assert _extract((Role.USER, text)) == []


def test_rules_can_be_switched_off_by_name_and_unknown_names_are_refused() -> None:
    off = ExtractiveMemoryExtractor(without=["present"])
    assert off.extract(_transcript("I work from home three days a week.")) == []
    with pytest.raises(ValueError, match="unknown extraction rules: nope"):
        ExtractiveMemoryExtractor(without=["nope"])


def _transcript(text: str) -> list[Message]:
    return [Message("ep", 1, Role.USER, text, 1, "cl100k_base", NOW)]
