"""Recall inside the live episode, pure: the compacted log's ranking, its bound, its vectors,
and the "[Earlier in this conversation]" block fitted under its allowance."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import numpy as np

from episodic.domain.context import PassageFate
from episodic.domain.earlier import HELD_CHARS, MAX_BYTES, MAX_MESSAGES, CompactedLog
from episodic.domain.earlier_block import EARLIER_HEADER, EarlierFound, earlier_block
from episodic.domain.known_facts import KnownFact, pending_for_turn
from episodic.domain.model import Message, Role

START = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def said(seq: int, text: str, role: Role = Role.USER) -> Message:
    return Message("ep", seq, role, text, 5, "", START + timedelta(minutes=seq))


def chat(*texts: str) -> list[Message]:
    return [said(i, t, Role.USER if i % 2 else Role.ASSISTANT) for i, t in enumerate(texts, start=1)]


def words_count(text: str) -> int:
    return len(text.split())


LOG = chat(
    "We fly to Lisbon on Friday.",
    "Lovely, Lisbon is mild in spring.",
    "My cat is called Zanzibar.",
    "What a grand name for a cat!",
    "We booked a hotel in Alfama.",
    "Alfama is hilly, pack good shoes.",
)


def test_the_message_sharing_the_query_words_ranks_first_and_comes_with_its_neighbours() -> None:
    log = CompactedLog.of(LOG)
    found = EarlierFound(log, log.ranked("who feeds my cat?", None))
    assert found.candidates and found.candidates[0].position in (2, 3)
    message, passages = earlier_block(found, 200, words_count)
    assert message is not None and message.content.startswith(EARLIER_HEADER)
    assert "Zanzibar" in message.content and "[Monday 8 May 2023, 13:5" in message.content
    assert passages[0].fate is PassageFate.WHOLE and 3 in passages[0].seqs


def test_the_section_s_lines_and_text_are_counted_apart_from_recurring_texts_each_line_once() -> None:
    log = CompactedLog.of(LOG)
    once: list[str] = []
    recurring: list[str] = []

    def count_once(text: str) -> int:
        once.append(text)
        return words_count(text)

    def count(text: str) -> int:
        recurring.append(text)
        return words_count(text)

    found = EarlierFound(log, log.ranked("who feeds my cat?", None), count_once)
    message, _ = earlier_block(found, 200, count)
    again, _ = earlier_block(found, 200, count)
    assert message is not None and again == message
    shown = message.content.removeprefix(EARLIER_HEADER).split("\n")
    assert set(shown) <= set(once) and len(once) == len(set(once)) + 1  # the section's text: each turn
    assert message.content in once and not set(once) & set(recurring) and EARLIER_HEADER in recurring


def test_nothing_matching_renders_nothing_and_a_tight_allowance_drops_what_does_not_fit() -> None:
    log = CompactedLog.of(LOG)
    assert log.ranked("quantum chromodynamics", None) == []
    found = EarlierFound(log, log.ranked("cat", None))
    message, passages = earlier_block(found, 10, words_count)
    assert message is None and all(p.fate is PassageFate.DROPPED for p in passages)


def test_tool_messages_and_retracted_ones_are_never_held() -> None:
    retracted = Message("ep", 7, Role.USER, "my pin is 4711", 3, "", START, retracted_at=START)
    tool = Message("ep", 8, Role.TOOL, "pin 4711", 3, "", START)
    log = CompactedLog.of([*LOG, retracted, tool])
    assert log.last_seq == 6 and log.ranked("pin 4711", None) == []


def test_the_log_is_bounded_and_keeps_the_newest() -> None:
    log = CompactedLog.of([said(i, f"message number {i}") for i in range(1, MAX_MESSAGES + 2)])
    assert len(log) <= MAX_MESSAGES and log.last_seq == MAX_MESSAGES + 1
    assert log.messages[0].seq > 1 and log.dropped == MAX_MESSAGES + 1 - len(log)


def test_vectors_rank_by_meaning_and_a_stale_batch_is_ignored() -> None:
    log = CompactedLog.of(LOG)
    start, texts = log.unembedded(32)
    assert start == 0 and len(texts) == len(LOG)
    vectors = np.eye(len(LOG), 8)
    log.add_vectors(start + 1, vectors)  # does not follow what is held: ignored
    assert log.embedded == 0
    log.add_vectors(start, vectors)
    assert log.embedded == len(LOG)
    found = log.ranked("unmatched words here", vectors[4])
    assert found[0].position == 4


def test_pending_memories_extracted_live_are_ranked_for_the_turn_and_capped() -> None:
    def fact(i: int, text: str, *, client: bool = False) -> KnownFact:
        return KnownFact(f"m{i}", text, "fact", 1.0, pending=True, client=client)

    held = [fact(1, "I am going to Lisbon"), fact(2, "My cat is called Zanzibar"), fact(3, "I like tea")]
    held.append(fact(4, "Call me Al", client=True))
    kept = pending_for_turn(held, "who looks after my cat?", 1)
    assert [f.memory_id for f in kept] == ["m2", "m4"]  # the client's own stay, whatever the match


def test_huge_messages_are_held_clipped_and_the_log_stays_within_its_bytes() -> None:
    log = CompactedLog.of([said(i, "word " * 50_000) for i in range(1, 400)])
    assert all(len(m.content) <= HELD_CHARS for m in log.messages)
    assert log.size() <= MAX_BYTES + (MAX_BYTES // 4)


def test_a_dropped_passage_lists_only_messages_the_rendered_ones_do_not_hold() -> None:
    log = CompactedLog.of(LOG)
    found = EarlierFound(log, log.ranked("cat name hotel Alfama shoes", None))
    for allowance in range(20, 80, 3):
        _, passages = earlier_block(found, allowance, words_count)
        shown = {s for p in passages if p.fate is not PassageFate.DROPPED for s in p.seqs}
        dropped = [p for p in passages if p.fate is PassageFate.DROPPED]
        assert all(p.seqs and not shown & set(p.seqs) for p in dropped), (allowance, passages)


def test_held_messages_come_back_as_they_were_taken_across_partly_filled_blocks() -> None:
    zones = (UTC, timezone(timedelta(hours=-5)), None)
    taken = [
        Message("ep", i, Role.USER if i % 3 else Role.ASSISTANT, f"Caroline: say {i} — café " * (i % 4), i,
                "o200k_base" if i % 5 else "cl100k_base",
                datetime(2023, 5, 8, 13, 56, 7, i, tzinfo=zones[i % 3]) + timedelta(hours=i))
        for i in range(1, 24)
    ]  # fmt: skip
    log = CompactedLog()
    for batch in (taken[:1], taken[1:6], taken[6:7], taken[7:]):  # blocks left short, then filled
        log.extend(batch)
    assert log.messages == taken
    assert [log.text(i) for i in range(len(log))] == [m.content for m in taken]


def test_a_log_over_its_bound_keeps_the_newest_messages_whole() -> None:
    taken = [said(i, f"message {i} " + "and more " * (i % 7)) for i in range(1, MAX_MESSAGES + 40)]
    log = CompactedLog()
    for at in range(0, len(taken), 33):
        log.extend(taken[at : at + 33])
    assert log.messages == taken[-len(log) :]
    assert log.postings(f"{taken[-1].seq}")[0].tolist() == [len(log) - 1]
