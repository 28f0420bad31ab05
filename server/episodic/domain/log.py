"""Rules of appending to an episode's log: dense sequence numbers, retry deduplication by
client message id, and tool calls joined with their results. `plan_append` decides; the
store executes the plan inside the transaction that loaded its inputs."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime

from episodic.domain.json_text import json_text
from episodic.domain.model import (
    Episode,
    EpisodeState,
    Message,
    NewMessage,
    ToolCallRecord,
    ToolResult,
)
from episodic.errors import AlreadyExists, FailedPrecondition


@dataclass(frozen=True, slots=True)
class PreparedMessage:
    """A validated message with its token count, ready to append."""

    new: NewMessage
    token_count: int
    token_encoding: str
    field: str = "message"  # where this message sits in the request, for error messages

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.new)


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message already in the log, with the fingerprint it was written with."""

    message: Message
    fingerprint: str


@dataclass(frozen=True, slots=True)
class AppendContext:
    """What the store loaded, under lock, for one append."""

    episode: Episode
    by_client_id: Mapping[str, StoredMessage]
    tool_calls: Mapping[str, ToolCallRecord]


@dataclass(slots=True)
class AppendPlan:
    """What to write: new rows, new tool calls, results to attach, and episode counters."""

    results: list[tuple[Message, bool]] = field(default_factory=list)
    inserts: list[tuple[Message, str]] = field(default_factory=list)
    new_tool_calls: list[ToolCallRecord] = field(default_factory=list)
    tool_results: list[ToolCallRecord] = field(default_factory=list)
    token_delta: int = 0

    @property
    def last_seq(self) -> int:
        return self.inserts[-1][0].seq if self.inserts else 0


def fingerprint(msg: NewMessage) -> str:
    """Identity of a message's content for retry deduplication (time and labels excluded)."""
    payload = {
        "role": msg.role.value,
        "content": msg.content,
        "tool_calls": [asdict(c) for c in msg.tool_calls],
        "tool_result": _result_identity(msg),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _result_identity(msg: NewMessage) -> object:
    r = msg.tool_result
    if r is None:
        return None
    return [r.tool_call_id, r.output, r.succeeded, r.error]


def plan_append(ctx: AppendContext, batch: Sequence[PreparedMessage], now: datetime) -> AppendPlan:
    if ctx.episode.state is not EpisodeState.OPEN:
        raise FailedPrecondition(
            f"episode {ctx.episode.episode_id!r} is closed; open a new episode to continue",
            reason="EPISODE_CLOSED",
        )
    planner = _Planner(ctx, now)
    for item in batch:
        planner.add(item)
    return planner.plan


class _Planner:
    def __init__(self, ctx: AppendContext, now: datetime) -> None:
        self.ctx = ctx
        self.now = now
        self.plan = AppendPlan()
        self.next_seq = ctx.episode.message_count + 1
        self.seen: dict[str, StoredMessage] = dict(ctx.by_client_id)
        self.calls: dict[str, ToolCallRecord] = dict(ctx.tool_calls)

    def add(self, item: PreparedMessage) -> None:
        identity = item.fingerprint  # a hash of the content: made once per message
        replay = self._replay(item, identity)
        if replay is not None:
            self.plan.results.append((replay, True))
            return
        message = self._message(item)
        self._record_tools(item.field, item.new, message.seq)
        self.plan.inserts.append((message, identity))
        self.plan.results.append((message, False))
        self.plan.token_delta += item.token_count
        if item.new.client_message_id:
            self.seen[item.new.client_message_id] = StoredMessage(message, identity)

    def _replay(self, item: PreparedMessage, identity: str) -> Message | None:
        client_id = item.new.client_message_id
        stored = self.seen.get(client_id) if client_id else None
        if stored is None:
            return None
        if stored.fingerprint != identity:
            raise AlreadyExists(
                f"{item.field}.client_message_id {client_id!r} was already used for a "
                f"message with different content (seq {stored.message.seq})",
                reason="CLIENT_MESSAGE_ID_REUSED",
            )
        return stored.message

    def _message(self, item: PreparedMessage) -> Message:
        new = item.new
        seq = self.next_seq
        self.next_seq += 1
        return Message(
            episode_id=self.ctx.episode.episode_id,
            seq=seq,
            role=new.role,
            content=new.content,
            token_count=item.token_count,
            token_encoding=item.token_encoding,
            created_at=new.created_at or self.now,
            client_message_id=new.client_message_id,
            metadata=new.metadata,
            tool_calls=new.tool_calls,
            tool_result=new.tool_result,
        )

    def _record_tools(self, field: str, new: NewMessage, seq: int) -> None:
        for call in new.tool_calls:
            if call.tool_call_id in self.calls:
                raise AlreadyExists(
                    f"{field}.tool_calls: tool_call_id {call.tool_call_id!r} is already used in this episode",
                    reason="TOOL_CALL_ID_REUSED",
                )
            record = ToolCallRecord(call.tool_call_id, call.tool_name, call.input, call_seq=seq)
            self.calls[call.tool_call_id] = record
            self.plan.new_tool_calls.append(record)
        if new.tool_result is not None:
            self._attach_result(field, new, seq)

    def _attach_result(self, field: str, new: NewMessage, seq: int) -> None:
        assert new.tool_result is not None
        result = new.tool_result
        record = self.calls.get(result.tool_call_id)
        if record is None:
            raise FailedPrecondition(
                f"{field}.tool_result: no tool call {result.tool_call_id!r} was issued in this episode",
                reason="TOOL_CALL_UNKNOWN",
            )
        if record.result is not None:
            raise FailedPrecondition(
                f"{field}.tool_result: tool call {result.tool_call_id!r} already has "
                f"a result (seq {record.result_seq})",
                reason="TOOL_RESULT_DUPLICATE",
            )
        if result.called_at is None:
            result = _with_called_at(result, new.created_at or self.now)
        joined = ToolCallRecord(
            record.tool_call_id, record.tool_name, record.input, record.call_seq, result, seq
        )
        self.calls[result.tool_call_id] = joined
        self.plan.tool_results.append(joined)


def _with_called_at(result: ToolResult, when: datetime) -> ToolResult:
    return ToolResult(
        result.tool_call_id, result.output, result.succeeded, result.error, when, result.duration
    )


def countable_text(msg: NewMessage | Message) -> str:
    """The text whose tokens a message costs (and in which the inspector looks for a
    phrase): its content plus any tool payloads as JSON."""
    parts = [msg.content]
    for call in msg.tool_calls:
        parts.append(f"{call.tool_name}({json_text(call.input)})")
    if msg.tool_result is not None:
        parts.append(json_text(msg.tool_result.output))
        parts.append(msg.tool_result.error)
    return "\n".join(p for p in parts if p)
