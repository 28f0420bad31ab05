"""OpenAIEmbedder against a fake OpenAI-compatible server on a loopback port (the
parts that need no server are in tests/unit/test_embedders.py)."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from episodic.embed import EmbeddingError, OpenAIEmbedder


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def norm(v: Sequence[float]) -> float:
    return math.sqrt(dot(v, v))


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
    with pytest.raises(EmbeddingError, match=r"HTTP 500.*model crashed"):
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
