"""A memory extractor backed by any OpenAI-compatible chat completions endpoint. The HTTP side
(redirects refused, timeouts, status and size checks, fenced JSON) is the summarizer's in
`openai_chat.py`. The model's memories are validated and clamped; whatever goes wrong, it falls
back to the extractive extractor, logs a warning and records why in `last_fallback_reason`."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from episodic.domain.memories import ExtractedMemory, MemoryKind, normalized
from episodic.domain.model import Message, Role
from episodic.domain.ports.models import MemoryExtractor
from episodic.summarize.memories import (
    MAX_ENTITIES,
    MAX_MEMORIES,
    MAX_MEMORY_CHARS,
    MAX_TOPICS,
    ExtractiveMemoryExtractor,
)
from episodic.summarize.openai_chat import (
    OpenAIChatConfig,
    OpenAIChatSummarizer,
    ReplyError,
    _message_content,
    _newest,
    _without_fences,
)
from episodic.summarize.text import shorten

log = logging.getLogger(__name__)

_LABEL_CHARS = 60
_REASON_CHARS = 300

INSTRUCTIONS = (
    "You extract long-term memories about the user from a finished conversation. Reply with one JSON "
    'object and nothing else, exactly of the form {"memories": [{"text": string, "kind": "fact" | '
    '"preference" | "event", "from_seq": int, "to_seq": int, "topics": [string], "entities": [string], '
    '"event_time": ISO 8601 string or null}]}. '
    "Only what the user states about themselves counts: never the assistant's words, tool output, "
    "questions, hypotheticals or requests; but a user's answer to the assistant's question counts even "
    'without "I" ("Training for a marathon" answering "Anything new?"). '
    "One memory per statement: split a compound sentence into one short fact per clause, and keep "
    'each standalone (say what "it" or "they" is). Look for what the user did (an event, with its '
    "date), does and is (work, home, health, hobbies), likes and dislikes (a preference), plans and "
    'intends, feels about something named or what it does for them ("Running helps me clear my head"), '
    "and their relations to people (family, friends, partners, pets, by name). Skip small talk, "
    "thanks, vague moods and resolutions to carry on. "
    'Write each text in the first person, as the user would say it ("I ran a half marathon", "My '
    'sister lives in Oslo"), never "the user"; when the user\'s lines begin with a name label '
    '("Maya: ..."), begin the text with the same label. Each text is under 300 characters; '
    "from_seq and to_seq are the [seq] of the lines that state it; event_time only for events, "
    'resolved against the line\'s date ("yesterday", "last May", "next week"). At most 24 '
    "memories; an empty list when there are none."
)


class OpenAiMemoryExtractor:
    """Not for concurrent use of `last_fallback_reason`: it describes the latest call."""

    def __init__(self, config: OpenAIChatConfig, fallback: MemoryExtractor | None = None) -> None:
        self.config = config
        self.fallback: MemoryExtractor = fallback or ExtractiveMemoryExtractor()
        self.last_fallback_reason: str | None = None
        self.fallback_count = 0
        self._chat = OpenAIChatSummarizer(config)  # its HTTP exchange, never its summaries

    @property
    def name(self) -> str:
        return f"openai:{self.config.model}"

    def extract(self, transcript: Sequence[Message], instructions: str = "") -> list[ExtractedMemory]:
        self.last_fallback_reason = None
        text = render(transcript, self.config.max_transcript_chars)
        if not text:
            return []
        body = request_body(self.config.model, instructions.strip() or INSTRUCTIONS, text)
        try:
            return parse_reply(self._chat._post(body), transcript)
        except Exception as exc:  # any failure at all means the fallback's memories
            return self._fall_back(transcript, shorten(f"{type(exc).__name__}: {exc}", _REASON_CHARS))

    def _fall_back(self, transcript: Sequence[Message], reason: str) -> list[ExtractedMemory]:
        self.last_fallback_reason = reason
        self.fallback_count += 1
        log.warning(
            "memory extractor %s at %s failed, falling back: %s",
            self.config.model,
            self.config.endpoint,
            reason,
        )
        return self.fallback.extract(transcript)


def render(transcript: Sequence[Message], max_chars: int) -> str:
    """ "[seq] date role: text" per user and assistant message, newest kept when cut: the model
    cites seqs and resolves times against dates."""
    lines = [
        f"[{m.seq}] {m.created_at:%Y-%m-%d} {m.role.value}: {' '.join(m.content.split())}"
        for m in transcript
        if m.role in (Role.USER, Role.ASSISTANT) and m.content.strip()
    ]
    return _newest(lines, max_chars)


def request_body(model: str, instructions: str, transcript_text: str) -> bytes:
    messages = [
        {"role": "system", "content": instructions},
        {"role": "user", "content": f"Transcript:\n{transcript_text}"},
    ]
    payload = {"model": model, "temperature": 0, "response_format": {"type": "json_object"}}
    return json.dumps({**payload, "messages": messages}, ensure_ascii=False).encode("utf-8")


def parse_reply(raw: bytes, transcript: Sequence[Message]) -> list[ExtractedMemory]:
    """The memories in a chat completion, each validated against the transcript; items that do
    not hold up are dropped. ReplyError when the reply has no list of memories at all."""
    found = json.loads(_without_fences(_message_content(json.loads(raw.decode("utf-8")))))
    items = found.get("memories") if isinstance(found, dict) else found
    if not isinstance(items, list):
        raise ReplyError("no list of memories in the reply")
    said = {m.seq: m for m in transcript}
    memories: dict[str, ExtractedMemory] = {}
    for item in items:
        memory = _memory(item, said) if isinstance(item, dict) else None
        if memory is not None:
            memories.setdefault(normalized(memory.text), memory)
    return list(memories.values())[:MAX_MEMORIES]


def _memory(item: Mapping[str, Any], said: Mapping[int, Message]) -> ExtractedMemory | None:
    text, kind = item.get("text"), item.get("kind")
    if not isinstance(text, str) or not text.strip() or kind not in set(MemoryKind):
        return None
    span = _span(item.get("from_seq"), item.get("to_seq", item.get("from_seq")), said)
    if span is None:
        return None
    kind = MemoryKind(kind)
    when = _when(item.get("event_time"), said[span[0]].created_at) if kind is MemoryKind.EVENT else None
    return ExtractedMemory(
        shorten(" ".join(text.split()), MAX_MEMORY_CHARS),
        kind,
        *span,
        topics=_labels(item.get("topics"), MAX_TOPICS),
        entities=_labels(item.get("entities"), MAX_ENTITIES),
        event_time=when,
    )


def _span(first: object, last: object, said: Mapping[int, Message]) -> tuple[int, int] | None:
    """Both seqs must be messages of the transcript, in order (bools are not seqs)."""
    if not all(isinstance(seq, int) and not isinstance(seq, bool) and seq in said for seq in (first, last)):
        return None
    assert isinstance(first, int) and isinstance(last, int)
    return (first, last) if first <= last else None


def _when(value: object, stated: datetime) -> datetime:
    """The model's time if it parses (in the message's zone when it names none), else when the
    message was written."""
    if not isinstance(value, str):
        return stated
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        return stated
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=stated.tzinfo)


def _labels(value: object, most: int) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    cleaned = (shorten(" ".join(v.split()), _LABEL_CHARS) for v in value if isinstance(v, str))
    return tuple(dict.fromkeys(label for label in cleaned if label))[:most]
