"""Summarizers: the extractive default (deterministic, pattern-found key facts, within limits
and time) and the OpenAI-compatible one against a local fake endpoint, falling back to the
extractive one on any failure."""

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
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from episodic.domain.model import Message, Role, ToolCall, ToolResult
from episodic.domain.recall import DigestText
from episodic.summarize import (
    ExtractiveSummarizer,
    OpenAIChatConfig,
    OpenAIChatSummarizer,
    make_summarizer,
)

START = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)
REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Turn:
    role: Role
    content: str = ""
    calls: tuple[ToolCall, ...] = ()
    result: ToolResult | None = None


def user(text: str) -> Turn:
    return Turn(Role.USER, text)


def assistant(text: str, *calls: ToolCall) -> Turn:
    return Turn(Role.ASSISTANT, text, calls)


def tool(result: ToolResult, payload: str = "") -> Turn:
    return Turn(Role.TOOL, payload, result=result)


def conversation(*turns: Turn) -> list[Message]:
    return [
        Message(
            "ep-1",
            seq,
            turn.role,
            turn.content,
            token_count=max(1, len(turn.content) // 4),
            token_encoding="cl100k_base",
            created_at=START + timedelta(seconds=seq),
            tool_calls=turn.calls,
            tool_result=turn.result,
        )
        for seq, turn in enumerate(turns, start=1)
    ]


def leave_request() -> list[Message]:
    """An HR assistant episode with a system prompt, recalled context, two tool calls (one
    failing) and a preference, a personal fact, numbers, dates and a decision."""
    return conversation(
        Turn(Role.SYSTEM, "You are Orchid, an HR assistant. Quote the staff handbook verbatim."),
        Turn(Role.CONTEXT, "[Past Conversations] Date: 2025-01-02 Summary: Asked about a parking permit."),
        user("Hi, my name is Priya Nair and I work at the Dundee office."),
        user("How many days of annual leave do I have left?"),
        assistant("", ToolCall("c1", "leave_balance", {"employee": "pnair"})),
        tool(ToolResult("c1", {"remaining_days": 14, "carried_over": 3}, True), '{"remaining_days": 14}'),
        assistant("You have 14 days of annual leave remaining this year."),
        user("Great. I prefer short answers in formal English, by the way."),
        user("I'm going to visit my sister in Lisbon in July, from 7 July to 18 July."),
        assistant("Let me check the team calendar.", ToolCall("c2", "team_calendar", {"month": "July"})),
        tool(ToolResult("c2", None, False, "timeout after 5s")),
        assistant(
            "I could not reach the calendar, but we decided to file the request for 7 July to 18 July. "
            "The request uses 9 days of leave and costs nothing extra."
        ),
        user("Thanks! Let's submit it on Friday."),
    )


def labelled_chat() -> list[Message]:
    """Two friends chatting, every line prefixed with the speaker's name."""
    return conversation(
        user("Tomas: Hey Ines! How was your week?"),
        assistant("Ines: Busy! I started a ceramics course on Tuesday and I love it."),
        user("Tomas: Nice. I ran a 10 km race last Sunday - my best time yet."),
        assistant("Ines: Wow! I'm going to cheer for you at the next one."),
        user("Tomas: My favourite part was the last hill, honestly."),
    )


# --- the extractive summarizer ---------------------------------------------------------------


def test_extractive_output_is_deterministic() -> None:
    first = ExtractiveSummarizer().summarize(leave_request())
    again = ExtractiveSummarizer().summarize(leave_request())
    assert first == again
    assert repr(first).encode() == repr(again).encode()


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


def test_captures_a_stated_preference_a_number_with_unit_a_date_and_a_decision() -> None:
    facts = ExtractiveSummarizer().summarize(leave_request()).key_facts
    assert "I prefer short answers in formal English" in facts
    assert "You have 14 days of annual leave remaining this year" in facts
    assert "I'm going to visit my sister in Lisbon in July, from 7 July to 18 July" in facts
    assert "We decided to file the request for 7 July to 18 July" in facts
    assert "Let's submit it on Friday" in facts
    assert "My name is Priya Nair" in facts and "I work at the Dundee office" in facts


def test_key_facts_are_short_distinct_and_at_most_eight() -> None:
    facts = ExtractiveSummarizer().summarize(leave_request()).key_facts
    assert 0 < len(facts) <= 8
    assert len(set(facts)) == len(facts)
    assert all(0 < len(fact) <= 120 and fact == fact.strip() for fact in facts)


def test_summary_keeps_informative_sentences_in_their_original_order() -> None:
    summary = ExtractiveSummarizer().summarize(leave_request()).summary
    assert "Priya Nair" in summary and "Lisbon" in summary
    assert summary.index("Priya Nair") < summary.index("Lisbon")
    assert "Thanks!" not in summary


def test_ignores_system_and_context_messages() -> None:
    digest = ExtractiveSummarizer().summarize(leave_request())
    text = " ".join([digest.summary, *digest.key_facts])
    for word in ("Orchid", "handbook", "parking", "Past Conversations", "2025-01-02"):
        assert word not in text


def test_handles_tool_calls_and_results_naming_tools_and_outcomes_without_payloads() -> None:
    digest = ExtractiveSummarizer().summarize(leave_request())
    assert digest.summary.endswith("Tools used: leave_balance, team_calendar.")
    assert "team_calendar tool failed: timeout after 5s" in digest.key_facts
    text = " ".join([digest.summary, *digest.key_facts])
    assert "remaining_days" not in text and "{" not in text


def test_a_successful_tool_call_is_a_fact_when_there_is_room() -> None:
    digest = ExtractiveSummarizer().summarize(
        conversation(
            user("What's the weather in Oslo?"),
            assistant("", ToolCall("w1", "get_weather", {"city": "Oslo"})),
            tool(ToolResult("w1", {"temp_c": -3}, True), '{"temp_c": -3}'),
            assistant("It is -3 degrees and snowing in Oslo."),
        )
    )
    assert digest.key_facts == ("get_weather tool succeeded", "It is -3 degrees and snowing in Oslo")
    assert digest.summary == (
        "User: What's the weather in Oslo? Assistant: It is -3 degrees and snowing in Oslo. "
        "Tools used: get_weather."
    )


def test_empty_transcript_gives_an_empty_summary_and_no_facts() -> None:
    summarizer = ExtractiveSummarizer()
    assert summarizer.summarize([]) == DigestText("", ())
    only_setup = conversation(Turn(Role.SYSTEM, "You are helpful."), Turn(Role.CONTEXT, "Nothing yet."))
    assert summarizer.summarize(only_setup) == DigestText("", ())


def test_speaker_labels_are_kept_so_the_digest_says_who() -> None:
    assert ExtractiveSummarizer().summarize(labelled_chat()) == DigestText(
        "Ines: I started a ceramics course on Tuesday and I love it. "
        "Tomas: I ran a 10 km race last Sunday - my best time yet. "
        "Ines: I'm going to cheer for you at the next one. "
        "Tomas: My favourite part was the last hill, honestly.",
        (
            "Ines: I started a ceramics course on Tuesday",
            "Tomas: I ran a 10 km race last Sunday",
            "Ines: I'm going to cheer for you at the next one",
            "Tomas: My favourite part was the last hill",
        ),
    )


def test_the_assistant_speaking_of_itself_is_not_a_fact_and_questions_are_not_facts() -> None:
    digest = ExtractiveSummarizer().summarize(
        conversation(
            user("Do you like jazz? Are we meeting next Tuesday?"),
            assistant("I am an AI assistant and I love helping. I will look that up for you."),
        )
    )
    assert digest.key_facts == ()


def test_long_transcript_stays_within_the_caps() -> None:
    transcript = _long_episode(50)
    summarizer = ExtractiveSummarizer()
    digest = summarizer.summarize(transcript)
    assert 0 < len(digest.summary) <= 400 and len(digest.summary.split()) <= 60
    assert 0 < len(digest.key_facts) <= 8
    assert all(len(fact) <= 120 for fact in digest.key_facts)


def test_a_single_overlong_sentence_is_cut_to_the_cap() -> None:
    ramble = " ".join(f"word{i} Glasgow" for i in range(200))
    digest = ExtractiveSummarizer().summarize(conversation(user(ramble)))
    assert len(digest.summary) <= 400 and len(digest.summary.split()) <= 60
    assert digest.summary.endswith("…")


def _long_episode(messages: int) -> list[Message]:
    topics = ["the Berlin offsite", "a new laptop", "the Q3 budget", "Spanish lessons", "a dentist visit"]
    turns: list[Turn] = []
    for i in range(messages // 2):
        topic = topics[i % len(topics)]
        turns.append(
            user(
                f"About {topic}: I'd like to spend about ${120 + i} on it. Can we do it by {1 + i % 28} May?"
            )
        )
        turns.append(
            assistant(
                f"Sure. I noted {topic} for {1 + i % 28} May with a budget of ${120 + i}. "
                f"That leaves {40 - i % 9} hours for the rest of the project, "
                "and we agreed to review it weekly."
            )
        )
    return conversation(*turns)


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
    endpoint.delay = 5.0
    summarizer = llm(endpoint, timeout_seconds=0.3)
    started = time.monotonic()
    digest = summarizer.summarize(leave_request())
    assert time.monotonic() - started < 3.0
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


# --- choosing a summarizer ---------------------------------------------------------------------


def test_make_summarizer_defaults_to_extractive_and_passes_options() -> None:
    assert isinstance(make_summarizer(), ExtractiveSummarizer)
    assert make_summarizer("extractive", max_facts=3) == ExtractiveSummarizer(max_facts=3)


def test_make_summarizer_builds_the_openai_summarizer() -> None:
    made = make_summarizer("openai", base_url="http://127.0.0.1:9/v1", model="m", api_key="k")
    assert isinstance(made, OpenAIChatSummarizer)
    assert made.config == OpenAIChatConfig("http://127.0.0.1:9/v1", "m", api_key="k")


def test_make_summarizer_rejects_unknown_kinds_naming_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match="extractive, openai"):
        make_summarizer("gpt-magic")


def test_openai_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="base_url"):
        OpenAIChatConfig("ftp://example", "m")
    with pytest.raises(ValueError, match="model"):
        OpenAIChatConfig("http://127.0.0.1/v1", " ")
