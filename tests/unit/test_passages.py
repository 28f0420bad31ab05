"""HYBRID recall's third ranking: the best passage (a message with its neighbours) of each of
the fused head's episodes, so one exchange about the thing asked is not diluted by the rest."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from episodic.domain.excerpts import passage_scores, spoken
from episodic.domain.model import Message, Role
from episodic.domain.recall import Hit, Signal, fuse_with_passages, reciprocal_rank_fusion

T0 = datetime(2026, 3, 14, tzinfo=UTC)
FILLER = "We talked about the weather and the traffic for a while."


def said(episode_id: str, *lines: str) -> list[Message]:
    return [Message(episode_id, i, Role.USER, t, len(t.split()), "", T0) for i, t in enumerate(lines, 1)]


def test_a_passage_holding_the_query_words_together_beats_the_same_words_far_apart() -> None:
    together = said("together", FILLER, "Which book did you read?", "Charlotte's Web, twice.", FILLER)
    apart = said("apart", "I read the news.", FILLER, FILLER, FILLER, FILLER, "A book fell.")
    scores = passage_scores(
        "which book did you read", {e[0].episode_id: spoken(e) for e in (together, apart)}
    )
    assert scores["together"] > scores["apart"] > 0


def test_speaker_labels_and_stop_words_score_nothing() -> None:
    log = {"e": spoken(said("e", "Caroline: we did it", "Melanie: and then?"))}
    assert passage_scores("what did Caroline and Melanie do", log) == {"e": 0.0}
    assert passage_scores("", log) == {}


def test_the_passage_ranking_lifts_an_episode_and_counts_as_a_lexical_match() -> None:
    rankings = {
        Signal.SEMANTIC: [Hit("a", 0.9), Hit("b", 0.8), Hit("c", 0.1)],
        Signal.LEXICAL: [Hit("a", 3.0), Hit("c", 1.0)],
    }
    assert [h.episode_id for h, _ in reciprocal_rank_fusion(rankings)] == ["a", "c", "b"]
    fused = fuse_with_passages(rankings, {"a": 0.0, "b": 2.5, "c": 0.0})
    assert [h.episode_id for h, _ in fused] == ["a", "b", "c"]  # b passes c, not a, first in both
    assert {h.episode_id: s for h, s in fused}["b"] == (Signal.SEMANTIC, Signal.LEXICAL)
    scores = [h.score for h, _ in fused]
    assert scores == sorted(scores, reverse=True)


def test_without_a_matching_passage_the_fusion_is_unchanged() -> None:
    rankings = {Signal.SEMANTIC: [Hit("a", 0.9), Hit("b", 0.8)], Signal.LEXICAL: [Hit("b", 1.0)]}
    assert fuse_with_passages(rankings, {"a": 0.0, "b": 0.0}) == reciprocal_rank_fusion(rankings)


def test_scoring_passages_is_linear_in_the_text_read() -> None:
    def seconds(count: int) -> float:  # this thread's CPU time: a busy machine does not count
        log = {"e": spoken(said("e", *["the stream will be cancelled " * 40] * count))}
        best = float("inf")
        for _ in range(3):
            started = time.thread_time()
            passage_scores("stream cancelled " * 200, log)
            best = min(best, time.thread_time() - started)
        return best

    assert seconds(1600) / seconds(100) < 16 * 3  # 16x the text: linear with generous slack
