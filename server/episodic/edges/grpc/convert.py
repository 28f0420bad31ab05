"""Proto <-> domain conversions, one small function per type and direction. Values the
domain cannot represent (unknown enum numbers, NaN in JSON) are rejected here, naming the
field; every other rule lives in the domain."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TypeVar, cast

from google.protobuf import duration_pb2, struct_pb2, timestamp_pb2
from google.protobuf.json_format import MessageToDict

from episodic.domain.agent_deletion import AgentDeleted
from episodic.domain.agents import AgentDraft, MemoryDraft
from episodic.domain.erasure import Receipt
from episodic.domain.inspection import UserSummary
from episodic.domain.model import (
    Agent,
    CloseReason,
    Episode,
    EpisodeState,
    JsonObject,
    JsonValue,
    MemoryConfig,
    Message,
    NewMessage,
    PiiPolicy,
    RecallMode,
    Role,
    ToolCall,
    ToolResult,
)
from episodic.domain.recall import Digest, DigestState, SearchMode, Signal, Snippet
from episodic.errors import InvalidArgument
from episodic.service.recall import SearchRequest
from episodic.v1 import agent_pb2, agent_service_pb2, episode_pb2, episode_service_pb2

E = TypeVar("E")
K = TypeVar("K", bound=int)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)  # what Timestamps count from (time_out)

ROLES: dict[episode_pb2.Role.ValueType, Role] = {
    episode_pb2.ROLE_SYSTEM: Role.SYSTEM,
    episode_pb2.ROLE_CONTEXT: Role.CONTEXT,
    episode_pb2.ROLE_USER: Role.USER,
    episode_pb2.ROLE_ASSISTANT: Role.ASSISTANT,
    episode_pb2.ROLE_TOOL: Role.TOOL,
}
STATES: dict[episode_pb2.Episode.State.ValueType, EpisodeState] = {
    episode_pb2.Episode.STATE_OPEN: EpisodeState.OPEN,
    episode_pb2.Episode.STATE_CLOSED: EpisodeState.CLOSED,
}
CLOSE_REASONS: dict[episode_pb2.CloseReason.ValueType, CloseReason] = {
    episode_pb2.CLOSE_REASON_USER_ENDED: CloseReason.USER_ENDED,
    episode_pb2.CLOSE_REASON_AGENT_DECISION: CloseReason.AGENT_DECISION,
    episode_pb2.CLOSE_REASON_IDLE_TIMEOUT: CloseReason.IDLE_TIMEOUT,
}
DIGEST_STATES: dict[episode_pb2.DigestState.ValueType, DigestState] = {
    episode_pb2.DIGEST_STATE_PENDING: DigestState.PENDING,
    episode_pb2.DIGEST_STATE_READY: DigestState.READY,
    episode_pb2.DIGEST_STATE_FAILED: DigestState.FAILED,
}
SEARCH_MODES: dict[episode_service_pb2.SearchMode.ValueType, SearchMode] = {
    episode_service_pb2.SEARCH_MODE_RECENCY: SearchMode.RECENCY,
    episode_service_pb2.SEARCH_MODE_SEMANTIC: SearchMode.SEMANTIC,
    episode_service_pb2.SEARCH_MODE_HYBRID: SearchMode.HYBRID,
}
SIGNALS: dict[episode_service_pb2.MatchSignal.ValueType, Signal] = {
    episode_service_pb2.MATCH_SIGNAL_RECENCY: Signal.RECENCY,
    episode_service_pb2.MATCH_SIGNAL_SEMANTIC: Signal.SEMANTIC,
    episode_service_pb2.MATCH_SIGNAL_LEXICAL: Signal.LEXICAL,
}
RECALL_MODES: dict[agent_pb2.RecallMode.ValueType, RecallMode] = {
    agent_pb2.RECALL_MODE_NONE: RecallMode.NONE,
    agent_pb2.RECALL_MODE_RECENCY: RecallMode.RECENCY,
    agent_pb2.RECALL_MODE_SEMANTIC: RecallMode.SEMANTIC,
    agent_pb2.RECALL_MODE_HYBRID: RecallMode.HYBRID,
}
PII_POLICIES: dict[agent_pb2.PiiPolicy.ValueType, PiiPolicy] = {
    agent_pb2.PII_POLICY_OFF: PiiPolicy.OFF,
    agent_pb2.PII_POLICY_REDACT: PiiPolicy.REDACT,
}


def _invert(table: Mapping[K, E]) -> dict[E, K]:
    return {v: k for k, v in table.items()}


ROLE_NUMBERS = _invert(ROLES)
STATE_NUMBERS = _invert(STATES)
CLOSE_REASON_NUMBERS = _invert(CLOSE_REASONS)
RECALL_MODE_NUMBERS = _invert(RECALL_MODES)
DIGEST_STATE_NUMBERS = _invert(DIGEST_STATES)
SIGNAL_NUMBERS = _invert(SIGNALS)
PII_POLICY_NUMBERS = _invert(PII_POLICIES)


def enum_in(table: Mapping[K, E], number: int, field: str, *, required: bool) -> E | None:
    """Maps a proto enum number; 0 (unspecified) is None, or an error when required."""
    if number in table:
        return table[cast(K, number)]
    if number == 0 and not required:
        return None
    problem = "is required" if number == 0 else f"has unknown value {number}"
    raise InvalidArgument.of(field, problem)


# --- well-known types -------------------------------------------------------------------


# google.protobuf's own bounds (duration.proto, timestamp.proto); its Python helpers do
# not enforce them, and a value outside them is not a Duration or a Timestamp at all.
MAX_DURATION_SECONDS = 315_576_000_000
MAX_NANOS = 999_999_999
MIN_TIMESTAMP_SECONDS = -62_135_596_800  # 0001-01-01T00:00:00Z
MAX_TIMESTAMP_SECONDS = 253_402_300_799  # 9999-12-31T23:59:59Z


def time_in(ts: timestamp_pb2.Timestamp, field: str) -> datetime:
    if not MIN_TIMESTAMP_SECONDS <= ts.seconds <= MAX_TIMESTAMP_SECONDS:
        raise InvalidArgument.of(field, "seconds must fall within 0001-01-01 and 9999-12-31 (UTC)")
    if not 0 <= ts.nanos <= MAX_NANOS:
        raise InvalidArgument.of(field, f"nanos must be between 0 and {MAX_NANOS}")
    try:
        return ts.ToDatetime(tzinfo=UTC)
    except (ValueError, OverflowError) as exc:
        raise InvalidArgument.of(field, "is not a valid timestamp") from exc


def optional_time_in(parent: object, name: str, field: str) -> datetime | None:
    if not parent.HasField(name):  # type: ignore[attr-defined]
        return None
    return time_in(getattr(parent, name), field)


def time_out(value: datetime) -> timestamp_pb2.Timestamp:
    """Timestamp.FromDatetime's value (a naive time is UTC) in ~1.3 µs against its ~4.2:
    a search's hits carry two or three each."""
    since = (value if value.tzinfo is not None else value.replace(tzinfo=UTC)) - _EPOCH
    seconds = since.days * 86_400 + since.seconds
    return timestamp_pb2.Timestamp(seconds=seconds, nanos=since.microseconds * 1000)


def duration_in(d: duration_pb2.Duration, field: str) -> timedelta:
    if abs(d.seconds) > MAX_DURATION_SECONDS:
        raise InvalidArgument.of(field, f"seconds must be within ±{MAX_DURATION_SECONDS:,}")
    if abs(d.nanos) > MAX_NANOS:
        raise InvalidArgument.of(field, f"nanos must be within ±{MAX_NANOS:,}")
    if d.seconds * d.nanos < 0:
        raise InvalidArgument.of(field, "seconds and nanos must have the same sign")
    try:
        return d.ToTimedelta()
    except (ValueError, OverflowError) as exc:
        raise InvalidArgument.of(field, "is not a valid duration") from exc


def duration_out(value: timedelta) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromTimedelta(value)
    return d


def struct_in(s: struct_pb2.Struct, field: str) -> JsonObject:
    return _to_json(s, field)  # type: ignore[return-value]


def value_in(v: struct_pb2.Value, field: str) -> JsonValue:
    return _to_json(v, field)


def _to_json(message: struct_pb2.Struct | struct_pb2.Value, field: str) -> JsonValue:
    """Struct/Value can hold what JSON cannot (NaN, Infinity, a Value with no kind)."""
    try:
        return MessageToDict(message)
    except (ValueError, TypeError, AttributeError) as exc:
        raise InvalidArgument.of(field, f"is not valid JSON: {exc}") from exc


def struct_out(data: JsonObject) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(data)
    return s


def value_out(data: JsonValue) -> struct_pb2.Value:
    v = struct_pb2.Value()
    if data is None:
        v.null_value = struct_pb2.NULL_VALUE
        return v
    holder = struct_pb2.Struct()
    holder.update({"v": data})
    v.CopyFrom(holder.fields["v"])
    return v


# --- messages ---------------------------------------------------------------------------


def new_message_in(m: episode_pb2.MessageInput, field: str) -> NewMessage:
    role = enum_in(ROLES, m.role, f"{field}.role", required=True)
    assert role is not None
    return NewMessage(
        role=role,
        content=m.content,
        client_message_id=m.client_message_id or None,
        created_at=optional_time_in(m, "create_time", f"{field}.create_time"),
        metadata=struct_in(m.metadata, f"{field}.metadata"),
        tool_calls=tuple(tool_call_in(c, f"{field}.tool_calls[{i}]") for i, c in enumerate(m.tool_calls)),
        tool_result=(
            tool_result_in(m.tool_result, f"{field}.tool_result") if m.HasField("tool_result") else None
        ),
    )


def tool_call_in(c: episode_pb2.ToolCall, field: str) -> ToolCall:
    return ToolCall(c.tool_call_id, c.tool_name, struct_in(c.input, f"{field}.input"))


def tool_result_in(r: episode_pb2.ToolResult, field: str) -> ToolResult:
    return ToolResult(
        tool_call_id=r.tool_call_id,
        output=value_in(r.output, f"{field}.output") if r.HasField("output") else None,
        succeeded=r.succeeded,
        error=r.error,
        called_at=optional_time_in(r, "called_at", f"{field}.called_at"),
        duration=duration_in(r.duration, f"{field}.duration") if r.HasField("duration") else None,
    )


def message_out(m: Message) -> episode_pb2.Message:
    out = episode_pb2.Message(
        episode_id=m.episode_id,
        seq=m.seq,
        role=ROLE_NUMBERS[m.role],
        content=m.content,
        token_count=m.token_count,
        token_encoding=m.token_encoding,
        client_message_id=m.client_message_id or "",
        create_time=time_out(m.created_at),
        tool_calls=[tool_call_out(c) for c in m.tool_calls],
    )
    if m.metadata:
        out.metadata.CopyFrom(struct_out(m.metadata))
    if m.tool_result is not None:
        out.tool_result.CopyFrom(tool_result_out(m.tool_result))
    if m.retracted_at is not None:
        out.retract_time.CopyFrom(time_out(m.retracted_at))
    return out


def tool_call_out(c: ToolCall) -> episode_pb2.ToolCall:
    return episode_pb2.ToolCall(tool_call_id=c.tool_call_id, tool_name=c.tool_name, input=struct_out(c.input))


def tool_result_out(r: ToolResult) -> episode_pb2.ToolResult:
    out = episode_pb2.ToolResult(
        tool_call_id=r.tool_call_id, output=value_out(r.output), succeeded=r.succeeded, error=r.error
    )
    if r.called_at is not None:
        out.called_at.CopyFrom(time_out(r.called_at))
    if r.duration is not None:
        out.duration.CopyFrom(duration_out(r.duration))
    return out


def episode_out(e: Episode) -> episode_pb2.Episode:
    out = episode_pb2.Episode(
        episode_id=e.episode_id,
        agent_id=e.agent_id,
        user_id=e.user_id,
        state=STATE_NUMBERS[e.state],
        start_time=time_out(e.started_at),
        close_note=e.close_note,
        metadata=struct_out(e.metadata),
        message_count=e.message_count,
        token_count=e.token_count,
        last_activity_time=time_out(e.last_activity_at),
        token_encoding=e.token_encoding,
    )
    if e.ended_at is not None:
        out.end_time.CopyFrom(time_out(e.ended_at))
    if e.close_reason is not None:
        out.close_reason = CLOSE_REASON_NUMBERS[e.close_reason]
    if e.digest is not None:
        out.digest.CopyFrom(digest_out(e.digest))
    return out


def digest_out(d: Digest) -> episode_pb2.EpisodeDigest:
    return episode_pb2.EpisodeDigest(
        state=DIGEST_STATE_NUMBERS[d.state],
        summary=d.summary,
        key_facts=list(d.key_facts),
        embedding_model=d.embedding_model,
        attempts=d.attempts,
        last_error=d.last_error,
        update_time=time_out(d.updated_at),
    )


# --- recall -----------------------------------------------------------------------------


def search_in(r: episode_service_pb2.SearchEpisodesRequest) -> SearchRequest:
    return SearchRequest(
        agent_id=r.agent_id,
        user_id=r.user_id,
        mode=enum_in(SEARCH_MODES, r.mode, "mode", required=False),
        query=r.query,
        top_k=r.top_k,
        min_score=r.min_score if r.HasField("min_score") else None,
        ended_after=optional_time_in(r, "ended_after", "ended_after"),
        ended_before=optional_time_in(r, "ended_before", "ended_before"),
    )


def snippet_out(s: Snippet) -> episode_service_pb2.EpisodeSnippet:
    out = episode_service_pb2.EpisodeSnippet(
        episode_id=s.episode_id,
        start_time=time_out(s.started_at),
        summary=s.summary,
        key_facts=list(s.key_facts),
        score=s.score,
        signals=[SIGNAL_NUMBERS[signal] for signal in s.signals],
    )
    if s.ended_at is not None:
        out.end_time.CopyFrom(time_out(s.ended_at))
    return out


# --- agents -----------------------------------------------------------------------------


def agent_draft_in(a: agent_pb2.Agent, field: str) -> AgentDraft:
    return AgentDraft(
        agent_id=a.agent_id,
        display_name=a.display_name,
        system_prompt=a.system_prompt,
        model=a.model,
        token_encoding=a.token_encoding,
        memory=memory_draft_in(a.memory_config, f"{field}.memory_config"),
    )


def memory_draft_in(m: agent_pb2.MemoryConfig, field: str) -> MemoryDraft:
    """Unset optional fields stay None so the domain can tell them from zero."""
    has = m.HasField
    return MemoryDraft(
        max_working_memory_tokens=m.max_working_memory_tokens if has("max_working_memory_tokens") else None,
        context_window_tokens=m.context_window_tokens if has("context_window_tokens") else None,
        context_ceiling_percent=m.context_ceiling_percent if has("context_ceiling_percent") else None,
        recall_mode=enum_in(RECALL_MODES, m.recall_mode, f"{field}.recall_mode", required=False),
        recall_top_k=m.recall_top_k if has("recall_top_k") else None,
        recall_min_score=m.recall_min_score if has("recall_min_score") else None,
        tool_results_kept_verbatim=m.tool_results_kept_verbatim
        if has("tool_results_kept_verbatim")
        else None,
        idle_timeout=duration_in(m.idle_timeout, f"{field}.idle_timeout") if has("idle_timeout") else None,
        retention_days=m.retention_days if has("retention_days") else None,
        pii_policy=enum_in(PII_POLICIES, m.pii_policy, f"{field}.pii_policy", required=False),
        known_facts=m.known_facts if has("known_facts") else None,
        memory_top_k=m.memory_top_k if has("memory_top_k") else None,
        memory_min_score=m.memory_min_score if has("memory_min_score") else None,
        session_data_keys=tuple(m.session_data_keys.keys) if has("session_data_keys") else None,
        memory_extraction_prompt=m.memory_extraction_prompt if has("memory_extraction_prompt") else None,
        extract_memories=m.extract_memories if has("extract_memories") else None,
        knowledge=m.knowledge if has("knowledge") else None,
        knowledge_top_k=m.knowledge_top_k if has("knowledge_top_k") else None,
        knowledge_min_score=m.knowledge_min_score if has("knowledge_min_score") else None,
        knowledge_budget_percent=m.knowledge_budget_percent if has("knowledge_budget_percent") else None,
        known_facts_budget_percent=m.known_facts_budget_percent
        if has("known_facts_budget_percent")
        else None,
        recall_budget_percent=m.recall_budget_percent if has("recall_budget_percent") else None,
        earlier_budget_percent=m.earlier_budget_percent if has("earlier_budget_percent") else None,
    )


def populated_agent_paths(a: agent_pb2.Agent) -> list[str]:
    """The implied update mask of AIP-134: every field set to a non-default value."""
    top = [name for name in ("display_name", "system_prompt", "model", "token_encoding") if getattr(a, name)]
    memory = [f"memory_config.{field.name}" for field, _ in a.memory_config.ListFields()]
    return top + memory


def agent_out(a: Agent) -> agent_pb2.Agent:
    return agent_pb2.Agent(
        agent_id=a.agent_id,
        display_name=a.display_name,
        system_prompt=a.system_prompt,
        model=a.model,
        token_encoding=a.token_encoding,
        memory_config=memory_out(a.memory),
        create_time=time_out(a.created_at),
        update_time=time_out(a.updated_at),
    )


def memory_out(m: MemoryConfig) -> agent_pb2.MemoryConfig:
    return agent_pb2.MemoryConfig(
        max_working_memory_tokens=m.max_working_memory_tokens,
        context_window_tokens=m.context_window_tokens,
        context_ceiling_percent=m.context_ceiling_percent,
        recall_mode=RECALL_MODE_NUMBERS[m.recall_mode],
        recall_top_k=m.recall_top_k,
        recall_min_score=m.recall_min_score,
        tool_results_kept_verbatim=m.tool_results_kept_verbatim,
        idle_timeout=duration_out(m.idle_timeout),
        retention_days=m.retention_days,
        pii_policy=PII_POLICY_NUMBERS.get(m.pii_policy, agent_pb2.PII_POLICY_UNSPECIFIED),
        known_facts=m.known_facts,
        memory_top_k=m.memory_top_k,
        memory_min_score=m.memory_min_score,
        session_data_keys=agent_pb2.SessionDataKeys(keys=m.session_data_keys),
        memory_extraction_prompt=m.memory_extraction_prompt,
        extract_memories=m.extract_memories,
        knowledge=m.knowledge,
        knowledge_top_k=m.knowledge_top_k,
        knowledge_min_score=m.knowledge_min_score,
        knowledge_budget_percent=m.knowledge_budget_percent,
        known_facts_budget_percent=m.known_facts_budget_percent,
        recall_budget_percent=m.recall_budget_percent,
        earlier_budget_percent=m.earlier_budget_percent,
    )


def user_summary_out(u: UserSummary) -> episode_service_pb2.UserSummary:
    return episode_service_pb2.UserSummary(
        user_id=u.user_id,
        episode_count=u.episodes,
        open_episode_count=u.open_episodes,
        memory_count=u.memories,
        last_activity_time=time_out(u.last_activity_at),
    )


def agent_deletion_out(d: AgentDeleted) -> agent_service_pb2.AgentDeletionReceipt:
    return agent_service_pb2.AgentDeletionReceipt(
        agent_id=d.agent_id,
        delete_time=time_out(d.deleted_at),
        users=d.users,
        erasure_ids=d.erasure_ids,
        index_vectors=d.index_vectors,
        storage_scrubbed=d.storage_scrubbed,
        **d.counts,
    )


def receipt_out(r: Receipt) -> episode_service_pb2.ErasureReceipt:
    return episode_service_pb2.ErasureReceipt(
        erasure_id=r.erasure_id,
        erase_time=time_out(r.erased_at),
        user_hash=r.user_hash,
        index_vectors=r.index_vectors,
        storage_scrubbed=r.storage_scrubbed,
        **r.counts,
    )
