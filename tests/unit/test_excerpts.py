"""Excerpts of recalled episodes: the messages that match this turn's query, verbatim,
speaker-attributed, the best few per episode in their original order, bounded in length."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from episodic.domain.changes import EpisodesRemoved
from episodic.domain.excerpts import choose_excerpts, spoken, terms
from episodic.domain.model import Message, Role
from episodic.domain.recall import Scope
from episodic.state.spoken_cache import SpokenCache

T0 = datetime(2026, 3, 14, tzinfo=UTC)


def message(episode_id: str, seq: int, text: str, role: Role = Role.USER) -> Message:
    return Message(episode_id, seq, role, text, len(text.split()), "", T0)


MESSAGES = {
    "e1": [
        message("e1", 1, "Caroline: I went to the LGBTQ support group yesterday."),
        message("e1", 2, "Melanie: That sounds lovely. How was the weather?", Role.ASSISTANT),
        message("e1", 3, "Caroline: Sunny. Then I painted a sunrise over the lake."),
    ],
    "e2": [message("e2", 1, "I bought running shoes for the marathon in May.")],
    "e3": [message("e3", 1, "tool output", Role.TOOL)],
}
LOG = {episode: spoken(messages) for episode, messages in MESSAGES.items()}


def test_the_best_matching_messages_are_kept_in_their_order_with_their_speaker() -> None:
    chosen = choose_excerpts("sunrise over the lake, support group", LOG, 2, 300)
    assert chosen["e1"] == (
        "Caroline: I went to the LGBTQ support group yesterday.",
        "Melanie: That sounds lovely. How was the weather?",  # the reply to a match comes with it
        "Caroline: Sunny. Then I painted a sunrise over the lake.",
    )


def test_a_matching_message_brings_the_reply_after_it() -> None:
    chosen = choose_excerpts("how was the weather?", LOG, 1, 300)
    assert chosen == {
        "e1": (
            "Melanie: That sounds lovely. How was the weather?",
            "Caroline: Sunny. Then I painted a sunrise over the lake.",
        )
    }


def test_the_speaker_label_is_not_matched() -> None:
    assert choose_excerpts("Caroline Melanie", LOG, 3, 300) == {}


def test_an_unlabelled_message_gets_its_role_and_a_long_one_is_clipped_at_a_word() -> None:
    chosen = choose_excerpts("marathon shoes", LOG, 3, 30)
    (line,) = chosen["e2"]
    assert line.startswith("User: I bought") and line.endswith("…") and len(line) <= 30


def test_no_query_words_no_excerpts_and_tool_messages_are_never_excerpted() -> None:
    assert choose_excerpts("what was it?", LOG, 3, 300) == {}
    assert choose_excerpts("tool output", LOG, 3, 300) == {}


def test_query_terms_drop_stop_words() -> None:
    assert terms("What did Caroline PAINT?") == ["caroline", "paint"]


def test_choosing_is_linear_in_the_text_read() -> None:
    def seconds(count: int) -> float:  # this thread's CPU time: a busy machine does not count
        log = {"e": spoken([message("e", i, "the stream will be cancelled " * 40) for i in range(count)])}
        best = float("inf")
        for _ in range(3):
            started = time.thread_time()
            choose_excerpts("stream cancelled " * 200, log, 3, 300)
            best = min(best, time.thread_time() - started)
        return best

    assert seconds(1600) / seconds(100) < 16 * 3  # 16x the text: linear with generous slack


def test_the_cache_of_recalled_messages_forgets_removed_episodes_only() -> None:
    cache = SpokenCache(max_messages=10)
    cache.put(("t", "e1"), LOG["e1"])
    cache.put(("t", "e2"), LOG["e2"])
    cache.changed(EpisodesRemoved([(Scope("t", "a", "u"), "e1")]))
    assert cache.get(("t", "e1")) is None and cache.get(("t", "e2")) == LOG["e2"]


def test_the_cache_of_recalled_messages_is_bounded_by_the_messages_it_holds() -> None:
    cache = SpokenCache(max_messages=3)
    cache.put(("t", "e1"), LOG["e1"])  # 3 messages
    cache.put(("t", "e2"), LOG["e2"])  # 1 more: the least recently used goes
    assert cache.get(("t", "e1")) is None and cache.get(("t", "e2")) is not None
