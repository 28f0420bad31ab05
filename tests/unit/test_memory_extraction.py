"""The extractive memory extractor: what counts as a memory of the user, its kind, seqs, time,
names and topics, its bounds, and its precision on the hand-written labelled set (see
`episodic-lab eval-extraction`)."""

from __future__ import annotations

import json
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
from episodic.summarize.openai_chat import OpenAIChatConfig
from episodic.summarize.openai_memories import INSTRUCTIONS, OpenAiMemoryExtractor
from episodic_lab.evals.extraction import DEFAULT_DATA, evaluate, load
from tests.unit import test_summarizers
from tests.unit.test_hostile_text_is_linear import LARGE, MAX_RATIO, SMALL, fastest, of_size
from tests.unit.test_summarizers import FakeEndpoint

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


# --- the OpenAI-compatible extractor against the summarizer tests' local fake endpoint ---------


endpoint = test_summarizers.endpoint  # the fixture: a local fake chat completions endpoint


def _model(fake: FakeEndpoint) -> OpenAiMemoryExtractor:
    return OpenAiMemoryExtractor(OpenAIChatConfig(fake.base_url, "memory-mini", timeout_seconds=2.0))


def _chat() -> list[Message]:
    return _episode(
        (Role.USER, "I moved to Valencia in March."),
        (Role.ASSISTANT, "Nice! How do you like it?"),
        (Role.USER, "I love the beaches."),
    )


def test_openai_memories_are_validated_and_clamped(endpoint: FakeEndpoint) -> None:
    good = {"text": "Moved to Valencia", "kind": "event", "from_seq": 1, "to_seq": 1}
    endpoint.reply_with(
        json.dumps(
            {
                "memories": [
                    {**good, "event_time": "2024-03-01", "topics": ["travel", 3], "entities": ["Valencia"]},
                    {**good, "text": "moved to  valencia."},  # a duplicate
                    {"text": "Loves the beaches " + "x" * 400, "kind": "preference", "from_seq": 3},
                    {"text": "Unknown kind", "kind": "opinion", "from_seq": 1, "to_seq": 1},
                    {"text": "No such message", "kind": "fact", "from_seq": 1, "to_seq": 9},
                    {"text": "Backwards", "kind": "fact", "from_seq": 3, "to_seq": 1},
                    {"text": "", "kind": "fact", "from_seq": 1, "to_seq": 1},
                    "not an object",
                ]
            }
        )
    )
    extractor = _model(endpoint)
    moved, beaches = extractor.extract(_chat())
    assert (moved.kind, moved.event_time, moved.topics, moved.entities) == (
        MemoryKind.EVENT,
        datetime(2024, 3, 1, tzinfo=UTC),
        ("travel",),
        ("Valencia",),
    )
    assert (beaches.from_seq, beaches.to_seq, beaches.event_time) == (3, 3, None)
    assert len(beaches.text) <= MAX_MEMORY_CHARS
    assert extractor.last_fallback_reason is None


def test_openai_caps_memories_at_24(endpoint: FakeEndpoint) -> None:
    items = [{"text": f"Fact {n}", "kind": "fact", "from_seq": 1, "to_seq": 1} for n in range(40)]
    endpoint.reply_with(json.dumps({"memories": items}))
    assert len(_model(endpoint).extract(_chat())) == MAX_MEMORIES


def test_openai_instructions_replace_the_default_prompt(endpoint: FakeEndpoint) -> None:
    endpoint.reply_with(json.dumps({"memories": []}))
    _model(endpoint).extract(_chat(), instructions="Only remember food preferences.")
    _model(endpoint).extract(_chat())
    prompts = [body["messages"][0]["content"] for _, _, body in endpoint.requests]
    assert prompts == ["Only remember food preferences.", INSTRUCTIONS]
    assert "[3] 2024-06-10 user: I love the beaches." in endpoint.requests[0][2]["messages"][1]["content"]


@pytest.mark.parametrize(
    "content", ["not json", "[1, 2", '{"memories": "none"}', '"a string"', '```json\n{"other": []}\n```']
)
def test_openai_malformed_output_falls_back_to_extractive(endpoint: FakeEndpoint, content: str) -> None:
    endpoint.reply_with(content)
    extractor = _model(endpoint)
    assert extractor.extract(_chat()) == EXTRACTOR.extract(_chat())
    assert extractor.last_fallback_reason and extractor.fallback_count == 1


def test_openai_http_error_falls_back_to_extractive(endpoint: FakeEndpoint) -> None:
    endpoint.status = 500
    extractor = _model(endpoint)
    assert extractor.extract(_chat()) == EXTRACTOR.extract(_chat())
    assert extractor.last_fallback_reason == "ReplyError: HTTP status 500 Internal Server Error"
