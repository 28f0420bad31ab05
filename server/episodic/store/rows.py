"""Row <-> domain conversions, one small function per direction."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import RowMapping

from episodic.domain.model import (
    Agent,
    CloseReason,
    Episode,
    EpisodeState,
    JsonObject,
    MemoryConfig,
    Message,
    PiiPolicy,
    RecallMode,
    Role,
    ToolCall,
    ToolCallRecord,
    ToolResult,
)
from episodic.domain.recall import Digest, DigestState

# A row's columns by name: a RowMapping, or a plain dict of them (store/direct.py's rows).
Columns = Mapping[Any, Any]


def agent_values(agent: Agent) -> dict[str, Any]:
    m = agent.memory
    return {
        "tenant_id": agent.tenant_id,
        "agent_id": agent.agent_id,
        "display_name": agent.display_name,
        "system_prompt": agent.system_prompt,
        "model": agent.model,
        "token_encoding": agent.token_encoding,
        "encoding_pinned": agent.encoding_pinned,
        "max_working_memory_tokens": m.max_working_memory_tokens,
        "context_window_tokens": m.context_window_tokens,
        "context_ceiling_percent": m.context_ceiling_percent,
        "recall_mode": m.recall_mode.value,
        "recall_top_k": m.recall_top_k,
        "recall_min_score": m.recall_min_score,
        "tool_results_kept_verbatim": m.tool_results_kept_verbatim,
        "idle_timeout_seconds": m.idle_timeout.total_seconds(),
        "retention_days": m.retention_days,
        "pii_policy": m.pii_policy.value,
        "known_facts": m.known_facts,
        "memory_top_k": m.memory_top_k,
        "memory_min_score": m.memory_min_score,
        "session_data_keys": list(m.session_data_keys),
        "memory_extraction_prompt": m.memory_extraction_prompt,
        "extract_memories": m.extract_memories,
        "knowledge": m.knowledge,
        "knowledge_top_k": m.knowledge_top_k,
        "knowledge_min_score": m.knowledge_min_score,
        "knowledge_budget_percent": m.knowledge_budget_percent,
        "known_facts_budget_percent": m.known_facts_budget_percent,
        "recall_budget_percent": m.recall_budget_percent,
        "earlier_budget_percent": m.earlier_budget_percent,
        "created_at": agent.created_at,
        "updated_at": agent.updated_at,
    }


def agent_from_row(row: RowMapping, prefix: str = "") -> Agent:
    def col(name: str) -> Any:
        return row[prefix + name]

    memory = MemoryConfig(
        max_working_memory_tokens=col("max_working_memory_tokens"),
        context_window_tokens=col("context_window_tokens"),
        context_ceiling_percent=col("context_ceiling_percent"),
        recall_mode=RecallMode(col("recall_mode")),
        recall_top_k=col("recall_top_k"),
        recall_min_score=col("recall_min_score"),
        tool_results_kept_verbatim=col("tool_results_kept_verbatim"),
        idle_timeout=timedelta(seconds=col("idle_timeout_seconds")),
        retention_days=col("retention_days"),
        pii_policy=PiiPolicy(col("pii_policy")),
        known_facts=col("known_facts"),
        memory_top_k=col("memory_top_k"),
        memory_min_score=col("memory_min_score"),
        session_data_keys=tuple(col("session_data_keys") or ()),
        memory_extraction_prompt=col("memory_extraction_prompt"),
        extract_memories=col("extract_memories"),
        knowledge=col("knowledge"),
        knowledge_top_k=col("knowledge_top_k"),
        knowledge_min_score=col("knowledge_min_score"),
        knowledge_budget_percent=col("knowledge_budget_percent"),
        known_facts_budget_percent=col("known_facts_budget_percent"),
        recall_budget_percent=col("recall_budget_percent"),
        earlier_budget_percent=col("earlier_budget_percent"),
    )
    return Agent(
        tenant_id=col("tenant_id"),
        agent_id=col("agent_id"),
        display_name=col("display_name"),
        system_prompt=col("system_prompt"),
        model=col("model"),
        token_encoding=col("token_encoding"),
        encoding_pinned=col("encoding_pinned"),
        memory=memory,
        created_at=col("created_at"),
        updated_at=col("updated_at"),
    )


def episode_values(e: Episode) -> dict[str, Any]:
    return {
        "tenant_id": e.tenant_id,
        "episode_id": e.episode_id,
        "agent_id": e.agent_id,
        "user_id": e.user_id,
        "state": e.state.value,
        "token_encoding": e.token_encoding,
        "started_at": e.started_at,
        "ended_at": e.ended_at,
        "close_reason": e.close_reason.value if e.close_reason else None,
        "close_note": e.close_note,
        "metadata": dict(e.metadata),
        "message_count": e.message_count,
        "token_count": e.token_count,
        "last_activity_at": e.last_activity_at,
    }


def episode_from_row(row: Columns) -> Episode:
    reason = row["close_reason"]
    return Episode(
        tenant_id=row["tenant_id"],
        episode_id=row["episode_id"],
        agent_id=row["agent_id"],
        user_id=row["user_id"],
        state=EpisodeState(row["state"]),
        token_encoding=row["token_encoding"],
        started_at=row["started_at"],
        last_activity_at=row["last_activity_at"],
        metadata=row["metadata"] or {},
        ended_at=row["ended_at"],
        close_reason=CloseReason(reason) if reason else None,
        close_note=row["close_note"],
        message_count=row["message_count"],
        token_count=row["token_count"],
    )


def message_values(tenant_id: str, m: Message, fingerprint: str) -> dict[str, Any]:
    return {
        "tenant_id": tenant_id,
        "episode_id": m.episode_id,
        "seq": m.seq,
        "role": m.role.value,
        "content": m.content,
        "token_count": m.token_count,
        "token_encoding": m.token_encoding,
        "created_at": m.created_at,
        "client_message_id": m.client_message_id,
        "fingerprint": fingerprint,
        "metadata": dict(m.metadata) or None,
        "tool_calls": [_call_json(c) for c in m.tool_calls] or None,
        "tool_result": _result_json(m.tool_result) if m.tool_result else None,
    }


def message_from_row(row: Columns) -> Message:
    result = row["tool_result"]
    return Message(
        episode_id=row["episode_id"],
        seq=row["seq"],
        role=Role(row["role"]),
        content=row["content"],
        token_count=row["token_count"],
        token_encoding=row["token_encoding"],
        created_at=row["created_at"],
        client_message_id=row["client_message_id"],
        metadata=row["metadata"] or {},
        tool_calls=tuple(_call_from_json(c) for c in row["tool_calls"] or ()),
        tool_result=_result_from_json(result) if result else None,
        retracted_at=row.get("retracted_at"),
    )


def tool_call_values(tenant_id: str, episode_id: str, r: ToolCallRecord) -> dict[str, Any]:
    return {
        "tenant_id": tenant_id,
        "episode_id": episode_id,
        "tool_call_id": r.tool_call_id,
        "tool_name": r.tool_name,
        "input": dict(r.input),
        "call_seq": r.call_seq,
        **tool_result_values(r),
    }


def tool_result_values(r: ToolCallRecord) -> dict[str, Any]:
    res = r.result
    duration = res.duration.total_seconds() if res and res.duration is not None else None
    return {
        "has_result": res is not None,
        "output": res.output if res else None,
        "succeeded": res.succeeded if res else False,
        "error": res.error if res else "",
        "called_at": res.called_at if res else None,
        "duration_seconds": duration,
        "result_seq": r.result_seq or None,
    }


def tool_call_from_row(row: RowMapping) -> ToolCallRecord:
    result = None
    if row["has_result"]:
        seconds = row["duration_seconds"]
        result = ToolResult(
            tool_call_id=row["tool_call_id"],
            output=row["output"],
            succeeded=row["succeeded"],
            error=row["error"],
            called_at=row["called_at"],
            duration=timedelta(seconds=seconds) if seconds is not None else None,
        )
    return ToolCallRecord(
        tool_call_id=row["tool_call_id"],
        tool_name=row["tool_name"],
        input=row["input"] or {},
        call_seq=row["call_seq"],
        result=result,
        result_seq=row["result_seq"] or 0,
    )


def _call_json(c: ToolCall) -> JsonObject:
    return {"tool_call_id": c.tool_call_id, "tool_name": c.tool_name, "input": dict(c.input)}


def _call_from_json(data: dict[str, Any]) -> ToolCall:
    return ToolCall(data["tool_call_id"], data["tool_name"], data["input"])


def _result_json(r: ToolResult) -> JsonObject:
    return {
        "tool_call_id": r.tool_call_id,
        "output": r.output,
        "succeeded": r.succeeded,
        "error": r.error,
        "called_at": r.called_at.isoformat() if r.called_at else None,
        "duration_seconds": r.duration.total_seconds() if r.duration is not None else None,
    }


def _result_from_json(data: dict[str, Any]) -> ToolResult:
    called, seconds = data["called_at"], data["duration_seconds"]
    return ToolResult(
        tool_call_id=data["tool_call_id"],
        output=data["output"],
        succeeded=data["succeeded"],
        error=data["error"],
        called_at=datetime.fromisoformat(called) if called else None,
        duration=timedelta(seconds=seconds) if seconds is not None else None,
    )


def digest_values(d: Digest) -> dict[str, Any]:
    return {
        "tenant_id": d.tenant_id,
        "episode_id": d.episode_id,
        "agent_id": d.agent_id,
        "user_id": d.user_id,
        "state": d.state.value,
        "summary": d.summary,
        "key_facts": list(d.key_facts),
        "embedding_model": d.embedding_model,
        "attempts": d.attempts,
        "last_error": d.last_error,
        "next_attempt_at": d.next_attempt_at,
        "started_at": d.started_at,
        "ended_at": d.ended_at,
        "updated_at": d.updated_at,
    }


def digest_from_row(row: RowMapping, prefix: str = "") -> Digest:
    def col(name: str) -> Any:
        return row[prefix + name]

    return Digest(
        tenant_id=col("tenant_id"),
        episode_id=col("episode_id"),
        agent_id=col("agent_id"),
        user_id=col("user_id"),
        state=DigestState(col("state")),
        started_at=col("started_at"),
        ended_at=col("ended_at"),
        updated_at=col("updated_at"),
        next_attempt_at=col("next_attempt_at"),
        summary=col("summary"),
        key_facts=tuple(col("key_facts") or ()),
        embedding_model=col("embedding_model"),
        attempts=col("attempts"),
        last_error=col("last_error"),
    )
