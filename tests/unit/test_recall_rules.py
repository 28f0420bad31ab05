"""Pure rules of recall: transcript chunking, rank fusion, digest back-off."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from itertools import pairwise

from episodic.domain import digests as rules
from episodic.domain.model import Episode, EpisodeState, Message, Role, ToolCall
from episodic.domain.recall import DigestState, DigestText, Hit, Signal, reciprocal_rank_fusion
from episodic.service.recall import best_per_episode

NOW = datetime(2026, 4, 1, tzinfo=UTC)


def message(seq: int, role: Role, content: str, *calls: ToolCall) -> Message:
    return Message("ep", seq, role, content, 1, "cl100k_base", NOW, tool_calls=calls)


def closed_episode() -> Episode:
    return Episode("t", "ep", "a", "u", EpisodeState.CLOSED, "cl100k_base", NOW, NOW, ended_at=NOW)


def test_chunks_stay_under_the_size_and_carry_the_previous_turn() -> None:
    lines = [f"line {i} " + "x" * 100 for i in range(10)]
    packed = rules.chunks(lines, max_chars=250)
    assert all(len(c) <= 250 for c in packed)
    for before, after in pairwise(packed):
        assert after.splitlines()[0] == before.splitlines()[-1]
    assert {line for c in packed for line in c.splitlines()} == set(lines)


def test_a_line_longer_than_a_chunk_stands_alone() -> None:
    assert rules.chunks(["y" * 1000, "short"], max_chars=100) == ["y" * 1000, "y" * 1000 + "\nshort"]


def test_only_spoken_turns_and_tool_names_are_embedded() -> None:
    transcript = [
        message(1, Role.SYSTEM, "You are helpful"),
        message(2, Role.USER, "Book me a table"),
        message(3, Role.ASSISTANT, "", ToolCall("c1", "restaurants", {"city": "Oslo"})),
    ]
    texts = rules.embedded_texts(DigestText("Booked a table.", ("Oslo",)), transcript)
    assert texts[0] == "Booked a table. Oslo"
    assert texts[1:] == ["Book me a table\nTools used: restaurants"]


def test_rank_fusion_rewards_agreement_between_signals() -> None:
    fused = reciprocal_rank_fusion(
        {Signal.SEMANTIC: [Hit("a", 0.9), Hit("b", 0.8)], Signal.LEXICAL: [Hit("b", 7.0), Hit("c", 3.0)]}
    )
    assert [h.episode_id for h, _ in fused] == ["b", "a", "c"]
    assert fused[0][1] == (Signal.SEMANTIC, Signal.LEXICAL)


def test_rank_fusion_with_a_limit_returns_the_head_of_the_whole_fusion() -> None:
    rng = random.Random(7)
    for _ in range(200):
        rankings = {
            signal: [Hit(f"k{rng.randrange(30)}", rng.random()) for _ in range(rng.randrange(25))]
            for signal in (Signal.SEMANTIC, Signal.LEXICAL)
        }
        whole = reciprocal_rank_fusion(rankings)
        assert [h.score for h, _ in whole] == sorted((h.score for h, _ in whole), reverse=True)
        for limit in (0, 1, 5, 20, 60):
            assert reciprocal_rank_fusion(rankings, limit=limit) == whole[:limit]


def test_an_episode_scores_its_best_chunk() -> None:
    hits = [Hit("e1#0", 0.2), Hit("e2#3", 0.5), Hit("e1#4", 0.7)]
    assert best_per_episode(hits) == [Hit("e1", 0.7), Hit("e2", 0.5)]


def test_failures_back_off_and_show_failed_after_three_attempts() -> None:
    digest = rules.pending_digest(closed_episode(), NOW)
    waits = []
    for _ in range(3):
        digest = rules.failed(digest, "boom", NOW)
        waits.append(digest.next_attempt_at - NOW)
    assert waits == [timedelta(seconds=2), timedelta(seconds=4), timedelta(seconds=8)]
    assert digest.state is DigestState.FAILED and digest.last_error == "boom"


def test_a_failed_re_embedding_keeps_the_digest_recallable() -> None:
    ready = rules.ready(rules.pending_digest(closed_episode(), NOW), DigestText("s"), "m1", NOW)
    assert rules.failed(ready, "model down", NOW).state is DigestState.READY
