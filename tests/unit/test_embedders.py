"""HashingEmbedder, OpenAIEmbedder's checks and parsing without a server (the HTTP
exchanges are in tests/integration/test_embedders.py), MiniLM batch planning, the factory."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest

from episodic.embed import (
    KINDS,
    EmbeddingError,
    HashingEmbedder,
    OpenAIEmbedder,
    make_embedder,
)
from episodic.embed.minilm import plan_batches


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def norm(v: Sequence[float]) -> float:
    return math.sqrt(dot(v, v))


# --- HashingEmbedder ---------------------------------------------------------------------


def test_hashing_vectors_are_unit_length_with_the_configured_dimension() -> None:
    embedder = HashingEmbedder()
    texts = ["Hello world", "", "   ", "!!!", "a", "the quick brown fox jumps over the lazy dog " * 20]
    vectors = embedder.embed(texts)
    assert embedder.dimension == 256
    assert embedder.model_id == "hashing-256"
    assert len(vectors) == len(texts)
    for vector in vectors:
        assert len(vector) == 256
        assert norm(vector) == pytest.approx(1.0)


def test_hashing_is_deterministic_and_case_insensitive() -> None:
    first = HashingEmbedder().embed(["Refund the Order", "shipping times"])
    second = HashingEmbedder().embed(["refund the order", "shipping times"])
    assert first == second


def test_hashing_dimension_is_configurable() -> None:
    embedder = HashingEmbedder(dimension=32)
    assert embedder.model_id == "hashing-32"
    assert len(embedder.embed(["x"])[0]) == 32
    with pytest.raises(ValueError, match="dimension"):
        HashingEmbedder(dimension=0)


@pytest.mark.parametrize(
    ("anchor", "sharing", "unrelated"),
    [
        ("refund for the broken laptop", "the laptop arrived broken", "weather in Paris is sunny"),
        ("reset my password", "password reset link expired", "violin concerto tonight"),
        ("meeting moved to Thursday", "Thursday meeting agenda", "stock markets fell sharply"),
        ("ship the order today", "order shipped late", "cats sleep on rugs"),
        ("python type checking", "type checking with mypy", "banana bread recipe"),
    ],
)
def test_hashing_texts_sharing_words_score_higher(anchor: str, sharing: str, unrelated: str) -> None:
    a, s, u = HashingEmbedder().embed([anchor, sharing, unrelated])
    assert dot(a, s) > dot(a, u)


def test_hashing_bigrams_reward_word_order() -> None:
    a, same_order, reversed_order = HashingEmbedder().embed(["new york", "new york", "york new"])
    assert dot(a, same_order) == pytest.approx(1.0)
    assert dot(a, reversed_order) < 0.99


def test_hashing_empty_batch() -> None:
    assert HashingEmbedder().embed([]) == []


@pytest.mark.parametrize("base_url", ["file:///etc/passwd", "ftp://host/v1", "localhost:11434", "http:///v1"])
def test_openai_rejects_non_http_base_urls(base_url: str) -> None:
    with pytest.raises(ValueError, match="http"):
        OpenAIEmbedder(base_url, "m")


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"model": ""}, "model"),
        ({"model": "m", "max_batch_size": 0}, "max_batch_size"),
        ({"model": "m", "timeout": 0}, "timeout"),
    ],
)
def test_openai_rejects_bad_options(options: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=f"{named} must be"):
        OpenAIEmbedder("http://localhost/v1", **options)


# --- Unusable answers parsed without a server ------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ({"data": "nope"}, "no list of objects"),
        ([1, 2], "no list of objects"),
        ({"data": [{"embedding": [1.0], "index": 0}, {"embedding": [1.0], "index": 0}]}, "indices"),
        ({"data": [{"embedding": [1.0], "index": 0}, {"embedding": [1.0, 2.0], "index": 1}]}, "lengths"),
        ({"data": [{"embedding": [1.0], "index": 0}, {"embedding": ["1"], "index": 1}]}, "non-number"),
        ({"data": [{"embedding": [1.0], "index": 0}, {"embedding": [True], "index": 1}]}, "non-number"),
        ({"data": [{"embedding": [1.0], "index": 0}, {"embedding": [float("nan")], "index": 1}]}, "finite"),
        ({"data": [{"embedding": [1.0], "index": 0}, {"embedding": [10**400], "index": 1}]}, "range"),
        ({"data": [{"embedding": [1.0], "index": 0}, {"index": 1}]}, "missing"),
    ],
)
def test_openai_malformed_answers(monkeypatch: pytest.MonkeyPatch, answer: Any, message: str) -> None:
    embedder = OpenAIEmbedder("http://localhost/v1", "m")
    monkeypatch.setattr(embedder, "_post", lambda payload: answer)
    with pytest.raises(EmbeddingError, match=message):
        embedder.embed(["x", "y"])


def test_openai_accepts_answers_without_index_in_given_order(monkeypatch: pytest.MonkeyPatch) -> None:
    embedder = OpenAIEmbedder("http://localhost/v1", "m")
    monkeypatch.setattr(
        embedder, "_post", lambda payload: {"data": [{"embedding": [3, 4]}, {"embedding": [0, 2]}]}
    )
    assert embedder.embed(["x", "y"]) == [pytest.approx([0.6, 0.8]), pytest.approx([0.0, 1.0])]


# --- MiniLM batch planning (the model itself is tested in tests/integration) ----------------


def test_plan_batches_covers_every_index_once_shortest_first() -> None:
    lengths = [9, 3, 7, 3, 256, 8, 5]
    batches = plan_batches(lengths, batch_size=32)
    flat = [i for batch in batches for i in batch]
    assert sorted(flat) == list(range(len(lengths)))
    assert [lengths[i] for i in flat] == sorted(lengths)


def test_plan_batches_caps_the_batch_size() -> None:
    assert plan_batches([10] * 5, batch_size=2) == [[0, 1], [2, 3], [4]]


def test_plan_batches_keeps_a_long_text_out_of_a_batch_of_short_ones() -> None:
    assert plan_batches([12, 10, 256, 11], batch_size=32) == [[1, 3, 0], [2]]


def test_plan_batches_caps_padded_tokens() -> None:
    assert plan_batches([256] * 5, batch_size=32, max_tokens=512) == [[0, 1], [2, 3], [4]]
    assert plan_batches([300], batch_size=32, max_tokens=100) == [[0]]


def test_plan_batches_of_nothing() -> None:
    assert plan_batches([], batch_size=32) == []


# --- Factory ---------------------------------------------------------------------------------


def test_factory_kinds() -> None:
    assert KINDS == ("minilm", "minilm-fp32", "openai", "hashing")


def test_factory_builds_hashing_and_openai() -> None:
    hashing = make_embedder("hashing", dimension=64)
    assert isinstance(hashing, HashingEmbedder)
    assert hashing.dimension == 64
    remote = make_embedder(
        "openai", base_url="http://127.0.0.1:11434/v1", model="m", api_key="k", max_batch_size=8
    )
    assert isinstance(remote, OpenAIEmbedder)
    assert remote.model_id == "openai:m@127.0.0.1"


def test_factory_unknown_kind_names_the_allowed_ones() -> None:
    with pytest.raises(
        ValueError, match="unknown embedder kind 'bert'; allowed: minilm, minilm-fp32, openai, hashing"
    ):
        make_embedder("bert")
