"""The per-scope vector index: exact cosine search that never crosses a scope, upserts,
removals and concurrent use."""

from __future__ import annotations

import random
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from numpy.typing import NDArray

from episodic.domain.ports.indexes import VectorIndex
from episodic.domain.recall import Hit, Scope
from episodic.index import FaissVectorIndex
from episodic.index import shard as shard_module
from episodic.index.shard import BLOCK_ROWS

DIM = 16
ALICE = Scope("acme", "support-bot", "alice")
BOB = Scope("acme", "support-bot", "bob")
Vectors = NDArray[np.float32]


def unit(rng: np.random.Generator, count: int, dim: int = DIM) -> Vectors:
    vectors = rng.standard_normal((count, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def assert_exact(hits: list[Hit], model: Mapping[str, Vectors], query: Vectors, k: int) -> None:
    """`hits` are the k best of `model` by cosine, best first. Scores are compared rather than
    keys, so two near-equal scores may come in either order."""
    query = query / np.linalg.norm(query)
    truth = {key: float(vector @ query) for key, vector in model.items()}
    best = sorted(truth.values(), reverse=True)[:k]
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True)
    assert scores == pytest.approx(best, abs=1e-5)
    for hit in hits:
        assert hit.score == pytest.approx(truth[hit.episode_id], abs=1e-5)
    assert len({hit.episode_id for hit in hits}) == len(hits)


def test_it_implements_the_port() -> None:
    index: VectorIndex = FaissVectorIndex(DIM)
    assert index.scopes() == []


def test_search_returns_the_nearest_by_cosine_best_first_and_at_most_k() -> None:
    rng = np.random.default_rng(1)
    vectors = unit(rng, 50)
    model = {f"ep_{i}#0": vectors[i] for i in range(50)}
    index = FaissVectorIndex(DIM)
    index.add(ALICE, list(model), vectors)
    for query in unit(rng, 20):
        hits = index.search(ALICE, query, 5)
        assert len(hits) == 5
        assert_exact(hits, model, query, 5)
    [hit] = index.search(ALICE, vectors[7], 1)
    assert hit.episode_id == "ep_7#0" and hit.score == pytest.approx(1.0)


def test_scores_are_cosines_even_for_vectors_that_are_not_unit_length() -> None:
    index = FaissVectorIndex(2)
    index.add(ALICE, ["a#0", "b#0"], [[3.0, 0.0], [5.0, 5.0]])
    hits = index.search(ALICE, [10.0, 0.0], 2)
    assert [hit.episode_id for hit in hits] == ["a#0", "b#0"]
    assert [hit.score for hit in hits] == pytest.approx([1.0, 0.5**0.5])


def test_a_scope_never_sees_another_scopes_vectors() -> None:
    rng = np.random.default_rng(2)
    names = ["t1", "t2", "t3"]
    # Scopes that differ in one field only are the ones a sloppy key would confuse.
    scopes = [Scope(t, a, u) for t in names for a in names for u in names]
    index = FaissVectorIndex(DIM)
    owner: dict[str, Scope] = {}
    shared = unit(rng, 1)  # the same vector in every scope: an exact match everywhere
    for number, scope in enumerate(scopes):
        keys = [f"ep_{number}_{i}#0" for i in range(int(rng.integers(1, 12)))]
        index.add(scope, keys, np.vstack([shared, unit(rng, len(keys) - 1)]))
        owner.update(dict.fromkeys(keys, scope))
    for _ in range(300):
        scope = scopes[int(rng.integers(len(scopes)))]
        hits = index.search(scope, unit(rng, 1)[0], int(rng.integers(1, 30)))
        assert hits and all(owner[hit.episode_id] == scope for hit in hits)
        assert {hit.episode_id for hit in index.search(scope, shared[0], 100)} == index.keys(scope)


def test_upsert_replaces_the_vector_of_a_key() -> None:
    index = FaissVectorIndex(2)
    index.add(ALICE, ["a#0", "b#0"], [[1.0, 0.0], [0.6, 0.8]])
    index.add(ALICE, ["a#0"], [[0.0, -1.0]])
    assert index.count(ALICE) == 2
    hits = index.search(ALICE, [1.0, 0.0], 2)
    assert [(hit.episode_id, hit.score) for hit in hits] == [("b#0", pytest.approx(0.6)), ("a#0", 0.0)]
    assert index.search(ALICE, [0.0, -1.0], 1) == [Hit("a#0", 1.0)]


def test_within_one_add_the_last_vector_of_a_repeated_key_wins() -> None:
    index = FaissVectorIndex(2)
    index.add(ALICE, ["a#0", "a#0"], [[1.0, 0.0], [0.0, 1.0]])
    assert index.count(ALICE) == 1
    assert index.search(ALICE, [0.0, 1.0], 5) == [Hit("a#0", 1.0)]


def test_remove_removes_and_ignores_unknown_keys() -> None:
    index = FaissVectorIndex(2)
    index.add(ALICE, ["a#0", "b#0", "c#0"], [[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    index.remove(ALICE, ["a#0", "nope#0"])
    index.remove(BOB, ["b#0"])
    assert index.keys(ALICE) == {"b#0", "c#0"}
    assert [hit.episode_id for hit in index.search(ALICE, [1.0, 0.0], 5)] == ["b#0", "c#0"]


def test_any_sequence_of_adds_and_removes_searches_like_brute_force() -> None:
    """A model check of the row bookkeeping: holes filled by the last row, growth, shrinking."""
    rng = np.random.default_rng(3)
    index = FaissVectorIndex(DIM)
    model: dict[str, Vectors] = {}
    for step in range(400):
        if model and rng.random() < 0.45:
            gone = list(rng.choice(sorted(model), size=int(rng.integers(1, 4))))
            index.remove(ALICE, gone)
            for key in gone:
                model.pop(key, None)
        else:
            keys = [f"ep_{int(rng.integers(0, 60))}#{step % 3}" for _ in range(int(rng.integers(1, 5)))]
            vectors = unit(rng, len(keys))
            index.add(ALICE, keys, vectors)
            model.update(zip(keys, vectors, strict=True))
        assert index.keys(ALICE) == set(model)
        query = unit(rng, 1)[0]
        assert_exact(index.search(ALICE, query, 7), model, query, 7)


def test_an_unknown_or_emptied_scope_finds_nothing() -> None:
    index = FaissVectorIndex(2)
    assert index.search(ALICE, [1.0, 0.0], 5) == []
    index.add(ALICE, ["a#0"], [[1.0, 0.0]])
    assert index.search(ALICE, [1.0, 0.0], 0) == []
    index.remove(ALICE, ["a#0"])
    assert index.search(ALICE, [1.0, 0.0], 5) == []
    assert index.scopes() == [] and index.keys(ALICE) == set() and len(index) == 0
    index.add(ALICE, ["b#0"], [[0.0, 1.0]])
    assert index.search(ALICE, [1.0, 0.0], 5) == [Hit("b#0", 0.0)]


def test_k_larger_than_the_scope_returns_every_vector() -> None:
    rng = np.random.default_rng(4)
    index = FaissVectorIndex(DIM)
    index.add(ALICE, ["a#0", "a#1", "b#0"], unit(rng, 3))
    assert {hit.episode_id for hit in index.search(ALICE, unit(rng, 1)[0], 1000)} == {"a#0", "a#1", "b#0"}


def test_a_scope_larger_than_a_block_is_searched_exactly() -> None:
    rng = np.random.default_rng(5)
    count = 2 * BLOCK_ROWS + 7
    vectors = unit(rng, count, 8)
    model = {f"ep_{i}#0": vectors[i] for i in range(count)}
    index = FaissVectorIndex(8)
    index.add(ALICE, list(model), vectors)
    for query in unit(rng, 10, 8):
        assert_exact(index.search(ALICE, query, 10), model, query, 10)
    assert index.search(ALICE, vectors[-1], 1)[0].episode_id == f"ep_{count - 1}#0"


def test_keys_and_scopes_list_what_is_held() -> None:
    index = FaissVectorIndex(2)
    carol = Scope("acme", "other-bot", "carol")
    index.add(BOB, ["b#0", "b#1"], [[1.0, 0.0], [0.0, 1.0]])
    index.add(carol, ["c#0"], [[1.0, 1.0]])
    index.add(ALICE, ["a#0"], [[1.0, 1.0]])
    assert index.scopes() == [carol, ALICE, BOB]  # by tenant, then agent, then user
    assert index.keys(BOB) == {"b#0", "b#1"} and index.keys(Scope("x", "y", "z")) == set()
    assert (index.count(BOB), index.count(carol), len(index)) == (2, 1, 4)


def test_concurrent_adds_removes_and_searches_stay_consistent() -> None:
    rng = np.random.default_rng(8)
    index = FaissVectorIndex(DIM)
    scopes = [Scope("t", "a", f"u{i}") for i in range(4)]
    queries = unit(rng, 64)

    def write(worker: int) -> None:
        local = random.Random(worker)
        for step in range(300):
            scope = scopes[local.randrange(len(scopes))]
            key = f"{scope.user_id}/ep_{worker}_{step % 40}#0"
            if local.random() < 0.3:
                index.remove(scope, [key])
            else:
                index.add(scope, [key], unit(np.random.default_rng(step), 1))

    def read(worker: int) -> None:
        local = random.Random(100 + worker)
        for _ in range(600):
            scope = scopes[local.randrange(len(scopes))]
            hits = index.search(scope, queries[local.randrange(64)], 5)
            assert all(hit.episode_id.startswith(f"{scope.user_id}/") for hit in hits)
            assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)

    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = [pool.submit(write, w) for w in range(4)] + [pool.submit(read, w) for w in range(4)]
        for future in futures:
            future.result()
    for scope in index.scopes():
        keys = index.keys(scope)
        assert index.count(scope) == len(keys) and all(key.startswith(f"{scope.user_id}/") for key in keys)
        assert {hit.episode_id for hit in index.search(scope, queries[0], 1000)} == keys


def test_an_add_racing_the_removal_that_empties_its_scope_is_not_lost() -> None:
    """Threads keep emptying the scope (which drops it from the index) while adding to it:
    every add must land in the index, never in a scope that was just dropped."""
    index = FaissVectorIndex(2)

    def lost_adds(worker: int) -> int:
        lost = 0
        for step in range(2000):
            key = f"w{worker}_{step}#0"
            index.add(ALICE, [key], [[1.0, 0.0]])
            lost += key not in index.keys(ALICE)
            index.remove(ALICE, [key])
        return lost

    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, so the race window actually gets hit
    try:
        with ThreadPoolExecutor(max_workers=3) as pool:
            assert list(pool.map(lost_adds, range(3))) == [0, 0, 0]
    finally:
        sys.setswitchinterval(switch_interval)
    assert index.scopes() == []


@pytest.mark.parametrize(
    ("keys", "vectors", "message"),
    [
        (["a#0"], [[1.0, 0.0, 0.0]], "dimension 2"),
        (["a#0"], [[1.0]], "dimension 2"),
        (["a#0", "b#0"], [[1.0, 0.0]], "2 keys for 1 vectors"),
        (["a#0"], [[float("nan"), 1.0]], "finite"),
        (["a#0"], [[0.0, 0.0]], "zero vector"),
    ],
)
def test_bad_vectors_are_refused_with_value_error(
    keys: list[str], vectors: list[list[float]], message: str
) -> None:
    index = FaissVectorIndex(2)
    with pytest.raises(ValueError, match=message):
        index.add(ALICE, keys, vectors)
    assert index.scopes() == []


def test_a_query_of_the_wrong_dimension_is_refused_with_value_error() -> None:
    index = FaissVectorIndex(2)
    index.add(ALICE, ["a#0"], [[1.0, 0.0]])
    for query in ([1.0, 0.0, 0.0], [1.0], [[1.0, 0.0], [0.0, 1.0]]):
        with pytest.raises(ValueError, match="dimension 2"):
            index.search(ALICE, query, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dimension 2"):
        index.search(Scope("x", "y", "z"), [1.0, 0.0, 0.0], 1)
    with pytest.raises(ValueError, match="positive"):
        FaissVectorIndex(0)


def test_a_large_scope_searched_through_its_coded_copy_stays_right_through_every_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Above COARSE_ROWS a scope is searched in its coded copy and the best candidates are
    scored exactly: scores stay exact cosines, a stored vector finds itself first, and the
    copy follows appends, overwrites and removals (rows move when a hole is filled)."""
    monkeypatch.setattr(shard_module, "COARSE_ROWS", 64)
    monkeypatch.setattr(shard_module, "RERANK", 4)  # few candidates: a stale copy would show
    monkeypatch.setattr(shard_module, "RERANK_MIN", 10)
    rng = np.random.default_rng(8)
    index = FaissVectorIndex(DIM)
    model: dict[str, Vectors] = {}
    found = wanted = 0
    for step in range(300):
        if len(model) > 80 and rng.random() < 0.3:
            gone = list(rng.choice(sorted(model), size=int(rng.integers(1, 6))))
            index.remove(ALICE, gone)
            for key in gone:
                model.pop(key, None)
        else:
            keys = [f"ep_{int(rng.integers(0, 400))}#0" for _ in range(int(rng.integers(1, 12)))]
            vectors = unit(rng, len(keys))
            index.add(ALICE, keys, vectors)
            model.update(zip(keys, vectors, strict=True))
        query = unit(rng, 1)[0]
        hits = index.search(ALICE, query, 10)
        truth = {key: float(vector @ query) for key, vector in model.items()}
        assert all(hit.score == pytest.approx(truth[hit.episode_id], abs=1e-5) for hit in hits)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        best = sorted(truth, key=lambda key: -truth[key])[:10]
        found += len({h.episode_id for h in hits} & set(best))
        wanted += len(best)
        key = sorted(model)[step % len(model)]
        assert index.search(ALICE, model[key], 1)[0].episode_id == key
    assert found / wanted > 0.97


def _grown_in_other_dimensions(
    monkeypatch: pytest.MonkeyPatch, growth: int
) -> tuple[FaissVectorIndex, Vectors]:
    """A scope coded from rows living in the first half of the dimensions, then grown 5x
    with rows living in the other half, then changed (so its copy is coded again)."""
    monkeypatch.setattr(shard_module, "COARSE_ROWS", 64)
    monkeypatch.setattr(shard_module, "RERANK", 1)
    monkeypatch.setattr(shard_module, "RERANK_MIN", 10)
    monkeypatch.setattr(shard_module, "RETRAIN_GROWTH", growth)
    rng = np.random.default_rng(5)
    old, new = unit(rng, 100), unit(rng, 400)
    old[:, DIM // 2 :] = 0.0
    new[:, : DIM // 2] = 0.0
    index = FaissVectorIndex(DIM)
    index.add(ALICE, [f"old_{i}#0" for i in range(100)], old)
    index.search(ALICE, old[0], 1)  # the copy is made: its centroids learned from `old`
    index.add(ALICE, [f"new_{i}#0" for i in range(400)], new)
    index.remove(ALICE, ["old_0#0"])
    return index, new


def test_a_copy_coded_again_after_the_scope_grew_learns_its_centroids_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Centroids learned from the first rows know nothing of dimensions those rows never
    used: once the scope is RETRAIN_GROWTH times larger, they are learned again, and the
    coded pass finds the new rows by itself."""
    index, new = _grown_in_other_dimensions(monkeypatch, growth=4)

    def no_exact_pass(*_: object) -> None:
        raise AssertionError("the coded pass should have found enough candidates")

    monkeypatch.setattr(shard_module, "top_k", no_exact_pass)
    found = sum(index.search(ALICE, new[i], 1)[0].episode_id == f"new_{i}#0" for i in range(len(new)))
    assert found / len(new) > 0.95


def test_a_query_the_coded_copy_scores_as_nothing_is_answered_exactly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With centroids that never saw the new rows' dimensions (not learned again), the coded
    pass scores them all as nothing and returns too few candidates: the search is then
    exact, never short."""
    index, new = _grown_in_other_dimensions(monkeypatch, growth=10**9)
    for i in range(0, len(new), 10):
        assert index.search(ALICE, new[i], 1)[0].episode_id == f"new_{i}#0"
