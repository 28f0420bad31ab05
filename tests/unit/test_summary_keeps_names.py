"""The rolling summary keeps the named things the user states (names, numbers, dates)
through compaction after compaction: a long stretch about something else does not push out
"My cat is called Zanzibar". Compacted as BuildContext does it: the oldest messages each time
the tail passes its allowance, the previous summary rolled in (`covered_transcript`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from episodic.domain.assembly import KEEP_AFTER_COMPACTION
from episodic.domain.context import Summary
from episodic.domain.model import Agent, Episode, EpisodeState, MemoryConfig, Message, Role
from episodic.domain.reducers import MESSAGE_OVERHEAD
from episodic.domain.tail import Tail
from episodic.domain.working_set import WorkingSet
from episodic.service.compaction import SummaryMaker
from episodic.summarize.extractive import ExtractiveSummarizer
from episodic.summarize.named import MAX_NAMED, named_things
from episodic.tokens import TiktokenCounter

NOW = datetime(2025, 1, 1, tzinfo=UTC)
ENCODING = "cl100k_base"
TOKENS = TiktokenCounter()
ALLOWANCE = 100  # tokens of tail: a compaction every few turns
TRIP = [
    ("I'm planning a trip to Lisbon next month with my partner.", "Lisbon is lovely in spring."),
    (
        "We want to stay somewhere central with good restaurants nearby.",
        "Staying central makes it easy to walk to the restaurants, viewpoints and tram stops.",
    ),
    (
        "What neighbourhoods would you recommend for a first visit?",
        "For a first visit, the historic neighbourhoods near the river are the most convenient.",
    ),
    (
        "I think we'd like to see the old town and the castle.",
        "The castle and the old town are close together, so you can see both in one day.",
    ),
    (
        "How many days do you think we need for the city itself?",
        "Three or four days are enough for the city, with one more for a day trip.",
    ),
    (
        "We also want to take a day trip to Sintra if there is time.",
        "A day trip to Sintra works well; leave early to avoid the crowds at the palaces.",
    ),
    (
        "Is the train to Sintra easy to use with luggage?",
        "The train to Sintra leaves from the central station and is easy even with bags.",
    ),
    (
        "My partner loves seafood, so we want to try the local fish restaurants.",
        "The fish restaurants near the river serve grilled sardines and seafood rice.",
    ),
    (
        "What should we pack for the weather in spring?",
        "Pack layers and a light rain jacket; spring evenings can be cool by the river.",
    ),
    (
        "I'd like to book a fado evening one night as well.",
        "Fado houses in the old town offer dinner shows most evenings of the week.",
    ),
    (
        "Can you suggest a budget for meals and transport per day?",
        "A moderate daily budget covers meals, museums and public transport comfortably.",
    ),
    (
        "We are thinking of renting an apartment instead of a hotel.",
        "An apartment gives you a kitchen and more space, which helps on longer stays.",
    ),
    (
        "What is the best way to get from the airport to the centre?",
        "The metro runs from the airport to the centre in about twenty minutes.",
    ),
    (
        "I want to visit the tile museum and the monastery in Belem.",
        "The tile museum and the monastery are both worth a morning each.",
    ),
    (
        "Should we buy a transport card for the trams and the metro?",
        "A rechargeable transport card covers trams, buses and the metro in the city.",
    ),
]

# The same trip, the user naming something new in every turn: dates, prices, places, people.
BUSY_TRIP = [
    (question, answer)
    for question, (_, answer) in zip(
        [
            "I'm planning a trip to Lisbon in May with my partner Sam.",
            "We fly out on Friday 12 May and come back on the 19th.",
            "Our hotel is the Memmo Alfama and it costs 180 euros a night.",
            "I'd like to see the Castelo de Sao Jorge on the first day.",
            "We also want to take the train to Sintra on Tuesday.",
            "My partner wants to try the pasteis at Belem.",
            "We booked a fado dinner at Clube de Fado for Wednesday at 8pm.",
            "Our budget for food is about 60 euros a day.",
            "We want to ride Tram 28 through the old town.",
            "I'd like to visit the Gulbenkian museum on Thursday.",
            "My friend Joana recommended the LX Factory market.",
            "We might take a day trip to Cascais on Saturday.",
            "I need a transport card for 7 days.",
            "The flight leaves Gatwick at 6:45 in the morning.",
            "We land in Lisbon at 9:30 local time.",
        ],
        TRIP,
        strict=True,
    )
]


def messages(turns: Sequence[tuple[Role, str]]) -> list[Message]:
    return [
        Message("ep", seq, role, text, TOKENS.count(text, ENCODING), ENCODING, NOW)
        for seq, (role, text) in enumerate(turns, start=1)
    ]


def trip_after(
    first: str, user: str = "", assistant: str = "", trip: Sequence[tuple[str, str]] = TRIP
) -> list[Message]:
    """`first` said by the user, then 30 turns about a trip to Lisbon; `user` and
    `assistant` label every line ("Maya: ..."), as LoCoMo-style transcripts do."""
    said = [(Role.USER, first)]
    for question, answer in trip:
        said += [(Role.USER, question), (Role.ASSISTANT, answer)]
    labels = {Role.USER: user, Role.ASSISTANT: assistant}
    return messages([(role, f"{labels[role]}: {text}" if labels[role] else text) for role, text in said])


def compacted(transcript: Sequence[Message], summarizer: ExtractiveSummarizer) -> list[Summary]:
    """Every summary made while the messages arrive one by one: each time the tail passes
    ALLOWANCE, the oldest are summarized so that the rest fits in KEEP_AFTER_COMPACTION of it."""
    episode = Episode("t", "ep", "agent", "user", EpisodeState.OPEN, ENCODING, NOW, NOW)
    agent = Agent("t", "agent", "", "", "gpt-4o", ENCODING, False, MemoryConfig(), NOW, NOW)
    maker = SummaryMaker(tokens=TOKENS, clock=lambda: NOW)
    summaries: list[Summary] = []
    tail: list[Message] = []
    for message in transcript:
        tail.append(message)
        costs = [m.token_count + MESSAGE_OVERHEAD for m in tail]
        if sum(costs) <= ALLOWANCE:
            continue
        room, kept = int(ALLOWANCE * KEEP_AFTER_COMPACTION), 0
        while kept < len(costs) and costs[-1 - kept] <= room:
            room -= costs[-1 - kept]
            kept += 1
        kept = max(kept, 1)
        if kept < len(tail):
            through = tail[-kept - 1].seq
            previous = summaries[-1] if summaries else None
            working_set = WorkingSet(episode, agent, previous, Tail.of(tail))
            summaries.append(maker.make(summarizer, working_set, through))
            tail = tail[-kept:]
    return summaries


@pytest.mark.parametrize("trip", [TRIP, BUSY_TRIP], ids=["trip", "busy trip"])
def test_the_name_of_the_users_cat_survives_thirty_turns_about_a_trip(trip: list[tuple[str, str]]) -> None:
    summaries = compacted(trip_after("My cat is called Zanzibar.", trip=trip), ExtractiveSummarizer())
    assert len(summaries) >= 5  # compacted again and again, each rolling in the one before
    assert "Zanzibar" in summaries[-1].content
    assert summaries[-1].to_seq > 20


@pytest.mark.parametrize("trip", [TRIP, BUSY_TRIP], ids=["trip", "busy trip"])
@pytest.mark.parametrize(
    ("first", "named"),
    [
        ("My flat is number 42.", "42"),
        ("My locker code is 4417.", "4417"),
        ("Our wedding anniversary is on 9 October.", "9 October"),
        ("The boiler was serviced on 12 March.", "12 March"),
        ("My sister Priya lives in Porto.", "Priya"),
    ],
)
def test_a_number_a_date_and_a_name_survive_the_same_way(
    first: str, named: str, trip: list[tuple[str, str]]
) -> None:
    summaries = compacted(trip_after(first, trip=trip), ExtractiveSummarizer())
    assert len(summaries) >= 5
    assert named in summaries[-1].content


def test_labelled_speakers_keep_the_first_speakers_named_things() -> None:
    """LoCoMo-style lines: the user's label marks their sentences in the rolled summary too."""
    transcript = trip_after("My dog is named Biscuit.", user="Maya", assistant="Tom")
    final = compacted(transcript, ExtractiveSummarizer())[-1].content
    assert "Biscuit" in final
    assert "Maya: Maya:" not in final and "Tom: Maya:" not in final


def test_the_summary_stays_within_its_caps_while_it_keeps_names() -> None:
    summarizer = ExtractiveSummarizer()
    for summary in compacted(trip_after("My cat is called Zanzibar."), summarizer):
        text, _, facts = summary.content.partition("\nKey facts: ")
        assert len(text.splitlines()[-1]) <= summarizer.max_summary_chars
        assert len(facts) <= summarizer.max_facts * (summarizer.max_fact_chars + 2)


def test_named_things_are_names_numbers_and_dates_past_the_first_word() -> None:
    assert named_things("Yesterday I met Joana at the LX Factory in Lisbon.") == (
        "joana",
        "lx",
        "factory",
        "lisbon",
    )
    assert named_things("We have a dog called biscuit and 2 cats.") == ("biscuit", "2")
    assert named_things("Tuesday works, or 7:30 on the 9th of October.") == (
        "tuesday",
        "7:30",
        "9",
        "october",
    )
    # "May" starting a sentence is the verb; capitals for emphasis and "I" name nothing
    assert named_things("May I say it was JUST great? I loved it.") == ()
    # who speaks is not a thing said, nor is a name they start ("Mel")
    assert named_things("Thanks Mel, and say hi to Melanie and Oscar!", {"melanie"}) == ("oscar",)


def test_a_hostile_page_of_capitalised_words_stays_bounded() -> None:
    page = " ".join(f"Alpha{i} Bravo Charlie" for i in range(6000))[:100_000]
    assert len(page) == 100_000
    assert len(named_things(page)) == MAX_NAMED
    summarizer = ExtractiveSummarizer()
    digest = summarizer.summarize(messages([(Role.USER, page), (Role.ASSISTANT, page)]))
    assert 0 < len(digest.summary) <= summarizer.max_summary_chars
    assert len(digest.summary.split()) <= summarizer.max_summary_words
    assert len(digest.key_facts) <= summarizer.max_facts
    assert all(len(fact) <= summarizer.max_fact_chars for fact in digest.key_facts)


def test_a_hostile_page_rolled_again_and_again_stays_bounded() -> None:
    page = " ".join(f"Zulu{i} Yankee X-Ray {i}" for i in range(5000))[:100_000]
    summarizer = ExtractiveSummarizer()
    transcript = messages([(Role.USER, page), (Role.ASSISTANT, "Noted."), (Role.USER, page)] * 3)
    summaries = compacted(transcript, summarizer)
    assert summaries
    limit = summarizer.max_summary_chars + summarizer.max_facts * (summarizer.max_fact_chars + 2) + 64
    assert all(len(summary.content) <= limit for summary in summaries)


def test_a_digest_is_summarized_as_before() -> None:
    """Without a previous summary in it (a closed episode's digest, which recall searches)
    the transcript is summarized exactly as without keeping named things."""
    transcript = trip_after("My cat is called Zanzibar.", trip=BUSY_TRIP)
    assert ExtractiveSummarizer().summarize(transcript) == ExtractiveSummarizer(keep_named=False).summarize(
        transcript
    )
