"""A summarizer backed by any OpenAI-compatible chat completions endpoint. Whatever goes wrong
(timeout, connection, status, reply shape) it falls back to another summarizer, the extractive
one by default, logs a warning and records why in `last_fallback_reason`."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.client import HTTPMessage
from typing import IO, Any

from episodic.domain.json_text import json_text
from episodic.domain.model import Message, Role, ToolResult
from episodic.domain.ports.models import Summarizer
from episodic.domain.recall import DigestText
from episodic.summarize.extractive import ExtractiveSummarizer
from episodic.summarize.facts import tool_names_by_call
from episodic.summarize.text import shorten

log = logging.getLogger(__name__)

MAX_SUMMARY_CHARS = 1000
MAX_FACTS = 12
MAX_FACT_CHARS = 200
MAX_REPLY_BYTES = 1 << 20
_TOOL_OUTPUT_CHARS = 200
_OMITTED = "[earlier messages omitted]"
_REASON_CHARS = 300

INSTRUCTIONS = (
    "You digest a finished conversation between a user and an assistant so that it can be recalled "
    "in later conversations. Reply with one JSON object and nothing else, exactly of the form "
    '{"summary": string, "key_facts": [string]}. '
    "summary: at most 60 words, third person, what the user wanted and what came of it. "
    "key_facts: at most 8 short standalone facts worth remembering, each under 120 characters: "
    "the user's preferences, personal details, plans and decisions, dates, numbers and amounts, and "
    "tool failures. Use only what the transcript says; write an empty list when there is nothing. "
    "Each transcript line starts with who is speaking."
)


class ReplyError(ValueError):
    """The endpoint answered, but not with a usable digest."""


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is a failure: following one would carry the bearer key to another address."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        return None


@dataclass(frozen=True, slots=True)
class OpenAIChatConfig:
    """`base_url` is the API root, e.g. "https://api.openai.com/v1"; `api_key` is sent as a bearer
    token when set. `timeout_seconds` bounds connecting and each read. The transcript sent is cut
    to `max_transcript_chars`, dropping the oldest messages first."""

    base_url: str
    model: str
    api_key: str = field(default="", repr=False)
    timeout_seconds: float = 30.0
    max_transcript_chars: int = 24_000

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        if not self.model.strip():
            raise ValueError("model must not be empty")
        if self.timeout_seconds <= 0 or self.max_transcript_chars < 1:
            raise ValueError("timeout_seconds and max_transcript_chars must be positive")

    @property
    def endpoint(self) -> str:
        return f"{self.base_url.rstrip('/')}/chat/completions"


class OpenAIChatSummarizer:
    """Not for concurrent use of `last_fallback_reason`: it describes the latest call."""

    def __init__(self, config: OpenAIChatConfig, fallback: Summarizer | None = None) -> None:
        self.config = config
        self.fallback: Summarizer = fallback or ExtractiveSummarizer()
        self.last_fallback_reason: str | None = None
        self.fallback_count = 0
        self._opener = urllib.request.build_opener(_RefuseRedirects())

    def summarize(self, transcript: Sequence[Message]) -> DigestText:
        self.last_fallback_reason = None
        text = render_transcript(transcript, self.config.max_transcript_chars)
        if not text:
            return DigestText("")
        try:
            return parse_reply(self._post(request_body(self.config.model, text)))
        except Exception as exc:  # any failure at all means the fallback's digest
            return self._fall_back(transcript, shorten(f"{type(exc).__name__}: {exc}", _REASON_CHARS))

    def _post(self, body: bytes) -> bytes:
        request = urllib.request.Request(self.config.endpoint, data=body, method="POST")
        for name, value in request_headers(self.config.api_key).items():
            request.add_header(name, value)
        try:
            return self._exchange(request)
        except urllib.error.HTTPError as exc:
            exc.close()
            raise ReplyError(f"HTTP status {exc.code} {exc.reason}") from None

    def _exchange(self, request: urllib.request.Request) -> bytes:
        with self._opener.open(request, timeout=self.config.timeout_seconds) as response:
            if not 200 <= response.status < 300:
                raise ReplyError(f"HTTP status {response.status}")
            raw: bytes = response.read(MAX_REPLY_BYTES + 1)
        if len(raw) > MAX_REPLY_BYTES:
            raise ReplyError(f"reply larger than {MAX_REPLY_BYTES} bytes")
        return raw

    def _fall_back(self, transcript: Sequence[Message], reason: str) -> DigestText:
        self.last_fallback_reason = reason
        self.fallback_count += 1
        log.warning(
            "summarizer %s at %s failed, falling back: %s", self.config.model, self.config.endpoint, reason
        )
        return self.fallback.summarize(transcript)


def request_headers(api_key: str) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def request_body(model: str, transcript_text: str) -> bytes:
    payload = {
        "model": model,
        "temperature": 0,
        "response_format": {"type": "json_object"},
        "messages": [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": f"Transcript:\n{transcript_text}"},
        ],
    }
    return json.dumps(payload, ensure_ascii=False).encode("utf-8")


def render_transcript(transcript: Sequence[Message], max_chars: int) -> str:
    """One line per user/assistant message, tool call and tool result; newest kept when cut."""
    return _newest(transcript_lines(transcript), max_chars)


def transcript_lines(transcript: Sequence[Message]) -> list[str]:
    names = tool_names_by_call(transcript)
    return [line for message in transcript for line in _lines_of(message, names)]


def _lines_of(message: Message, names: Mapping[str, str]) -> Iterator[str]:
    if message.role in (Role.USER, Role.ASSISTANT) and message.content.strip():
        yield f"{message.role.value}: {' '.join(message.content.split())}"
    for call in message.tool_calls:
        yield f"assistant called tool {call.tool_name}"
    if message.role is Role.TOOL and message.tool_result is not None:
        result = message.tool_result
        yield f"tool {names.get(result.tool_call_id, 'unknown')} {_outcome(result)}"


def _outcome(result: ToolResult) -> str:
    if not result.succeeded:
        return f"failed: {' '.join(result.error.split()) or 'no reason given'}"
    shown = json_text(result.output, sort_keys=True)
    return f"returned: {shorten(shown, _TOOL_OUTPUT_CHARS)}"


def _newest(lines: Sequence[str], max_chars: int) -> str:
    """The last lines that fit in `max_chars`, marked when older ones were dropped."""
    text = "\n".join(lines)
    if len(text) <= max_chars:
        return text
    budget = max_chars - len(_OMITTED) - 1
    kept: list[str] = []
    for line in reversed(lines):
        if len(line) + 1 > budget:
            break
        kept.append(line)
        budget -= len(line) + 1
    if not kept:
        return text[-max_chars:]
    return "\n".join([_OMITTED, *reversed(kept)])


def parse_reply(raw: bytes) -> DigestText:
    """The digest in a chat completion, validated and clamped; ReplyError if there is none."""
    content = _message_content(json.loads(raw.decode("utf-8")))
    digest = json.loads(_without_fences(content))
    if not isinstance(digest, dict):
        raise ReplyError("the digest is not a JSON object")
    summary = _summary(digest.get("summary"))
    return DigestText(summary, _facts(digest.get("key_facts", [])))


def _message_content(payload: Any) -> str:
    try:
        content = payload["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise ReplyError("no choices[0].message.content in the reply") from exc
    if not isinstance(content, str):
        raise ReplyError("choices[0].message.content is not a string")
    return content


def _without_fences(content: str) -> str:
    """Some models wrap JSON in a Markdown code block even when asked not to."""
    text = content.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text


def _summary(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ReplyError("summary is missing, empty or not a string")
    return shorten(" ".join(value.split()), MAX_SUMMARY_CHARS)


def _facts(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(fact, str) for fact in value):
        raise ReplyError("key_facts is not a list of strings")
    cleaned = (shorten(" ".join(fact.split()), MAX_FACT_CHARS) for fact in value)
    return tuple(dict.fromkeys(fact for fact in cleaned if fact))[:MAX_FACTS]
