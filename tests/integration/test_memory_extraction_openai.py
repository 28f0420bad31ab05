"""The OpenAI-compatible memory extractor against the summarizer tests' local fake chat
completions endpoint (a loopback HTTP server): its answers validated and clamped, capped,
its instructions sent, and any failure falling back to the extractive extractor."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from episodic.domain.memories import MemoryKind
from episodic.domain.model import Message, Role
from episodic.summarize.memories import MAX_MEMORIES, MAX_MEMORY_CHARS, ExtractiveMemoryExtractor
from episodic.summarize.openai_chat import OpenAIChatConfig
from episodic.summarize.openai_memories import INSTRUCTIONS, OpenAiMemoryExtractor
from tests.integration import test_summarizers
from tests.integration.test_summarizers import FakeEndpoint
from tests.unit.test_memory_extraction import _episode

# --- the OpenAI-compatible extractor against the summarizer tests' local fake endpoint ---------


endpoint = test_summarizers.endpoint  # the fixture: a local fake chat completions endpoint
EXTRACTOR = ExtractiveMemoryExtractor()


def _model(fake: FakeEndpoint) -> OpenAiMemoryExtractor:
    return OpenAiMemoryExtractor(OpenAIChatConfig(fake.base_url, "memory-mini", timeout_seconds=2.0))


def _chat() -> list[Message]:
    return _episode(
        (Role.USER, "I moved to Valencia in March."),
        (Role.ASSISTANT, "Nice! How do you like it?"),
        (Role.USER, "I love the beaches."),
    )


def test_openai_memories_are_validated_and_clamped(endpoint: FakeEndpoint) -> None:
    good = {"text": "Moved to Valencia", "kind": "event", "from_seq": 1, "to_seq": 1}
    endpoint.reply_with(
        json.dumps(
            {
                "memories": [
                    {**good, "event_time": "2024-03-01", "topics": ["travel", 3], "entities": ["Valencia"]},
                    {**good, "text": "moved to  valencia."},  # a duplicate
                    {"text": "Loves the beaches " + "x" * 400, "kind": "preference", "from_seq": 3},
                    {"text": "Unknown kind", "kind": "opinion", "from_seq": 1, "to_seq": 1},
                    {"text": "No such message", "kind": "fact", "from_seq": 1, "to_seq": 9},
                    {"text": "Backwards", "kind": "fact", "from_seq": 3, "to_seq": 1},
                    {"text": "", "kind": "fact", "from_seq": 1, "to_seq": 1},
                    "not an object",
                ]
            }
        )
    )
    extractor = _model(endpoint)
    moved, beaches = extractor.extract(_chat())
    assert (moved.kind, moved.event_time, moved.topics, moved.entities) == (
        MemoryKind.EVENT,
        datetime(2024, 3, 1, tzinfo=UTC),
        ("travel",),
        ("Valencia",),
    )
    assert (beaches.from_seq, beaches.to_seq, beaches.event_time) == (3, 3, None)
    assert len(beaches.text) <= MAX_MEMORY_CHARS
    assert extractor.last_fallback_reason is None


def test_openai_caps_memories_at_24(endpoint: FakeEndpoint) -> None:
    items = [{"text": f"Fact {n}", "kind": "fact", "from_seq": 1, "to_seq": 1} for n in range(40)]
    endpoint.reply_with(json.dumps({"memories": items}))
    assert len(_model(endpoint).extract(_chat())) == MAX_MEMORIES


def test_openai_instructions_replace_the_default_prompt(endpoint: FakeEndpoint) -> None:
    endpoint.reply_with(json.dumps({"memories": []}))
    _model(endpoint).extract(_chat(), instructions="Only remember food preferences.")
    _model(endpoint).extract(_chat())
    prompts = [body["messages"][0]["content"] for _, _, body in endpoint.requests]
    assert prompts == ["Only remember food preferences.", INSTRUCTIONS]
    assert "[3] 2024-06-10 user: I love the beaches." in endpoint.requests[0][2]["messages"][1]["content"]


@pytest.mark.parametrize(
    "content", ["not json", "[1, 2", '{"memories": "none"}', '"a string"', '```json\n{"other": []}\n```']
)
def test_openai_malformed_output_falls_back_to_extractive(endpoint: FakeEndpoint, content: str) -> None:
    endpoint.reply_with(content)
    extractor = _model(endpoint)
    assert extractor.extract(_chat()) == EXTRACTOR.extract(_chat())
    assert extractor.last_fallback_reason and extractor.fallback_count == 1


def test_openai_http_error_falls_back_to_extractive(endpoint: FakeEndpoint) -> None:
    endpoint.status = 500
    extractor = _model(endpoint)
    assert extractor.extract(_chat()) == EXTRACTOR.extract(_chat())
    assert extractor.last_fallback_reason == "ReplyError: HTTP status 500 Internal Server Error"
