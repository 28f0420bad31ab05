"""Row <-> domain conversions of summaries and model calls. Rendered messages and reports
are stored as JSON documents: they are read whole, never queried by field."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import RowMapping

from episodic.domain.context import (
    Compaction,
    ContextReport,
    ModelCall,
    ModelReply,
    PassageFate,
    RecalledEpisode,
    RecalledMemory,
    RecalledPassage,
    RenderedMessage,
    Section,
    Span,
    Summary,
)
from episodic.domain.knowledge import KnowledgeFate, KnowledgeOrigin, RenderedKnowledge
from episodic.domain.model import Role, ToolCall
from episodic.domain.recall import Signal


def summary_values(s: Summary) -> dict[str, Any]:
    return {
        "tenant_id": s.tenant_id,
        "episode_id": s.episode_id,
        "to_seq": s.to_seq,
        "from_seq": s.from_seq,
        "content": s.content,
        "token_count": s.token_count,
        "token_encoding": s.token_encoding,
        "summarizer": s.summarizer,
        "created_at": s.created_at,
    }


def summary_from_row(row: RowMapping) -> Summary:
    return Summary(
        tenant_id=row["tenant_id"],
        episode_id=row["episode_id"],
        from_seq=row["from_seq"],
        to_seq=row["to_seq"],
        content=row["content"],
        token_count=row["token_count"],
        token_encoding=row["token_encoding"],
        summarizer=row["summarizer"],
        created_at=row["created_at"],
    )


def model_call_values(c: ModelCall) -> dict[str, Any]:
    return {
        "tenant_id": c.tenant_id,
        "model_call_id": c.model_call_id,
        "episode_id": c.episode_id,
        "agent_id": c.agent_id,
        "user_id": c.user_id,
        "request_id": c.request_id or None,
        "created_at": c.created_at,
        "total_tokens": c.report.total_tokens,
        "trace_id": c.report.trace_id,
        "messages": [_message_json(m) for m in c.messages],
        "report": _report_json(c.report),
        "reply": reply_json(c.reply) if c.reply else None,
    }


def model_call_from_row(row: RowMapping) -> ModelCall:
    return ModelCall(
        tenant_id=row["tenant_id"],
        model_call_id=row["model_call_id"],
        episode_id=row["episode_id"],
        agent_id=row["agent_id"],
        user_id=row["user_id"],
        created_at=row["created_at"],
        messages=tuple(_message_from_json(m) for m in row["messages"]),
        report=_report_from_json(row["report"]),
        request_id=row["request_id"] or "",
        reply=_reply_from_json(row["reply"]) if row["reply"] else None,
    )


def _message_json(m: RenderedMessage) -> dict[str, Any]:
    """Fields at their defaults are left out: model calls are the largest rows we write."""
    out: dict[str, Any] = {"role": m.role.value, "content": m.content, "section": m.section.value}
    out["tokens"] = m.tokens
    if m.tool_calls:
        out["tool_calls"] = [
            {"tool_call_id": c.tool_call_id, "tool_name": c.tool_name, "input": dict(c.input)}
            for c in m.tool_calls
        ]
    if m.tool_call_id:
        out["tool_call_id"] = m.tool_call_id
    if m.seq:
        out["seq"] = m.seq
    if m.stubbed:
        out["stubbed"] = True
    return out


def _message_from_json(d: dict[str, Any]) -> RenderedMessage:
    calls = d.get("tool_calls", ())
    return RenderedMessage(
        role=Role(d["role"]),
        content=d["content"],
        section=Section(d["section"]),
        tokens=d["tokens"],
        tool_calls=tuple(ToolCall(c["tool_call_id"], c["tool_name"], c["input"]) for c in calls),
        tool_call_id=d.get("tool_call_id", ""),
        seq=d.get("seq", 0),
        stubbed=d.get("stubbed", False),
    )


def _report_json(r: ContextReport) -> dict[str, Any]:
    return {
        "section_tokens": {s.value: n for s, n in r.section_tokens.items()},
        "reply_priming": r.reply_priming,
        "budget": r.budget,
        "ceiling": r.ceiling,
        "over_budget": r.over_budget,
        "pruned": r.pruned,
        "stubbed": r.stubbed,
        "summarized": r.summarized,
        "summary_span": [r.summary_span.from_seq, r.summary_span.to_seq],
        "history_span": [r.history_span.from_seq, r.history_span.to_seq],
        "compaction": r.compaction.value,
        "recalled": [_recalled_json(e) for e in r.recalled],
        "pending_digests": r.pending_digests,
        "model": r.model,
        "token_encoding": r.token_encoding,
        "model_call_id": r.model_call_id,
        "trace_id": r.trace_id,
        "user_message_seq": r.user_message_seq,
        "memories": [[m.memory_id, m.score, m.rendered, m.pending] for m in r.memories],
        "session_keys": list(r.session_keys),
        "knowledge": [_knowledge_json(k) for k in r.knowledge],
        "earlier": [[list(p.seqs), p.score, p.fate.value, [s.value for s in p.signals]] for p in r.earlier],
    }


def _report_from_json(d: dict[str, Any]) -> ContextReport:
    return ContextReport(
        section_tokens={Section(s): n for s, n in d["section_tokens"].items()},
        reply_priming=d["reply_priming"],
        budget=d["budget"],
        ceiling=d["ceiling"],
        over_budget=d["over_budget"],
        pruned=d["pruned"],
        stubbed=d["stubbed"],
        summarized=d["summarized"],
        summary_span=Span(*d["summary_span"]),
        history_span=Span(*d["history_span"]),
        compaction=Compaction(d["compaction"]),
        recalled=tuple(_recalled_from_json(e) for e in d["recalled"]),
        pending_digests=d["pending_digests"],
        model=d["model"],
        token_encoding=d["token_encoding"],
        model_call_id=d["model_call_id"],
        trace_id=d["trace_id"],
        user_message_seq=d["user_message_seq"],
        memories=tuple(RecalledMemory(*m) for m in d.get("memories", ())),
        session_keys=tuple(d.get("session_keys", ())),
        knowledge=tuple(_knowledge_from_json(k) for k in d.get("knowledge", ())),
        earlier=tuple(_passage_from_json(*p) for p in d.get("earlier", ())),  # none stored before 0015
    )


def _passage_from_json(seqs: list[int], score: float, fate: str, signals: list[str]) -> RecalledPassage:
    return RecalledPassage(tuple(seqs), score, PassageFate(fate), tuple(Signal(s) for s in signals))


def _knowledge_json(k: RenderedKnowledge) -> dict[str, Any]:
    return {
        "source_id": k.source_id,
        "origin": k.origin.value,
        "fate": k.fate.value,
        "score": k.score,
        "tokens": k.tokens,
        "span": [k.start, k.end],
        "document_id": k.document_id,
        "chunk_index": k.chunk_index,
    }


def _knowledge_from_json(d: dict[str, Any]) -> RenderedKnowledge:
    start, end = d["span"]
    return RenderedKnowledge(
        d["source_id"], KnowledgeOrigin(d["origin"]), KnowledgeFate(d["fate"]), d["score"], d["tokens"],
        start, end, d["document_id"], d["chunk_index"],
    )  # fmt: skip


def _recalled_json(e: RecalledEpisode) -> dict[str, Any]:
    ended = e.ended_at.isoformat() if e.ended_at else None
    return {
        "episode_id": e.episode_id,
        "score": e.score,
        "ended_at": ended,
        "rendered": e.rendered,
        "signals": [s.value for s in e.signals],
    }


def _recalled_from_json(d: dict[str, Any]) -> RecalledEpisode:
    ended = datetime.fromisoformat(d["ended_at"]) if d["ended_at"] else None
    signals = tuple(Signal(s) for s in d.get("signals", ()))  # calls stored before 0.x have none
    return RecalledEpisode(d["episode_id"], d["score"], ended, d["rendered"], signals)


def reply_json(r: ModelReply) -> dict[str, Any]:
    return {
        "input_tokens": r.input_tokens,
        "output_tokens": r.output_tokens,
        "latency_seconds": r.latency.total_seconds(),
        "assistant_message_seq": r.assistant_message_seq,
        "recorded_at": r.recorded_at.isoformat() if r.recorded_at else None,
    }


def _reply_from_json(d: dict[str, Any]) -> ModelReply:
    return ModelReply(
        input_tokens=d["input_tokens"],
        output_tokens=d["output_tokens"],
        latency=timedelta(seconds=d["latency_seconds"]),
        assistant_message_seq=d["assistant_message_seq"],
        recorded_at=datetime.fromisoformat(d["recorded_at"]) if d["recorded_at"] else None,
    )
