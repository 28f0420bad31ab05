"""The extractive memory extractor: what counts as a memory of the user, its kind, seqs, time,
names and topics, its bounds, and its precision on the hand-written labelled set (see
`episodic-lab eval-extraction`). The OpenAI-compatible extractor against a local fake
endpoint is in tests/integration/test_memory_extraction_openai.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from episodic.domain.memories import ExtractedMemory, MemoryKind
from episodic.domain.model import Message, Role
from episodic.summarize.memories import (
    MAX_ENTITIES,
    MAX_MEMORIES,
    MAX_MEMORY_CHARS,
    MAX_TOPICS,
    ExtractiveMemoryExtractor,
    future_time,
)
from episodic_lab.evals.extraction import DEFAULT_DATA, evaluate, load
from tests.unit.test_hostile_text_is_linear import LARGE, MAX_RATIO, SMALL, fastest, of_size

# Measured 1.000 / 0.873 / 1.000 on 44 episodes (55 expected memories); the floors leave room
# for a false positive or two and a few misses, not for a regression.
MIN_PRECISION = 0.95
MIN_RECALL = 0.80
MIN_KIND_ACCURACY = 0.90

NOW = datetime(2024, 6, 10, 15, 0, tzinfo=UTC)  # a Monday
EXTRACTOR = ExtractiveMemoryExtractor()


def _episode(*turns: tuple[Role, str]) -> list[Message]:
    return [
        Message("ep", seq, role, text, 1, "cl100k_base", NOW + timedelta(minutes=seq))
        for seq, (role, text) in enumerate(turns, start=1)
    ]


def _one(text: str) -> ExtractedMemory:
    [memory] = EXTRACTOR.extract(_episode((Role.USER, text)))
    return memory


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("I love spicy Thai food.", MemoryKind.PREFERENCE),
        ("I don't eat meat.", MemoryKind.PREFERENCE),
        ("I'm allergic to peanuts.", MemoryKind.PREFERENCE),
        ("My favourite band is Radiohead.", MemoryKind.PREFERENCE),
        ("I work as a nurse at St Mary's Hospital.", MemoryKind.FACT),
        ("I live in the countryside near York.", MemoryKind.FACT),
        ("My sister lives in Oslo.", MemoryKind.FACT),
        ("I have two cats named Miso and Tofu.", MemoryKind.FACT),
        ("I ran my first half marathon yesterday.", MemoryKind.EVENT),
        ("Next week I'm starting a new job at Spotify.", MemoryKind.EVENT),
    ],
)
def test_first_person_statements_are_memories_of_their_kind(text: str, kind: MemoryKind) -> None:
    assert _one(text).kind is kind


def test_each_memory_points_at_the_message_that_states_it() -> None:
    memories = EXTRACTOR.extract(
        _episode((Role.USER, "hey"), (Role.ASSISTANT, "Hi!"), (Role.USER, "I live in Leeds with my partner."))
    )
    assert [(m.from_seq, m.to_seq) for m in memories] == [(3, 3)]


@pytest.mark.parametrize("role", [Role.ASSISTANT, Role.TOOL, Role.SYSTEM, Role.CONTEXT])
def test_only_the_user_states_memories_of_the_user(role: Role) -> None:
    said = "I am an assistant. I live in the cloud and I love helping people. I went to Paris yesterday."
    assert EXTRACTOR.extract(_episode((role, said))) == []


@pytest.mark.parametrize(
    "text",
    [
        "Do you like jazz?",
        "Did I tell you I moved to Berlin last year?",
        "If I were rich, I would buy a boat.",
        "Suppose I quit my job tomorrow, what happens to my pension?",
        "Can you find me a vegan restaurant?",
        "Please book a table for two at 7pm.",
        "I want you to write a poem about my dog.",
        "My boss said I should take a vacation.",
        "I'm so tired today.",
        "I love it.",
    ],
)
def test_questions_hypotheticals_and_requests_are_not_memories(text: str) -> None:
    assert EXTRACTOR.extract(_episode((Role.USER, text))) == []


def test_a_statement_before_a_question_is_kept_without_the_question() -> None:
    memory = _one("I'm vegetarian, can you recommend a good protein source?")
    assert (memory.kind, memory.text) == (MemoryKind.PREFERENCE, "I'm vegetarian")


def test_a_speaker_label_stays_with_the_memory_and_names_an_entity() -> None:
    memory = _one("Caroline: I moved from Sweden 4 years ago.")
    assert memory.text == "Caroline: I moved from Sweden 4 years ago"
    assert memory.entities == ("Caroline", "Sweden")


def test_names_are_capitalised_runs_and_topics_come_from_the_lexicon() -> None:
    text = "I'm a PhD student in marine biology at the University of Oslo and my sister works there."
    memory, sister = EXTRACTOR.extract(_episode((Role.USER, text)))
    assert sister.text == "My sister works there"
    assert "University of Oslo" in memory.entities and "PhD" in memory.entities
    assert memory.topics[0] == "education"
    assert len(memory.entities) <= MAX_ENTITIES and len(memory.topics) <= MAX_TOPICS


@pytest.mark.parametrize(
    ("text", "when"),
    [
        ("I ran a marathon yesterday.", datetime(2024, 6, 9, tzinfo=UTC)),
        ("I graduated from Edinburgh in 2019.", datetime(2019, 1, 1, tzinfo=UTC)),
        ("I moved to Valencia in March.", datetime(2024, 3, 1, tzinfo=UTC)),
        ("I'm flying to Berlin tomorrow for a conference.", datetime(2024, 6, 11, tzinfo=UTC)),
        ("We're going to Lisbon in August for our honeymoon.", datetime(2024, 8, 1, tzinfo=UTC)),
        ("Next week I'm starting a new job at Spotify.", datetime(2024, 6, 17, tzinfo=UTC)),
    ],
)
def test_an_event_time_is_resolved_against_the_message_time(text: str, when: datetime) -> None:
    memory = _one(text)
    assert (memory.kind, memory.event_time) == (MemoryKind.EVENT, when)


def test_an_event_time_that_does_not_resolve_is_the_message_time() -> None:
    memory = _one("I went to a poetry reading last Fri.")
    assert memory.event_time == NOW + timedelta(minutes=1)


def test_only_events_have_an_event_time() -> None:
    assert _one("I live in Denver.").event_time is None


def test_a_month_ahead_is_this_year_or_next() -> None:
    assert future_time("in May", NOW) == datetime(2025, 5, 1, tzinfo=UTC)
    assert future_time("next summer", NOW) == datetime(2025, 6, 1, tzinfo=UTC)
    assert future_time("nothing planned", NOW) is None


def test_extraction_is_deterministic_and_names_itself() -> None:
    transcript = _episode((Role.USER, "I love Thai food. I live in York. I went to Leeds yesterday."))
    assert EXTRACTOR.extract(transcript) == EXTRACTOR.extract(list(transcript))
    assert EXTRACTOR.extract(transcript, instructions="ignored") == EXTRACTOR.extract(transcript)
    assert EXTRACTOR.name == "extractive-v1"


def test_at_most_24_memories_without_duplicates_in_the_order_stated() -> None:
    turns = [(Role.USER, f"I love dish number {n}. I love dish number {n}!") for n in range(60)]
    memories = EXTRACTOR.extract(_episode(*turns))
    assert len(memories) == MAX_MEMORIES
    assert len({m.text for m in memories}) == MAX_MEMORIES
    assert [m.from_seq for m in memories] == sorted(m.from_seq for m in memories)


def test_a_memory_is_at_most_300_characters() -> None:
    long = "I love " + " and ".join(f"Cuisine{n} food" for n in range(100)) + "."
    assert len(_one(long).text) <= MAX_MEMORY_CHARS


HOSTILE = {
    "one repeated word": "banana ",
    "repeated anchors": "I my I'm we I've ",
    "a statement in every word": "I love my dog. ",
    "an unpunctuated run of statements": "I went to Paris yesterday and I love my job ",
    "a run of commas": "I'm vegan, ",
    "a naming colon in every clause": "my job: a chef ",
    "a time clause in every word": "I smiled when I ",
}
# The other speaker's message is searched for questions to the user before each reply.
ASKING = {
    "you without a question mark": "do you ",
    "a question about you in every word": "you? ",
}


@pytest.mark.parametrize("shape", HOSTILE)
def test_sixteen_times_the_text_costs_about_sixteen_times_the_time(shape: str) -> None:
    """Over many messages (each is read only up to a bounded prefix, so one big message alone
    would not show the cost of the algorithms)."""

    def run(count: int) -> object:
        return EXTRACTOR.extract(_episode(*[(Role.USER, of_size(HOSTILE[shape], SMALL))] * count))

    run(1)
    small_time = fastest(lambda _: run(1), "", 3)
    large_time = fastest(lambda _: run(LARGE // SMALL), "", 2)
    assert large_time <= MAX_RATIO * small_time, f"{shape}: {large_time / small_time:.0f}x"


@pytest.mark.parametrize("shape", ASKING)
def test_the_other_speakers_questions_cost_linear_time(shape: str) -> None:
    def run(count: int) -> object:
        exchange = [(Role.ASSISTANT, of_size(ASKING[shape], SMALL)), (Role.USER, "Long walks by the river.")]
        return EXTRACTOR.extract(_episode(*exchange * count))

    run(1)
    small_time = fastest(lambda _: run(1), "", 3)
    large_time = fastest(lambda _: run(LARGE // SMALL), "", 2)
    assert large_time <= MAX_RATIO * small_time, f"{shape}: {large_time / small_time:.0f}x"


@pytest.mark.parametrize("shape", HOSTILE)
def test_a_quarter_megabyte_message_is_read_up_to_a_bounded_prefix(shape: str) -> None:
    big = of_size(HOSTILE[shape], LARGE)
    assert EXTRACTOR.extract(_episode((Role.USER, big))) == EXTRACTOR.extract(
        _episode((Role.USER, big[: 2 * SMALL]))
    )


def test_precision_recall_and_kinds_on_the_labelled_set() -> None:
    episodes = load(DEFAULT_DATA)
    score = evaluate(episodes, EXTRACTOR)
    assert len(episodes) >= 40 and score.expected >= 50
    assert score.precision >= MIN_PRECISION, score.errors
    assert score.recall >= MIN_RECALL, score.errors
    assert score.kind_accuracy >= MIN_KIND_ACCURACY, score.errors
