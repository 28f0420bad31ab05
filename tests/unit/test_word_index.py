"""The word half of knowledge search (index/words.py): BM25 as the textbook computes it,
kept right through adds and removals, scored by a C loop that refuses what it cannot index."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from episodic.domain.recall import Hit
from episodic.index import _postings
from episodic.index import words as words_module
from episodic.index.words import (
    COMMON_MIN,
    K1,
    MAX_QUERY_TERMS,
    MAX_SEGMENTS,
    B,
    Bm25WordIndex,
    analyse,
    query_terms,
)

VOCABULARY = [f"w{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(40)]  # "waa", "wab", ...


def corpus(seed: int, chunks: int, words: int = 12) -> dict[str, str]:
    """Chunks of words drawn with Zipf-like weights, keys over a few documents."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(VOCABULARY) + 1)
    weights /= weights.sum()
    return {
        f"doc{i % 7}#{i}": " ".join(rng.choice(VOCABULARY, size=int(rng.integers(1, words)), p=weights))
        for i in range(chunks)
    }


def textbook(texts: dict[str, str], query: str, k: int) -> list[Hit]:
    """BM25 over every chunk holding a query word, computed plainly."""
    analysed = {key: analyse(text) for key, text in texts.items()}
    mean = max(sum(map(len, analysed.values())) / len(analysed), 1.0)
    scores: dict[str, float] = {}
    for term in query_terms(query):
        holding = [key for key, words in analysed.items() if term in words]
        idf = math.log(1 + (len(analysed) - len(holding) + 0.5) / (len(holding) + 0.5))
        for key in holding:
            tf = analysed[key].count(term)
            norm = K1 * (1 - B + B * len(analysed[key]) / mean)
            scores[key] = scores.get(key, 0.0) + idf * tf * (K1 + 1) / (tf + norm)
    best = sorted(scores.items(), key=lambda p: (-p[1], p[0]))[:k]
    return [Hit(key, score) for key, score in best]


def same(found: list[Hit], expected: list[Hit], texts: dict[str, str], query: str) -> bool:
    """The same scores, best first, each found chunk scoring what the textbook gives it (float32
    against float64: chunks tied in one may be a hair apart in the other, so tied ones may
    swap places)."""
    every = {h.episode_id: h.score for h in textbook(texts, query, len(texts))}
    return len(found) == len(expected) and all(
        math.isclose(a.score, b.score, rel_tol=1e-4)
        and math.isclose(a.score, every[a.episode_id], rel_tol=1e-4)
        for a, b in zip(found, expected, strict=True)
    )


def queries(seed: int, count: int = 30) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(VOCABULARY, size=int(rng.integers(1, 5)))) for _ in range(count)]


@pytest.mark.parametrize("seed", range(5))
def test_scores_are_the_textbook_bm25_of_every_chunk_holding_a_query_word(seed: int) -> None:
    texts = corpus(seed, 300)
    index = Bm25WordIndex()
    index.add(texts.items())
    for query in queries(seed):
        for k in (1, 5, 50):
            assert same(index.search(query, k), textbook(texts, query, k), texts, query), query


def test_removed_chunks_are_never_found_before_or_after_compaction() -> None:
    texts = corpus(12, 300)
    index = Bm25WordIndex()
    index.add(texts.items())
    index.remove_documents(["doc3"])  # a seventh of the rows: dead, not yet compacted away
    assert len(index._keys) > len(index)
    kept = {k: v for k, v in texts.items() if not k.startswith("doc3#")}
    for query in queries(12):
        found = index.search(query, 1000)
        assert not any(h.episode_id.startswith("doc3#") for h in found)
        assert {h.episode_id for h in found} == {h.episode_id for h in textbook(kept, query, 1000)}


def test_a_search_leaves_its_score_slots_zero_for_the_next() -> None:
    index = Bm25WordIndex()
    index.add(corpus(13, 300).items())
    for query in queries(13):
        index.search(query, 5)
        assert not index._scores.any()


def _part(rows: list[int], weights: list[float], idf: float, makes_candidates: bool) -> _postings.Part:
    return (np.array(rows, dtype=np.int32), np.array(weights, dtype=np.float32), idf, makes_candidates)


def test_the_scoring_loop_keeps_the_k_best_of_the_rows_candidate_lists_found() -> None:
    scores, alive = np.zeros(10, dtype=np.float32), np.ones(10, dtype=np.bool_)
    alive[3] = False
    out_rows, out_scores = np.empty(3, dtype=np.int64), np.empty(3, dtype=np.float32)
    parts = [
        _part([1, 3, 5, 7, 8], [1, 1, 1, 1, 0.25], 2.0, True),
        _part([5, 7, 9], [0.5, 0.5, 0.5], 1.0, False),  # adds to 5 and 7; never finds 9
    ]
    found = _postings.best_rows(parts, scores, alive, out_rows, out_scores)
    best = sorted(zip(out_scores[:found].tolist(), out_rows[:found].tolist(), strict=True), reverse=True)
    assert best == [(2.5, 7), (2.5, 5), (2.0, 1)]  # 3 is removed, 8 is fourth
    assert not scores.any()
    assert _postings.best_rows([parts[1]], scores, alive, out_rows, out_scores) == 0


@pytest.mark.parametrize(
    "parts",
    [
        [_part([0, 10], [1, 1], 1.0, True)],  # a row past the last slot
        [_part([-1, 2], [1, 1], 1.0, True)],
        [_part([1, 2], [1, 1], 1.0, True), _part([4, 99, 5], [1, 1, 1], 1.0, False)],  # rows out of order
        [_part([1, 2], [1], 1.0, True)],  # weights short of rows
        [(np.array([1], dtype=np.int64), np.array([1], dtype=np.float32), 1.0, True)],
        [(np.array([1], dtype=np.int32), np.array([1], dtype=np.float64), 1.0, True)],
        [("rows", "weights")],
        [[np.array([1], dtype=np.int32), np.array([1], dtype=np.float32), 1.0, True]],  # not a tuple
    ],
)
def test_the_scoring_loop_refuses_postings_it_would_read_or_write_outside_of(parts: list[object]) -> None:
    scores, alive = np.zeros(10, dtype=np.float32), np.ones(10, dtype=np.bool_)
    out_rows, out_scores = np.empty(3, dtype=np.int64), np.empty(3, dtype=np.float32)
    with pytest.raises((ValueError, TypeError)):
        _postings.best_rows(parts, scores, alive, out_rows, out_scores)  # type: ignore[arg-type]
    assert not scores.any()


def test_words_are_stemmed_folded_and_stop_words_never_match() -> None:
    index = Bm25WordIndex()
    index.add([("a#0", "We visited Café Lisboa's terraces"), ("b#0", "Nothing here at all")])
    assert [h.episode_id for h in index.search("visit", 5)] == ["a#0"]
    assert [h.episode_id for h in index.search("cafe terrace", 5)] == ["a#0"]
    assert [h.episode_id for h in index.search("LISBOA", 5)] == ["a#0"]
    assert index.search("the of and", 5) == []
    assert index.search("", 5) == []
    assert index.search("visit", 0) == []


def test_a_key_added_again_is_replaced_and_removed_documents_are_gone() -> None:
    index = Bm25WordIndex()
    index.add([("a#0", "apples"), ("a#1", "pears"), ("b#0", "apples pears")])
    index.add([("a#0", "plums")])
    assert sorted(h.episode_id for h in index.search("apples", 5)) == ["b#0"]
    assert [h.episode_id for h in index.search("plums", 5)] == ["a#0"]
    index.remove_documents(["a"])
    assert len(index) == 1
    assert index.search("plums pears", 5)[0].episode_id == "b#0"
    assert [h.episode_id for h in index.search("plums", 5)] == []
    index.remove_documents(["never-held"])
    assert len(index) == 1


@pytest.mark.parametrize("seed", range(3))
def test_many_small_writes_and_removals_find_what_a_fresh_build_finds(seed: int) -> None:
    """Segments merge and removed rows are compacted away: the same chunks match, in the
    same order once compacted (before that, removed rows still count in the statistics)."""
    texts = corpus(seed, 400)
    index = Bm25WordIndex()
    items = list(texts.items())
    for start in range(0, len(items), 10):  # 40 writes: segments merge along the way
        index.add(items[start : start + 10])
        assert len(index._segments) <= MAX_SEGMENTS + 1
    rng = np.random.default_rng(seed)
    for document in rng.permutation([f"doc{i}" for i in range(7)])[:2].tolist():
        index.remove_documents([document])
        texts = {k: v for k, v in texts.items() if not k.startswith(document + "#")}
        for query in queries(seed, 10):
            assert {h.episode_id for h in index.search(query, 1000)} == {
                h.episode_id for h in textbook(texts, query, 1000)
            }
    assert len(index._keys) == len(index)  # two of seven documents removed: over a quarter, compacted
    for query in queries(seed + 10):
        assert same(index.search(query, 10), textbook(texts, query, 10), texts, query), query


def test_a_word_in_most_of_a_large_agents_chunks_only_adds_to_what_rarer_words_found() -> None:
    chunks = [(f"d{i}#0", f"acme policy number {i}") for i in range(COMMON_MIN * 2)]
    index = Bm25WordIndex()
    index.add([*chunks, ("rare#0", "acme vacation days"), ("rare#1", "vacation leave days")])
    assert index.search("acme", 10) == []  # in nearly every chunk: this agent's stop word
    found = index.search("acme vacation", 10)
    assert [h.episode_id for h in found] == ["rare#0", "rare#1"]  # acme adds to rare#0 only
    texts = dict([*chunks, ("rare#0", "acme vacation days"), ("rare#1", "vacation leave days")])
    every = {h.episode_id: h.score for h in textbook(texts, "acme vacation", len(texts))}
    assert [h.score for h in found] == pytest.approx([every["rare#0"], every["rare#1"]], rel=1e-4)
    small = Bm25WordIndex()
    small.add([("a#0", "acme"), ("a#1", "acme tools"), ("a#2", "tools")])
    assert [h.episode_id for h in small.search("acme", 10)] == ["a#0", "a#1"]  # small: no such words


# policy in every 2nd chunk: a pass over acme's postings; in every 500th: a lookup of each row
@pytest.mark.parametrize("share", [2, 500])
def test_a_common_word_adds_its_textbook_score_to_the_rows_found_either_way(share: int) -> None:
    texts = {  # acme in ~4/5 of the chunks: an agent's stop word, yet worth something (idf ~0.2)
        f"d{i}#0": "acme policy" if i % share == 0 else "rules" if i % 5 == 1 else "acme rules"
        for i in range(COMMON_MIN * 3)
    }
    index = Bm25WordIndex()
    index.add(texts.items())
    found = index.search("acme policy", 10)
    every = {h.episode_id: h.score for h in textbook(texts, "acme policy", len(texts))}
    assert found and all(h.episode_id.startswith("d") and int(h.episode_id[1:-2]) % share == 0 for h in found)
    assert all(math.isclose(h.score, every[h.episode_id], rel_tol=1e-4) for h in found)


def test_a_query_of_thousands_of_words_is_cut_to_its_first_distinct_ones() -> None:
    query = " ".join(f"word{i}" for i in range(10_000))
    assert len(query_terms(query)) == MAX_QUERY_TERMS
    index = Bm25WordIndex()
    index.add([("a#0", "word3 word4"), ("b#0", f"word{MAX_QUERY_TERMS + 5}")])
    assert [h.episode_id for h in index.search(query, 5)] == ["a#0"]


def test_held_bytes_grow_with_postings_and_shrink_when_compacted() -> None:
    index = Bm25WordIndex()
    assert index.held_bytes == 0
    index.add(corpus(1, 200).items())
    full = index.held_bytes
    assert full > 0
    index.remove_documents([f"doc{i}" for i in range(6)])
    assert index.held_bytes < full / 3


def test_a_bulk_add_is_indexed_a_batch_at_a_time_and_ends_as_one_segment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(words_module, "ADD_BATCH", 37)
    texts = corpus(7, 500)
    index = Bm25WordIndex()
    index.add(texts.items())
    assert len(index._segments) == 1 and len(index) == 500
    for query in queries(7):
        assert same(index.search(query, 10), textbook(texts, query, 10), texts, query), query


def test_the_terms_of_a_word_are_shared_strings_not_one_per_occurrence() -> None:
    first, second = analyse("visiting visiting"), analyse("visiting")
    assert first == ("visit", "visit") and first[0] is first[1] is second[0]


def _arrays(**replaced: NDArray[Any]) -> dict[str, NDArray[Any]]:
    """A search's arrays for 10 rows and k = 3, some replaced."""
    arrays: dict[str, NDArray[Any]] = {
        "scores": np.zeros(10, dtype=np.float32),
        "alive": np.ones(10, dtype=np.bool_),
        "out_rows": np.empty(3, dtype=np.int64),
        "out_scores": np.empty(3, dtype=np.float32),
    }
    return arrays | replaced


@pytest.mark.parametrize(
    "arrays",
    [
        _arrays(scores=np.zeros(10, dtype=np.float64)),
        _arrays(scores=np.zeros(20, dtype=np.float32)[::2]),  # not one block of memory
        _arrays(alive=np.ones(10, dtype=np.uint8)),
        _arrays(alive=np.ones(9, dtype=np.bool_)),
        _arrays(out_rows=np.empty(3, dtype=np.int32)),
        _arrays(out_scores=np.empty(2, dtype=np.float32)),
    ],
)
def test_the_scoring_loop_refuses_arrays_of_another_type_or_length(arrays: dict[str, NDArray[Any]]) -> None:
    with pytest.raises((ValueError, TypeError, BufferError)):
        _postings.best_rows([_part([1, 2], [1, 1], 1.0, True)], **arrays)
