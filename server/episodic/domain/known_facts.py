"""The "[Known Facts]" message: the user's long-term memories found for this turn (and the
session data keys the agent asked for), as many as fit its allowance, best first. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from episodic.domain.context import RecalledMemory, RenderedMessage, Section
from episodic.domain.json_text import json_text
from episodic.domain.model import JsonValue, Role
from episodic.domain.reducers import MESSAGE_OVERHEAD, CountTokens, fit_in_order, rendered

FACTS_HEADER = "[Known Facts]\nWhat you know about this user (from earlier conversations and this one):\n"
SESSION_HEADER = "Session data:\n"
MAX_VALUE_CHARS = 500  # a session value is rendered cut to this


@dataclass(frozen=True, slots=True)
class KnownFact:
    memory_id: str
    text: str
    kind: str
    score: float
    pending: bool = False
    event_time: datetime | None = None


def facts_block(
    facts: Sequence[KnownFact], session: Sequence[tuple[str, JsonValue]], allowance: int, count: CountTokens
) -> tuple[RenderedMessage | None, tuple[RecalledMemory, ...], tuple[str, ...]]:
    """The message (None when nothing fits or nothing was found), what was found with its
    rendered flag, and the session keys rendered."""
    lines = [_line(f) for f in facts]
    values = [f"- {key}: {_value(value)}\n" for key, value in session]
    room = allowance - count(FACTS_HEADER + SESSION_HEADER) - MESSAGE_OVERHEAD
    chosen = fit_in_order(lines, room, count)
    room -= sum(count(lines[i]) for i in chosen)
    kept = fit_in_order(values, room, count)
    while chosen or kept:
        message = rendered(Role.CONTEXT, _text(lines, chosen, values, kept), Section.KNOWN_FACTS, count)
        if message.tokens <= allowance:
            return message, _found(facts, chosen), tuple(session[i][0] for i in kept)
        (kept if kept else chosen).pop()  # counts are not exactly additive
    return None, _found(facts, []), ()


def _text(lines: Sequence[str], chosen: Sequence[int], values: Sequence[str], kept: Sequence[int]) -> str:
    text = FACTS_HEADER + "".join(lines[i] for i in chosen)
    if kept:
        text += SESSION_HEADER + "".join(values[i] for i in kept)
    return text.rstrip("\n")


def _line(f: KnownFact) -> str:
    when = f", {f.event_time.date().isoformat()}" if f.event_time else ""
    return f"- ({f.kind}{when}) {' '.join(f.text.split())}\n"


def _value(value: JsonValue) -> str:
    text = value if isinstance(value, str) else json_text(value, sort_keys=True)
    return " ".join(text.split())[:MAX_VALUE_CHARS]


def _found(facts: Sequence[KnownFact], chosen: Sequence[int]) -> tuple[RecalledMemory, ...]:
    picked = set(chosen)
    return tuple(RecalledMemory(f.memory_id, f.score, i in picked, f.pending) for i, f in enumerate(facts))
