"""The deterministic reducers that run on every assembly: old tool results become short
stubs, tool-call/tool-result pairs are grouped so nothing splits them, and the history
tail slides by tokens, never by message count. Pure."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from episodic.domain.context import RenderedMessage, Section
from episodic.domain.json_text import json_text
from episodic.domain.model import Message, Role, ToolResult
from episodic.domain.tail import Columns, Tail

CountTokens = Callable[[str], int]

# OpenAI's chat format costs 3 tokens per message plus the role name (one token for every
# role we render, in cl100k_base and o200k_base), and 3 tokens once to prime the reply.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_ROLE = 1
MESSAGE_OVERHEAD = TOKENS_PER_MESSAGE + TOKENS_PER_ROLE
REPLY_PRIMING = 3


def rendered(role: Role, content: str, section: Section, count: CountTokens) -> RenderedMessage:
    """A message of generated text (system prompt, recall, user message): counted once."""
    return RenderedMessage(role, content, section, count(content) + MESSAGE_OVERHEAD)


def from_log(message: Message) -> RenderedMessage:
    """A log message, costed from its stored count: history is never re-tokenized."""
    return history_views([message])[0]


# A history view is made per tail message per turn (a working set keeps none: ~100 bytes a
# message), so the frozen dataclass's __init__ (one object.__setattr__ a field, ~0.8 us a
# view) is bypassed: a bare object filled through its slots' descriptors, ~0.4 us. Every
# field is set, so the set must be RenderedMessage's fields exactly.
_VIEW_FIELDS = ("role", "content", "section", "tokens", "tool_calls", "tool_call_id", "seq", "stubbed")
if tuple(f.name for f in dataclasses.fields(RenderedMessage)) != _VIEW_FIELDS:
    raise TypeError("history_views sets RenderedMessage's fields one by one: update _VIEW_FIELDS")
_SETTERS = tuple(getattr(RenderedMessage, name).__set__ for name in _VIEW_FIELDS)


def history_views(tail: Sequence[Message]) -> list[RenderedMessage]:
    """`from_log` of each message, in order (equal to what RenderedMessage(...) would make)."""
    return _views(_columns(tail))


def _columns(tail: Sequence[Message]) -> Columns:
    """What rendering reads of each message: a working set's `Tail` holds it as columns."""
    return tail.columns() if isinstance(tail, Tail) else Columns.of(tail)


def _views(columns: Columns) -> list[RenderedMessage]:
    role, content, section, tokens, calls, call_id, seq, stubbed = _SETTERS
    new, cls, history, views = object.__new__, RenderedMessage, Section.HISTORY, []
    for role_of, text, token_count, tool_calls, result, seq_of in zip(*columns, strict=True):
        view = new(cls)
        role(view, role_of)
        content(view, text if text or result is None else _visible_text(text, result))
        section(view, history)
        tokens(view, token_count + MESSAGE_OVERHEAD)
        calls(view, tool_calls)
        call_id(view, result.tool_call_id if result is not None else "")
        seq(view, seq_of)
        stubbed(view, False)
        views.append(view)
    return views


# A stub ("[tool result elided (ok); log seq 1]") is at least 12 tokens in cl100k_base and
# o200k_base; the floor only has to be a lower bound (tests check it).
STUB_TOKENS_FLOOR = 10


def least_tokens(message: Message) -> int:
    """The fewest tokens a log message can cost in a history tail: a tool result may be
    stubbed, anything else renders at its stored count. A tail whose least cost passes an
    allowance holds every turn the allowance can show."""
    full = message.token_count + MESSAGE_OVERHEAD
    if message.role is Role.TOOL and message.tool_result is not None:
        return min(full, STUB_TOKENS_FLOOR + MESSAGE_OVERHEAD)
    return full


# New messages up to this many tokens are all held (and so summarized whole when they do
# not fit); beyond it, only the newest that the allowance needs.
HELD_WHOLE_TOKENS = 8_000  # the default budget


@dataclass(slots=True)
class TailReach:
    """How far back, newest first, a working set's tail must reach: until its least cost
    passes the allowance (every turn the allowance can show is held), it holds more than
    HELD_WHOLE_TOKENS, and it starts a turn (not at a tool result, whose call comes first)."""

    allowance: int
    least: int = 0
    full: int = 0

    def reached_with(self, message: Message) -> bool:
        """Adds the next older message; True when the tail may start at it."""
        self.least += least_tokens(message)
        self.full += message.token_count + MESSAGE_OVERHEAD
        enough = self.least > self.allowance and self.full > HELD_WHOLE_TOKENS
        return enough and message.role is not Role.TOOL


def _visible_text(content: str, result: ToolResult | None) -> str:
    """A tool message without text shows its structured result (what its count covers)."""
    if content or result is None:
        return content
    parts = [json_text(result.output)] if result.output is not None else []
    if result.error:
        parts.append(f"error: {result.error}")
    return "\n".join(parts)


def stub_text(tool_name: str, succeeded: bool, seq: int) -> str:
    outcome = "ok" if succeeded else "failed"
    return f"[{tool_name} result elided ({outcome}); log seq {seq}]"


@dataclass(frozen=True, slots=True)
class Stubbed:
    messages: list[RenderedMessage]
    stubbed: int


def stub_old_tool_results(tail: Sequence[Message], keep: int, count: CountTokens) -> Stubbed:
    """Renders the tail; all but the `keep` newest tool results become ~10-token stubs."""
    columns = _columns(tail)
    out = _views(columns)
    roles, results = columns.roles, columns.tool_results
    with_result = [i for i, r in enumerate(results) if r is not None and roles[i] is Role.TOOL]
    old = with_result[: max(len(with_result) - keep, 0)]
    if not old:
        return Stubbed(out, 0)
    names = {call.tool_call_id: call.tool_name for calls in columns.tool_calls for call in calls}
    for i in old:
        out[i] = _stub(results[i], columns.seqs[i], names, count)
    return Stubbed(out, len(old))


def _stub(result: ToolResult | None, seq: int, names: dict[str, str], count: CountTokens) -> RenderedMessage:
    assert result is not None
    text = stub_text(names.get(result.tool_call_id, "tool"), result.succeeded, seq)
    return RenderedMessage(
        Role.TOOL,
        text,
        Section.HISTORY,
        count(text) + MESSAGE_OVERHEAD,
        tool_call_id=result.tool_call_id,
        seq=seq,
        stubbed=True,
    )


class Turn(NamedTuple):
    """Messages that stand or fall together: an assistant message that calls tools and the
    results answering it, or any single other message. A tuple: assembly makes one per
    history message every turn, and a frozen dataclass cost several times more to make."""

    messages: tuple[RenderedMessage, ...]
    tokens: int

    @property
    def last_seq(self) -> int:
        return self.messages[-1].seq


NO_CALLS: frozenset[str] = frozenset()


def group_turns(messages: Sequence[RenderedMessage]) -> list[Turn]:
    """In order; a message that calls tools opens a turn its results join (until another
    message comes between), every other message is a turn of its own."""
    turns: list[Turn] = []
    group: list[RenderedMessage] = []  # the open turn of a message that called tools
    open_calls: set[str] | frozenset[str] = NO_CALLS
    for m in messages:
        if open_calls and m.role is Role.TOOL and m.tool_call_id in open_calls:
            group.append(m)
            open_calls = open_calls - {m.tool_call_id}
            continue
        if group:
            turns.append(Turn(tuple(group), sum([g.tokens for g in group])))
            group = []
        if m.tool_calls:
            group, open_calls = [m], {c.tool_call_id for c in m.tool_calls}
        else:
            turns.append(Turn((m,), m.tokens))
            open_calls = NO_CALLS
    if group:
        turns.append(Turn(tuple(group), sum([g.tokens for g in group])))
    return turns


def newest_that_fit(turns: Sequence[Turn], allowance: int) -> int:
    """How many of the newest turns fit in `allowance` tokens, as a contiguous tail."""
    used, kept = 0, 0
    for turn in reversed(turns):
        if used + turn.tokens > allowance:
            break
        used += turn.tokens
        kept += 1
    return kept


def tokens_of(turns: Sequence[Turn]) -> int:
    return sum([t.tokens for t in turns])


def fit_in_order(entries: Sequence[str], allowance: int, count: CountTokens) -> list[int]:
    """Indexes of the entries kept, in order, each if it still fits (a later, smaller one may)."""
    chosen, used = [], 0
    for i, entry in enumerate(entries):
        cost = count(entry)
        if used + cost <= allowance:
            chosen.append(i)
            used += cost
    return chosen
