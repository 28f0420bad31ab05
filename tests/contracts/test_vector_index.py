"""The `VectorIndex` port's contract, held by the FAISS index (index/faiss_index.py) and by
the fake of tests/fakes.py: nearest neighbours by cosine, one partition per scope (a search
only ever sees the scope it names), keys upserted, removals of unknown keys ignored, and
only scopes holding a vector listed. No database: the index lives in RAM."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from episodic.domain.ports.indexes import VectorIndex
from episodic.domain.recall import Scope
from episodic.index.faiss_index import FaissVectorIndex
from tests.fakes import FakeVectorIndex

DIMENSION = 3
IMPLEMENTATIONS: dict[str, Callable[[], VectorIndex]] = {
    "fake": FakeVectorIndex,
    "faiss": lambda: FaissVectorIndex(DIMENSION),
}
MARY = Scope("t1", "agent", "mary")
TOM = Scope("t1", "agent", "tom")
OTHER_TENANT = Scope("t2", "agent", "mary")  # the same agent and user ids, another tenant


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
def index(request: pytest.FixtureRequest) -> VectorIndex:
    return IMPLEMENTATIONS[request.param]()


def keys_of(index: VectorIndex, scope: Scope, vector: list[float], k: int = 10) -> list[str]:
    return [hit.episode_id for hit in index.search(scope, vector, k)]


def test_a_search_ranks_the_scopes_vectors_by_cosine_best_first(index: VectorIndex) -> None:
    index.add(MARY, ["x", "xy", "y"], [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    hits = index.search(MARY, [1.0, 0.0, 0.0], 10)
    assert [h.episode_id for h in hits] == ["x", "xy", "y"]
    assert [h.score for h in hits] == pytest.approx([1.0, 1 / math.sqrt(2), 0.0], abs=1e-5)


def test_scores_are_cosine_whatever_the_lengths_of_the_vectors(index: VectorIndex) -> None:
    index.add(MARY, ["long", "short"], [[10.0, 0.0, 0.0], [0.0, 0.1, 0.1]])
    hits = {h.episode_id: h.score for h in index.search(MARY, [0.0, 5.0, 5.0], 10)}
    assert hits == {"short": pytest.approx(1.0, abs=1e-5), "long": pytest.approx(0.0, abs=1e-5)}


def test_k_bounds_the_hits_and_a_k_of_zero_finds_nothing(index: VectorIndex) -> None:
    index.add(MARY, ["a", "b", "c"], [[1.0, 0.0, 0.0], [0.9, 0.1, 0.0], [0.0, 0.0, 1.0]])
    assert keys_of(index, MARY, [1.0, 0.0, 0.0], k=2) == ["a", "b"]
    assert len(index.search(MARY, [1.0, 0.0, 0.0], 100)) == 3
    assert index.search(MARY, [1.0, 0.0, 0.0], 0) == []


def test_a_search_sees_only_the_scope_it_names(index: VectorIndex) -> None:
    index.add(MARY, ["mary-1"], [[1.0, 0.0, 0.0]])
    index.add(TOM, ["tom-1"], [[1.0, 0.0, 0.0]])
    index.add(OTHER_TENANT, ["other-1"], [[1.0, 0.0, 0.0]])
    assert keys_of(index, MARY, [1.0, 0.0, 0.0]) == ["mary-1"]
    assert keys_of(index, TOM, [1.0, 0.0, 0.0]) == ["tom-1"]
    assert keys_of(index, OTHER_TENANT, [1.0, 0.0, 0.0]) == ["other-1"]
    assert keys_of(index, Scope("t1", "agent", "nobody"), [1.0, 0.0, 0.0]) == []


def test_one_key_in_two_scopes_is_two_vectors(index: VectorIndex) -> None:
    index.add(MARY, ["same"], [[1.0, 0.0, 0.0]])
    index.add(OTHER_TENANT, ["same"], [[0.0, 1.0, 0.0]])
    index.remove(MARY, ["same"])
    assert index.keys(MARY) == set() and index.keys(OTHER_TENANT) == {"same"}
    (hit,) = index.search(OTHER_TENANT, [0.0, 1.0, 0.0], 10)
    assert hit.score == pytest.approx(1.0, abs=1e-5)


def test_adding_a_key_again_replaces_its_vector(index: VectorIndex) -> None:
    index.add(MARY, ["a", "b"], [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    index.add(MARY, ["a"], [[0.0, 0.0, 1.0]])
    assert index.count(MARY) == 2 and index.keys(MARY) == {"a", "b"}
    (best,) = index.search(MARY, [0.0, 0.0, 1.0], 1)
    assert best.episode_id == "a" and best.score == pytest.approx(1.0, abs=1e-5)
    old = {h.episode_id: h.score for h in index.search(MARY, [1.0, 0.0, 0.0], 10)}
    assert old["a"] == pytest.approx(0.0, abs=1e-5)  # the first vector is gone, not kept beside


def test_removing_drops_the_keys_and_ignores_unknown_ones(index: VectorIndex) -> None:
    index.add(MARY, ["a", "b", "c"], [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    index.remove(MARY, ["b", "never-added"])
    index.remove(Scope("t9", "nobody", "none"), ["a"])  # a scope never seen
    assert index.keys(MARY) == {"a", "c"} and index.count(MARY) == 2
    assert "b" not in keys_of(index, MARY, [0.0, 1.0, 0.0])


def test_only_scopes_holding_a_vector_are_listed_in_tenant_agent_user_order(index: VectorIndex) -> None:
    index.add(TOM, ["t"], [[1.0, 0.0, 0.0]])
    index.add(OTHER_TENANT, ["o"], [[1.0, 0.0, 0.0]])
    index.add(MARY, ["m"], [[1.0, 0.0, 0.0]])
    index.add(Scope("t1", "agent", "empty"), [], [])
    assert index.scopes() == [MARY, TOM, OTHER_TENANT]
    index.remove(TOM, ["t"])
    assert index.scopes() == [MARY, OTHER_TENANT]
    assert index.keys(TOM) == set() and index.count(TOM) == 0
    assert index.search(TOM, [1.0, 0.0, 0.0], 10) == []


def test_an_emptied_scope_takes_vectors_again(index: VectorIndex) -> None:
    index.add(MARY, ["a"], [[1.0, 0.0, 0.0]])
    index.remove(MARY, ["a"])
    index.add(MARY, ["b"], [[0.0, 1.0, 0.0]])
    assert index.keys(MARY) == {"b"} and keys_of(index, MARY, [0.0, 1.0, 0.0]) == ["b"]


def test_as_many_keys_as_vectors_or_nothing_is_added(index: VectorIndex) -> None:
    with pytest.raises(ValueError, match="2 keys for 1 vectors"):
        index.add(MARY, ["a", "b"], [[1.0, 0.0, 0.0]])
    assert index.count(MARY) == 0 and index.scopes() == []
