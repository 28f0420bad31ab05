"""HashingEmbedder, OpenAIEmbedder against a fake OpenAI-compatible server, and the factory."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


# --- Fake OpenAI-compatible server ---------------------------------------------------------


@dataclass
class FakeEmbeddingsApi:
    """What the fake server answers; each test sets `mode` and reads `requests`."""

    mode: str = "ok"
    dimension: int = 3
    delay: float = 0.0  # how long to hold each answer back, unless released sooner
    requests: list[dict[str, Any]] = field(default_factory=list)
    answered: int = 0  # requests that got to the point of answering
    hung_up: int = 0  # answers the client was no longer there to read
    released: threading.Event = field(default_factory=threading.Event)

    def vector(self, text: str) -> list[float]:
        # Deliberately not unit length, so normalisation by the client is observable.
        return [float(len(text) + 1)] + [2.0] * (self.dimension - 1)

    def answer(self, inputs: list[str]) -> tuple[int, bytes]:
        if self.mode == "error500":
            return 500, b'{"error": {"message": "model crashed"}}'
        if self.mode == "garbage":
            return 200, b"<html>not json"
        data = [
            {"object": "embedding", "embedding": self.vector(t), "index": i} for i, t in enumerate(inputs)
        ]
        if self.mode == "drop_one":
            data = data[1:]
        if self.mode == "zero":
            data[0]["embedding"] = [0.0] * self.dimension
        # Reversed, so only `index` tells which vector belongs to which input.
        return 200, json.dumps({"object": "list", "data": data[::-1], "model": "fake-embed"}).encode()


def _handler(api: FakeEmbeddingsApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            api.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            api.released.wait(api.delay)
            api.answered += 1
            status, payload = api.answer(body["input"])
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                # A client that gave up (the timeout test) closed the connection: counted,
                # not printed by socketserver as a traceback. Any other error still is.
                api.hung_up += 1

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep pytest output clean

    return Handler


@pytest.fixture
def api() -> FakeEmbeddingsApi:
    return FakeEmbeddingsApi()


@pytest.fixture
def base_url(api: FakeEmbeddingsApi) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api))
    # server_close() joins the handler threads, so none outlives its test (one still holding
    # back an answer would otherwise write to a closed connection during a later test).
    server.daemon_threads = False
    # A short poll interval keeps shutdown() from adding half a second to every test.
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        api.released.set()  # answers still held back go out now, to whoever still listens
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# --- OpenAIEmbedder -------------------------------------------------------------------------


def test_openai_posts_to_embeddings_with_model_and_bearer_key(api: FakeEmbeddingsApi, base_url: str) -> None:
    embedder = OpenAIEmbedder(base_url + "/", "text-embedding-3-small", api_key="sk-test")
    embedder.embed(["hello"])
    (request,) = api.requests
    assert request["path"] == "/v1/embeddings"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    assert request["headers"]["Content-Type"] == "application/json"
    assert request["body"] == {"model": "text-embedding-3-small", "input": ["hello"]}


def test_openai_sends_no_authorization_without_a_key(api: FakeEmbeddingsApi, base_url: str) -> None:
    OpenAIEmbedder(base_url, "nomic-embed-text").embed(["hello"])
    assert "Authorization" not in api.requests[0]["headers"]


def test_openai_orders_by_index_and_normalises(api: FakeEmbeddingsApi, base_url: str) -> None:
    texts = ["a", "bbbb", "cc"]
    vectors = OpenAIEmbedder(base_url, "m").embed(texts)
    for text, vector in zip(texts, vectors, strict=True):
        raw = api.vector(text)
        assert vector == pytest.approx([x / norm(raw) for x in raw])
        assert norm(vector) == pytest.approx(1.0)


def test_openai_splits_batches_by_max_batch_size(api: FakeEmbeddingsApi, base_url: str) -> None:
    texts = [f"text {'x' * i}" for i in range(5)]
    vectors = OpenAIEmbedder(base_url, "m", max_batch_size=2).embed(texts)
    assert [r["body"]["input"] for r in api.requests] == [texts[0:2], texts[2:4], texts[4:5]]
    expected = OpenAIEmbedder(base_url, "m", max_batch_size=10).embed(texts)
    assert vectors == expected


def test_openai_empty_input_sends_nothing(api: FakeEmbeddingsApi, base_url: str) -> None:
    assert OpenAIEmbedder(base_url, "m").embed([]) == []
    assert api.requests == []


def test_openai_learns_the_dimension_from_the_first_answer(api: FakeEmbeddingsApi, base_url: str) -> None:
    api.dimension = 5
    embedder = OpenAIEmbedder(base_url, "m")
    assert embedder.dimension == 5  # one probe request
    assert len(api.requests) == 1
    embedder.embed(["x"])
    assert embedder.dimension == 5
    assert len(api.requests) == 2


def test_openai_rejects_an_answer_of_another_dimension(api: FakeEmbeddingsApi, base_url: str) -> None:
    embedder = OpenAIEmbedder(base_url, "m", dimension=4)
    with pytest.raises(EmbeddingError, match="3-dimensional embeddings, expected 4"):
        embedder.embed(["x"])


def test_openai_model_id_names_model_and_host(base_url: str) -> None:
    assert OpenAIEmbedder(base_url, "nomic-embed-text").model_id == "openai:nomic-embed-text@127.0.0.1"
    remote = OpenAIEmbedder("https://api.openai.com/v1", "text-embedding-3-small", dimension=1536)
    assert remote.model_id == "openai:text-embedding-3-small@api.openai.com"
    assert remote.dimension == 1536  # configured: no request needed


def test_openai_timeout_is_an_embedding_error(api: FakeEmbeddingsApi, base_url: str) -> None:
    api.delay = 30.0  # held back until the test ends (released at teardown)
    embedder = OpenAIEmbedder(base_url, "m", timeout=0.2)
    with pytest.raises(EmbeddingError, match=r"did not answer within 0\.2 s"):
        embedder.embed(["slow"])
    assert len(api.requests) == 1 and api.answered == 0, "the client gave up before any answer"


def test_openai_http_500_is_an_embedding_error(api: FakeEmbeddingsApi, base_url: str) -> None:
    api.mode = "error500"
    with pytest.raises(EmbeddingError, match="HTTP 500.*model crashed"):
        OpenAIEmbedder(base_url, "m").embed(["x"])


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("garbage", "malformed JSON"),
        ("drop_one", "1 items for 2 inputs"),
        ("zero", "all-zero embedding"),
    ],
)
def test_openai_unusable_answers_are_embedding_errors(
    api: FakeEmbeddingsApi, base_url: str, mode: str, message: str
) -> None:
    api.mode = mode
    with pytest.raises(EmbeddingError, match=message):
        OpenAIEmbedder(base_url, "m").embed(["x", "y"])


def test_openai_refused_connection_is_an_embedding_error() -> None:
    # A port that was just ours and is now closed refuses connections.
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = server.server_address[1]
    server.server_close()
    with pytest.raises(EmbeddingError, match="failed"):
        OpenAIEmbedder(f"http://127.0.0.1:{port}/v1", "m", timeout=2).embed(["x"])


@pytest.mark.parametrize("base_url", ["file:///etc/passwd", "ftp://host/v1", "localhost:11434", "http:///v1"])
def test_openai_rejects_non_http_base_urls(base_url: str) -> None:
    with pytest.raises(ValueError, match="http"):
        OpenAIEmbedder(base_url, "m")


@pytest.mark.parametrize(
    "options",
    [{"model": ""}, {"model": "m", "max_batch_size": 0}, {"model": "m", "timeout": 0}],
)
def test_openai_rejects_bad_options(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
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


def test_factory_builds_hashing_and_openai(base_url: str) -> None:
    hashing = make_embedder("hashing", dimension=64)
    assert isinstance(hashing, HashingEmbedder)
    assert hashing.dimension == 64
    remote = make_embedder("openai", base_url=base_url, model="m", api_key="k", max_batch_size=8)
    assert isinstance(remote, OpenAIEmbedder)
    assert remote.model_id == "openai:m@127.0.0.1"


def test_factory_unknown_kind_names_the_allowed_ones() -> None:
    with pytest.raises(
        ValueError, match="unknown embedder kind 'bert'; allowed: minilm, minilm-fp32, openai, hashing"
    ):
        make_embedder("bert")
