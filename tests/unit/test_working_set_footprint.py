"""The working set's footprint, computed (never RSS): each message's text held once, the fields
every message of a log repeats shared, the compacted log's postings flat, the estimate the
cache evicts by covering what a set holds, and the cache evicting to its bound."""

from __future__ import annotations

import dataclasses
import sys
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest

from episodic.domain.context import Summary
from episodic.domain.earlier import MARK, MAX_MESSAGES, CompactedLog
from episodic.domain.model import (
    NO_METADATA,
    Agent,
    Episode,
    EpisodeState,
    MemoryConfig,
    Message,
    Role,
    ToolCall,
    ToolResult,
)
from episodic.domain.ports.episodes import ContextSources
from episodic.domain.reducers import history_views
from episodic.domain.tail import Tail
from episodic.domain.working_set import WorkingSet
from episodic.state.working_set import WorkingSetCache

START = datetime(2026, 3, 1, tzinfo=UTC)
EPISODE_ID = "ep-0123456789abcdef0123456789abcdef"


def agent() -> Agent:
    return Agent("t", "a", "", "", "gpt-4o", "o200k_base", False, MemoryConfig(), START, START)


def episode(episode_id: str = EPISODE_ID) -> Episode:
    return Episode("t", episode_id, "a", "u", EpisodeState.OPEN, "o200k_base", START, START)


def as_read(seq: int, words: int = 150) -> Message:
    """A message as a row read from SQL makes it: its own copies of the episode id and the
    encoding, and a new empty metadata dict."""
    text = " ".join(f"word{(seq * 7 + i) % 500}" for i in range(words))
    role = Role.USER if seq % 2 else Role.ASSISTANT
    return Message(
        "".join(EPISODE_ID), seq, role, text, words, "".join("o200k_base"), START + timedelta(seconds=seq),
        metadata={},
    )  # fmt: skip


def sources(messages: list[Message], summary: Summary | None = None) -> ContextSources:
    return ContextSources(episode(), agent(), summary, messages)


def held(count: int) -> WorkingSet:
    return WorkingSet.of(sources([as_read(seq) for seq in range(1, count + 1)]))


def test_a_held_message_is_columns_beside_its_text_and_reads_back_as_the_message_read() -> None:
    ws = held(40)
    assert list(ws.tail) == [as_read(seq) for seq in range(1, 41)]
    assert ws.tail.kinds == [(Role.USER, "o200k_base", UTC), (Role.ASSISTANT, "o200k_base", UTC)]
    assert not ws.tail.rare
    assert ws.tail[-1] == as_read(40) and ws.tail[1:3] == [as_read(2), as_read(3)]


def test_a_held_long_text_is_the_set_s_own_copy_and_a_short_one_the_row_s() -> None:
    """A long text is malloc's: copied on the loop's thread, out of the reader thread's arena."""
    long, short = as_read(1), as_read(2, words=3)
    ws = WorkingSet.of(sources([long, short]))
    assert list(ws.tail) == [long, short]
    assert ws.tail.contents[0] is not long.content and ws.tail.contents[1] is short.content


def test_a_turn_s_history_views_share_each_message_text_and_the_set_keeps_none() -> None:
    ws = held(40)
    views = history_views(ws.tail)
    assert views == history_views(list(ws.tail))
    assert all(r.content is c for r, c in zip(views, ws.tail.contents, strict=True))
    assert not any(isinstance(value, list) for value in _fields(ws))


def _fields(ws: WorkingSet) -> list[object]:
    return [getattr(ws, f.name) for f in dataclasses.fields(ws)]


def test_messages_appended_or_absorbed_later_are_held_as_columns_too() -> None:
    ws = held(4)
    assert ws.appended(as_read(5))
    ws.absorb(sources([as_read(6), as_read(7)]))
    assert list(ws.tail) == [as_read(seq) for seq in range(1, 8)]
    assert len(ws.tail.kinds) == 2 and not ws.tail.rare


def test_what_only_some_messages_carry_is_held_beside_the_columns_and_reads_back() -> None:
    call = ToolCall("call-1", "lookup", {"q": "x"})
    carried = [
        Message(EPISODE_ID, 1, Role.USER, "hi", 1, "o200k_base", START, "client-1", {"k": "v"}),
        Message(EPISODE_ID, 2, Role.ASSISTANT, "", 1, "o200k_base", START, tool_calls=(call,)),
        Message(EPISODE_ID, 3, Role.TOOL, "", 1, "o200k_base", START, tool_result=ToolResult("call-1", 7)),
        Message(EPISODE_ID, 4, Role.USER, "gone", 1, "cl100k_base", START, retracted_at=START),
    ]
    tail = Tail.of(carried)
    assert list(tail) == carried
    assert sorted(tail.rare) == [1, 2, 3, 4] and tail.client_ids == ["client-1", None, None, None]


def test_a_turn_renders_the_tail_without_its_own_message_and_retracted_ones() -> None:
    tail = Tail.of([as_read(1), as_read(2), as_read(3)])
    assert [m.seq for m in tail.without(3)] == [1, 2]
    assert [m.seq for m in tail.without(2)] == [1, 3]
    assert [m.seq for m in tail.without(9)] == [1, 2, 3]
    tail.append(dataclasses.replace(as_read(4), retracted_at=START))
    assert [m.seq for m in tail.without(1)] == [2, 3]
    assert [m.seq for m in tail.after(2)] == [3, 4] and list(tail.after(2)) == list(tail)[2:]


def test_a_held_time_is_the_datetime_it_was_in_its_own_zone() -> None:
    at = datetime(2026, 3, 1, 12, 30, 15, 123456, tzinfo=timezone(timedelta(hours=-5)))
    (held_one,) = Tail.of([dataclasses.replace(as_read(1), created_at=at)])
    assert held_one.created_at == at and held_one.created_at.utcoffset() == at.utcoffset()


def test_the_shared_empty_metadata_refuses_changes_and_reads_as_an_empty_dict() -> None:
    with pytest.raises(TypeError):
        NO_METADATA["k"] = "v"  # type: ignore[index]
    assert dict(NO_METADATA) == {}
    assert Message(EPISODE_ID, 1, Role.USER, "hi", 1, "o200k_base", START).metadata is NO_METADATA


def test_compacted_words_are_held_once_each_with_a_byte_a_posting_and_only_repeated_counts() -> None:
    log = CompactedLog.of([as_read(seq, words=30) for seq in range(1, 21)])
    pairs = sum(len(set(m.content.split())) for m in log.messages)
    distinct = len({w for m in log.messages for w in m.content.split()})
    assert len(log.terms) == len(log.term_sizes) == distinct and len(log.where) == pairs
    assert log.where.itemsize == 1 and len(log.repeated) == len(log.repeats) == 0
    assert log.terms.nbytes + log.term_sizes.nbytes + log.where.nbytes == 5 * distinct + pairs
    assert len(log.term_marks) == -(-distinct // MARK)


def test_a_word_said_again_in_a_message_counts_each_time_and_others_once() -> None:
    said = ["fig fig fig plum", "plum", "fig plum plum", "nothing"]
    log = CompactedLog.of([Message(EPISODE_ID, i, Role.USER, t, 3, "", START) for i, t in enumerate(said, 1)])
    assert [a.tolist() for a in log.postings("fig")] == [[0, 2], [3, 1]]
    assert [a.tolist() for a in log.postings("plum")] == [[0, 1, 2], [1, 1, 2]]
    assert [a.tolist() for a in log.postings("pear")] == [[], []]


def test_each_word_s_postings_are_its_messages_and_counts_past_many_words_and_repeats() -> None:
    said = [" ".join(f"w{(seq * k) % 150 // 2}" for k in range(1, 40)) for seq in range(1, 60)]
    log = CompactedLog.of([Message(EPISODE_ID, i, Role.USER, t, 3, "", START) for i, t in enumerate(said, 1)])
    assert len(log.terms) > 4 * MARK and len(log.repeated) > 0
    for word in {w for t in said for w in t.split()} | {"absent"}:
        counts = [t.split().count(word) for t in said]
        where, times = log.postings(word)
        assert where.tolist() == [i for i, n in enumerate(counts) if n]
        assert times.tolist() == [n for n in counts if n]


def test_positions_widen_past_a_byte_and_still_find_each_word_s_messages() -> None:
    log = CompactedLog.of([as_read(seq, words=3) for seq in range(1, 201)])
    log.extend([Message(EPISODE_ID, seq, Role.USER, f"w{seq} tail", 2, "", START) for seq in range(201, 301)])
    assert log.where.dtype == np.uint16
    (where,) = log.postings("w300")[0].tolist()
    assert log.message(where).seq == 300 and len(log.postings("tail")[0]) == 100


def test_a_word_s_postings_list_its_messages_in_order_across_extends() -> None:
    log = CompactedLog.of([Message(EPISODE_ID, 1, Role.USER, "lisbon lisbon trip", 3, "", START)])
    log.extend([Message(EPISODE_ID, 2, Role.ASSISTANT, "no words here", 3, "", START)])
    log.extend([Message(EPISODE_ID, 3, Role.USER, "lisbon again", 2, "", START)])
    where, times = log.postings("lisbon")
    assert where.tolist() == [0, 2]
    assert times.tolist() == [2, 1]
    assert log.postings("zanzibar")[0].tolist() == []


def walked_bytes(ws: WorkingSet) -> int:
    """What the set holds that grows with its messages, each object once."""
    tail = ws.tail
    columns = (tail.seqs, tail.times_us, tail.token_counts, tail.kind, tail.contents, tail.client_ids)
    return sum(sys.getsizeof(obj) for obj in [*tail.contents, *columns, tail.rare, tail])


def test_a_held_message_costs_under_fifty_bytes_beside_its_text() -> None:
    ws = held(160)
    texts = sum(sys.getsizeof(c) for c in ws.tail.contents)
    assert walked_bytes(ws) - texts < 50 * 160


def test_the_size_the_cache_evicts_by_covers_what_the_set_holds_without_doubling_it() -> None:
    ws = held(160)
    walked = walked_bytes(ws)
    assert walked <= ws.size() <= walked * 1.25


def test_the_cache_evicts_the_least_recently_used_sets_to_its_bound() -> None:
    one = held(20).size()
    cache = WorkingSetCache(max_bytes=one * 5)
    for n in range(12):
        cache.put(("t", f"ep-{n}"), held(20))
        cache.get(("t", "ep-0"))  # used every time: kept
    assert cache.total_bytes <= one * 5
    assert len(cache) == 5
    assert cache.get(("t", "ep-0")) is not None
    assert cache.get(("t", "ep-1")) is None
    assert cache.evictions == 7


def test_compacted_vectors_take_a_byte_a_dimension_and_rank_as_their_floats_do() -> None:
    log = CompactedLog.of([as_read(seq, words=5) for seq in range(1, 41)])
    rng = np.random.default_rng(0)
    floats = rng.normal(size=(40, 384)).astype(np.float32)
    floats /= np.linalg.norm(floats, axis=1, keepdims=True)
    start, _ = log.unembedded(40)
    log.add_vectors(start, floats)
    assert log.vectors is not None and log.vectors.nbytes == 40 * 384
    query = floats[17] + 0.5 * floats[3]
    best = [c.position for c in log.ranked("nothing matches", query.tolist())][:2]
    exact = np.argsort(-(floats @ query))[:2].tolist()
    assert best == exact


def test_the_vectors_kept_over_the_bound_stay_with_their_messages() -> None:
    log = CompactedLog.of([as_read(seq, words=5) for seq in range(1, MAX_MESSAGES + 1)])
    floats = np.random.default_rng(1).normal(size=(MAX_MESSAGES, 16)).astype(np.float32)
    start, _ = log.unembedded(MAX_MESSAGES)
    log.add_vectors(start, floats)
    log.extend([as_read(seq, words=5) for seq in range(MAX_MESSAGES + 1, MAX_MESSAGES + 11)])
    assert log.dropped > 0 and log.embedded == len(log) - 10
    assert log.vectors is not None
    for position in (0, 5, log.embedded - 1):
        restored = log.vectors[position] * log.scales[position] / 127
        assert np.allclose(restored, floats[log.dropped + position], atol=0.02 * np.abs(restored).max())


def test_sets_of_one_agent_share_one_agent_object_until_it_changes() -> None:
    cache = WorkingSetCache(max_bytes=1 << 30)
    first, second, third = held(3), held(3), held(3)
    assert first.agent is not second.agent
    cache.put(("t", "ep-1"), first)
    cache.put(("t", "ep-2"), second)
    assert second.agent is first.agent
    renamed = dataclasses.replace(agent(), display_name="renamed")
    third.agent = renamed
    cache.put(("t", "ep-3"), third)
    assert third.agent is renamed and third.agent is not first.agent


def test_a_batch_past_sixty_five_thousand_messages_still_finds_each_word_s_messages() -> None:
    batch = [Message(EPISODE_ID, seq, Role.USER, f"w{seq}", 1, "", START) for seq in range(1, 66_002)]
    log = CompactedLog()
    log.extend(batch)  # positions past uint16 while the batch is taken, then the newest half kept
    for seq in (66_001, 66_001 - len(log) + 1):
        (where,) = log.postings(f"w{seq}")[0].tolist()
        assert log.messages[where].seq == seq


def test_a_compacted_line_is_counted_once_and_not_kept() -> None:
    log = CompactedLog.of([as_read(seq, words=200) for seq in range(1, 4)])
    counted: list[str] = []

    def count(text: str) -> int:
        counted.append(text)
        return len(text.split())

    def render(m: Message) -> str:
        return m.content[:50] + "…"

    assert log.cost(1, render, count) == (len(render(log.messages[1]).split()), True)
    line, tokens = log.quote(1, render, count)
    assert (line, tokens) == (render(log.messages[1]), log.cost(1, render, count)[0])
    assert len(counted) == 1
    assert log.quoted.itemsize * len(log.quoted) <= 4 * len(log)


def test_logs_never_compacted_share_their_empty_arrays() -> None:
    one, other = CompactedLog(), CompactedLog()
    assert one.terms is other.terms and one.where is other.where and one.scales is other.scales
    assert one.seqs is other.seqs and one.blocks is other.blocks and one.quoted is other.quoted
    one.extend([as_read(1, words=3)])
    one.cost(0, lambda m: m.content, lambda text: len(text.split()))
    assert len(one.terms) == 3 and len(other.terms) == 0
    assert len(one) == len(one.quoted) == len(one.blocks) == 1
    assert len(other) == len(other.quoted) == len(other.blocks) == len(other.kinds) == 0
