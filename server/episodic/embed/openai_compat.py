"""Embeddings from any OpenAI-compatible `POST {base_url}/embeddings` endpoint (OpenAI,
Ollama, vLLM, TEI, ...), over the standard library's HTTP client so the server gains no
HTTP dependency."""

from __future__ import annotations

import http.client
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import numpy as np
from numpy.typing import NDArray

from episodic.embed.errors import EmbeddingError
from episodic.embed.vectors import as_lists, unit_rows

DEFAULT_TIMEOUT_SECONDS = 30.0
DEFAULT_MAX_BATCH_SIZE = 64
# Enough of an error body to show the server's message without flooding the logs.
_ERROR_BODY_CHARS = 300
_PROBE_TEXT = "dimension probe"


class OpenAIEmbedder:
    """Embedder over an OpenAI-compatible embeddings endpoint.

    `base_url` is everything before `/embeddings`, e.g. "https://api.openai.com/v1" or
    "http://localhost:11434/v1". `dimension`, when given, is checked against every answer;
    otherwise it is learned from the first answer (asking for `dimension` first sends one
    probe request). `timeout` bounds each connect and each read, in seconds. Returned vectors
    are L2-normalised here, whatever the server does.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        dimension: int | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    ) -> None:
        self._url = _embeddings_url(base_url)
        self._host = urlsplit(base_url).hostname or ""
        if not model:
            raise ValueError("model must be non-empty")
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be positive, got {max_batch_size}")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        if dimension is not None and dimension < 1:
            raise ValueError(f"dimension must be positive, got {dimension}")
        self._model = model
        self._api_key = api_key
        self._dimension = dimension
        self._timeout = timeout
        self._max_batch_size = max_batch_size
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return f"openai:{self._model}@{self._host}"

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self.embed([_PROBE_TEXT])
        assert self._dimension is not None  # set by the probe, or embed raised
        return self._dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._max_batch_size):
            vectors.extend(self._embed_batch(texts[start : start + self._max_batch_size]))
        return vectors

    def _embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        answer = self._post({"model": self._model, "input": list(texts)})
        rows = _ordered_embeddings(answer, len(texts))
        matrix = _finite_matrix(rows)
        self._check_dimension(matrix.shape[1])
        if not np.all(np.linalg.norm(matrix, axis=1) > 0):
            raise EmbeddingError(f"{self._url} returned an all-zero embedding")
        return as_lists(unit_rows(matrix))

    def _check_dimension(self, width: int) -> None:
        # Under the lock so two concurrent first answers cannot both "learn" a dimension.
        with self._lock:
            if self._dimension is None:
                self._dimension = width
        if width != self._dimension:
            raise EmbeddingError(
                f"{self._url} returned {width}-dimensional embeddings, expected {self._dimension}"
            )

    def _post(self, payload: dict[str, Any]) -> Any:
        request = urllib.request.Request(
            self._url, data=json.dumps(payload).encode(), headers=self._headers(), method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                body: bytes = response.read()
        except urllib.error.HTTPError as exc:
            raise EmbeddingError(_http_error_message(self._url, exc)) from exc
        except TimeoutError as exc:  # socket.timeout is TimeoutError since 3.10
            raise EmbeddingError(f"{self._url} did not answer within {self._timeout} s") from exc
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            raise EmbeddingError(f"request to {self._url} failed: {exc}") from exc
        return _parse_json(self._url, body)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers


def _embeddings_url(base_url: str) -> str:
    parts = urlsplit(base_url)
    # urllib would also open file:// and ftp:// URLs; a misconfiguration must not read files.
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"base_url must be an http(s) URL with a host, got {base_url!r}")
    return base_url.rstrip("/") + "/embeddings"


def _http_error_message(url: str, exc: urllib.error.HTTPError) -> str:
    try:
        detail = exc.read(_ERROR_BODY_CHARS).decode(errors="replace")
    except OSError:
        detail = ""
    return f"{url} answered HTTP {exc.code} {exc.reason}: {detail}".rstrip(": ")


def _parse_json(url: str, body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise EmbeddingError(f"{url} answered with malformed JSON: {exc}") from exc


def _ordered_embeddings(answer: Any, expected: int) -> list[Any]:
    """The `embedding` of each `data` item, put in input order by its `index` (servers may
    answer out of order); items without any `index` are taken in the order given."""
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise EmbeddingError("embeddings response has no list of objects under 'data'")
    if len(data) != expected:
        raise EmbeddingError(f"embeddings response has {len(data)} items for {expected} inputs")
    indices = [item.get("index") for item in data]
    if all(index is None for index in indices):
        return [item.get("embedding") for item in data]
    if sorted(i for i in indices if isinstance(i, int)) != list(range(expected)):
        raise EmbeddingError(f"embeddings response indices {indices} are not 0..{expected - 1}")
    by_index = {item["index"]: item.get("embedding") for item in data}
    return [by_index[i] for i in range(expected)]


def _finite_matrix(rows: list[Any]) -> NDArray[np.float64]:
    if not all(isinstance(row, list) and row for row in rows):
        raise EmbeddingError("an embedding in the response is missing, empty or not a list")
    if len({len(row) for row in rows}) != 1:
        raise EmbeddingError("embeddings in one response have different lengths")
    # bool is an int subclass, but true/false in a vector is a malformed answer.
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for row in rows for x in row):
        raise EmbeddingError("an embedding in the response holds a non-number")
    try:
        matrix = np.asarray(rows, dtype=np.float64)
    except OverflowError as exc:  # a JSON integer beyond float range
        raise EmbeddingError("an embedding in the response holds an out-of-range number") from exc
    # json.loads accepts NaN and Infinity.
    if not np.isfinite(matrix).all():
        raise EmbeddingError("an embedding in the response holds a non-finite number")
    return matrix
