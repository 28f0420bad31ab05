"""A compaction rolls the previous summary into the next one. The extractive summarizer reads
that summary's own speaker labels, so compacting again and again never nests them
("Assistant: User: ...") and each sentence keeps the speaker who said it."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from episodic.domain.context import Summary
from episodic.domain.model import Agent, Episode, EpisodeState, MemoryConfig, Message, Role
from episodic.domain.tail import Tail
from episodic.domain.working_set import WorkingSet
from episodic.service.compaction import SummaryMaker
from episodic.summarize.extractive import ExtractiveSummarizer
from episodic.tokens import TiktokenCounter

NOW = datetime(2025, 1, 1, tzinfo=UTC)
ENCODING = "cl100k_base"
TURNS = [
    (Role.USER, "I need a flight to Lisbon for the conference in March."),
    (Role.ASSISTANT, "I found three flights to Lisbon on March 3rd with TAP Portugal."),
    (Role.USER, "Please book the cheapest one and a hotel near Alfama for four nights."),
    (Role.ASSISTANT, "Booked the 9am TAP flight for 240 euros and Hotel Alfama Patio."),
]
NESTED = re.compile(r"\b(User|Assistant): (User|Assistant):")


def compacted(previous: Summary | None, round_: int) -> Summary:
    """The next four turns compacted together with the summary before them."""
    first = previous.to_seq + 1 if previous else 1
    tail = [
        Message("ep", first + i, role, f"{text} Round {round_} went well.", 20, ENCODING, NOW)
        for i, (role, text) in enumerate(TURNS)
    ]
    episode = Episode("t", "ep", "agent", "user", EpisodeState.OPEN, ENCODING, NOW, NOW)
    agent = Agent("t", "agent", "", "", "gpt-4o", ENCODING, False, MemoryConfig(), NOW, NOW)
    working_set = WorkingSet(episode, agent, previous, Tail.of(tail))
    maker = SummaryMaker(tokens=TiktokenCounter(), clock=lambda: NOW)
    return maker.make(ExtractiveSummarizer(), working_set, tail[-1].seq)


def test_compacting_three_times_never_nests_speaker_labels() -> None:
    summary = None
    for round_ in range(3):
        summary = compacted(summary, round_)
        assert not NESTED.search(summary.content), summary.content
    assert summary is not None and summary.from_seq == 1 and summary.to_seq == 12


def test_a_rolled_summary_keeps_who_said_what() -> None:
    summary = compacted(compacted(compacted(None, 0), 1), 2)
    text = summary.content.splitlines()[1]  # the summary line, under its header
    assert "User: I need a flight to Lisbon" in text
    assert "Assistant: I found three flights" in text or "Assistant: Booked the 9am TAP flight" in text
    assert "Key facts:" not in text


def test_the_key_facts_of_a_rolled_summary_are_not_read_as_a_sentence_of_the_summary() -> None:
    summary = compacted(compacted(None, 0), 1)
    assert summary.content.count("Key facts:") == 1
    assert not re.search(r"(User|Assistant): Key facts:", summary.content)
