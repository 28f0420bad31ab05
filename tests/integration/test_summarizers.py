"""Summarizers in other processes and against a loopback endpoint: the extractive one's
output does not depend on the hash seed, and the OpenAI-compatible one against a local fake
endpoint, falling back to the extractive one on any failure (the rest is in
tests/unit/test_summarizers.py)."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from episodic.domain.recall import DigestText
from episodic.summarize import ExtractiveSummarizer, OpenAIChatConfig, OpenAIChatSummarizer
from tests.unit.test_summarizers import leave_request

REPO = Path(__file__).resolve().parents[2]


def test_extractive_output_does_not_depend_on_hash_seeds() -> None:
    """Sets iterate in a per-process order; nothing of it may reach the digest."""
    script = (
        "from tests.unit.test_summarizers import leave_request, labelled_chat\n"
        "from episodic.summarize import ExtractiveSummarizer\n"
        "s = ExtractiveSummarizer()\n"
        "print(repr(s.summarize(leave_request())), repr(s.summarize(labelled_chat())))\n"
    )
    outputs = {_run_with_hash_seed(script, seed) for seed in ("1", "2", "3")}
    assert len(outputs) == 1


def _run_with_hash_seed(script: str, seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": f"{REPO / 'server'}{os.pathsep}{REPO}"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


# --- the OpenAI-compatible summarizer against a local fake endpoint ---------------------------


@dataclass
class FakeEndpoint:
    """Answers POSTs with `status` and `body` after `delay` seconds; records every request."""

    base_url: str = ""
    status: int = 200
    body: bytes = b""
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str], Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    def reply_with(self, content: str) -> None:
        self.body = json.dumps(
            {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
        ).encode()

    def reply_with_digest(self, digest: Any) -> None:
        self.reply_with(json.dumps(digest))


def _handler_for(fake: FakeEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            fake.requests.append((self.path, dict(self.headers.items()), json.loads(self.rfile.read(length))))
            if fake.delay:
                fake.release.wait(fake.delay)
            try:
                self.send_response(fake.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(fake.body)))
                for name, value in fake.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(fake.body)
            except OSError:
                pass  # the client gave up waiting

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeEndpoint]:
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.setenv(name, "*")
    fake = FakeEndpoint()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(fake))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    fake.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield fake
    finally:
        fake.release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def llm(fake: FakeEndpoint, **options: Any) -> OpenAIChatSummarizer:
    config = {"base_url": fake.base_url, "model": "digest-mini", "timeout_seconds": 2.0, **options}
    return OpenAIChatSummarizer(OpenAIChatConfig(**config))


def test_openai_reply_with_valid_json_is_used_as_is(endpoint: FakeEndpoint) -> None:
    endpoint.reply_with_digest(
        {"summary": "Priya booked leave for July.", "key_facts": ["Prefers formal English.", "14 days left."]}
    )
    summarizer = llm(endpoint)
    digest = summarizer.summarize(leave_request())
    assert digest == DigestText("Priya booked leave for July.", ("Prefers formal English.", "14 days left."))
    assert summarizer.last_fallback_reason is None and summarizer.fallback_count == 0


def test_openai_request_carries_model_temperature_json_format_and_bearer_key(endpoint: FakeEndpoint) -> None:
    endpoint.reply_with_digest({"summary": "ok", "key_facts": []})
    llm(endpoint, api_key="sk-test-123").summarize(leave_request())
    path, headers, body = endpoint.requests[0]
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sk-test-123"
    assert headers["Content-Type"] == "application/json"
    assert body["model"] == "digest-mini"
    assert body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    system, transcript = body["messages"]
    assert system["role"] == "system" and '"key_facts"' in system["content"]
    assert "user: I'm going to visit my sister in Lisbon" in transcript["content"]
    assert "tool team_calendar failed: timeout after 5s" in transcript["content"]
    assert "Orchid" not in transcript["content"] and "parking" not in transcript["content"]


def test_openai_request_without_a_key_sends_no_authorization(endpoint: FakeEndpoint) -> None:
    endpoint.reply_with_digest({"summary": "ok", "key_facts": []})
    llm(endpoint).summarize(leave_request())
    assert "Authorization" not in endpoint.requests[0][1]


def test_openai_transcript_is_cut_oldest_first(endpoint: FakeEndpoint) -> None:
    endpoint.reply_with_digest({"summary": "ok", "key_facts": []})
    llm(endpoint, max_transcript_chars=200).summarize(leave_request())
    sent = endpoint.requests[0][2]["messages"][1]["content"]
    assert "Let's submit it on Friday" in sent and "Priya Nair" not in sent
    assert "[earlier messages omitted]" in sent


def test_openai_reply_is_clamped_to_the_limits(endpoint: FakeEndpoint) -> None:
    endpoint.reply_with_digest(
        {"summary": "word " * 600, "key_facts": [f"fact {i} " + "x" * 300 for i in range(20)]}
    )
    digest = llm(endpoint).summarize(leave_request())
    assert len(digest.summary) <= 1000
    assert len(digest.key_facts) == 12 and all(len(fact) <= 200 for fact in digest.key_facts)


def test_openai_empty_transcript_asks_nothing(endpoint: FakeEndpoint) -> None:
    assert llm(endpoint).summarize([]) == DigestText("", ())
    assert endpoint.requests == []


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("this is not JSON", "JSONDecodeError"),
        ('["a", "list"]', "not a JSON object"),
        ('{"key_facts": []}', "summary"),
        ('{"summary": 42, "key_facts": []}', "summary"),
        ('{"summary": "ok", "key_facts": "one fact"}', "key_facts"),
        ('{"summary": "ok", "key_facts": [1, 2]}', "key_facts"),
    ],
)
def test_openai_invalid_json_or_wrong_shape_falls_back_to_extractive(
    endpoint: FakeEndpoint, content: str, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    endpoint.reply_with(content)
    summarizer = llm(endpoint)
    with caplog.at_level(logging.WARNING, logger="episodic.summarize"):
        digest = summarizer.summarize(leave_request())
    assert digest == ExtractiveSummarizer().summarize(leave_request())
    assert summarizer.last_fallback_reason is not None and reason in summarizer.last_fallback_reason
    assert summarizer.fallback_count == 1
    assert "falling back" in caplog.text


def test_openai_reply_without_choices_falls_back(endpoint: FakeEndpoint) -> None:
    endpoint.body = b'{"error": {"message": "overloaded"}}'
    summarizer = llm(endpoint)
    assert summarizer.summarize(leave_request()) == ExtractiveSummarizer().summarize(leave_request())
    assert summarizer.last_fallback_reason is not None and "choices" in summarizer.last_fallback_reason


def test_openai_server_error_falls_back_to_extractive(endpoint: FakeEndpoint) -> None:
    endpoint.status = 500
    endpoint.body = b'{"error": "boom"}'
    summarizer = llm(endpoint)
    assert summarizer.summarize(leave_request()) == ExtractiveSummarizer().summarize(leave_request())
    assert summarizer.last_fallback_reason is not None and "500" in summarizer.last_fallback_reason


def test_openai_redirect_is_not_followed_and_falls_back(endpoint: FakeEndpoint) -> None:
    endpoint.status = 307
    endpoint.headers = {"Location": endpoint.base_url + "/elsewhere"}
    summarizer = llm(endpoint, api_key="sk-secret")
    assert summarizer.summarize(leave_request()) == ExtractiveSummarizer().summarize(leave_request())
    assert [path for path, _, _ in endpoint.requests] == ["/v1/chat/completions"]
    assert summarizer.last_fallback_reason is not None and "307" in summarizer.last_fallback_reason


def test_openai_config_keeps_the_key_out_of_its_repr() -> None:
    assert "sk-secret" not in repr(OpenAIChatConfig("http://127.0.0.1/v1", "m", api_key="sk-secret"))


def test_openai_timeout_falls_back_to_extractive(endpoint: FakeEndpoint) -> None:
    endpoint.reply_with_digest({"summary": "too late", "key_facts": []})
    endpoint.delay = 60.0  # a reply no loaded machine waits for within the 0.3 s timeout
    summarizer = llm(endpoint, timeout_seconds=0.3)
    started = time.monotonic()
    digest = summarizer.summarize(leave_request())
    assert time.monotonic() - started < endpoint.delay  # it gave up: it did not wait for the reply
    assert digest == ExtractiveSummarizer().summarize(leave_request())
    assert summarizer.last_fallback_reason is not None and "timed out" in summarizer.last_fallback_reason


def test_openai_connection_refused_falls_back_to_extractive(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.setenv(name, "*")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    summarizer = OpenAIChatSummarizer(OpenAIChatConfig(f"http://127.0.0.1:{port}/v1", "m", timeout_seconds=2))
    assert summarizer.summarize(leave_request()) == ExtractiveSummarizer().summarize(leave_request())
    assert summarizer.last_fallback_reason is not None
    assert summarizer.fallback_count == 1


def test_a_later_success_clears_the_fallback_reason(endpoint: FakeEndpoint) -> None:
    summarizer = llm(endpoint)
    endpoint.reply_with("nope")
    summarizer.summarize(leave_request())
    endpoint.reply_with_digest({"summary": "fine", "key_facts": []})
    assert summarizer.summarize(leave_request()) == DigestText("fine", ())
    assert summarizer.last_fallback_reason is None and summarizer.fallback_count == 1
