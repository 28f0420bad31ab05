"""Domain objects as the inspector page's JSON (docs/inspector.md lists the shapes): plain
snake_case objects, times in RFC 3339, enums as their lower-case names."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

from episodic.domain.context import ModelCall, RecalledPassage, RenderedMessage, Section, Span
from episodic.domain.inspection import FateRun, UserSummary, log_seq, preview
from episodic.domain.knowledge import Document, DocumentChunk, RenderedKnowledge
from episodic.domain.model import Agent, Episode, Message, ToolCall, ToolResult
from episodic.domain.why_recalled import Candidacy, Part, RecallExplanation, WhyRecalled
from episodic.service.inspection import Diffed, InspectedCall, Traced

Json = dict[str, Any]
MESSAGES_PER_PAGE = 50  # rendered messages of one model call per response


def _time(value: datetime | None) -> str:
    return value.isoformat() if value is not None else ""


def agent(a: Agent) -> Json:
    return {"agent_id": a.agent_id, "model": a.model, "update_time": _time(a.updated_at)}


def user(u: UserSummary) -> Json:
    return {"user_id": u.user_id, "episodes": u.episodes, "last_activity_time": _time(u.last_activity_at)}


def episode(e: Episode) -> Json:
    return {
        "episode_id": e.episode_id,
        "agent_id": e.agent_id,
        "user_id": e.user_id,
        "state": e.state.value,
        "start_time": _time(e.started_at),
        "end_time": _time(e.ended_at),
        "last_activity_time": _time(e.last_activity_at),
        "message_count": e.message_count,
    }


def _tool_call(c: ToolCall) -> Json:
    return {"tool_call_id": c.tool_call_id, "tool_name": c.tool_name, "input": c.input}


def _tool_result(r: ToolResult | None) -> Json | None:
    if r is None:
        return None
    duration = r.duration.total_seconds() * 1000 if r.duration is not None else None
    return {"tool_call_id": r.tool_call_id, "output": r.output, "error": r.error, "duration_ms": duration}


def message(m: Message) -> Json:
    return {
        "seq": m.seq,
        "role": m.role.value,
        "content": m.content,
        "create_time": _time(m.created_at),
        "tokens": m.token_count,
        "tool_calls": [_tool_call(c) for c in m.tool_calls],
        "tool_result": _tool_result(m.tool_result),
        "retract_time": _time(m.retracted_at) if m.retracted_at else None,
    }


def call_summary(c: ModelCall) -> Json:
    r = c.report
    return {
        "model_call_id": c.model_call_id,
        "create_time": _time(c.created_at),
        "user_message_seq": r.user_message_seq,
        "total_tokens": c.report.total_tokens,
        "budget_tokens": r.budget,
        "compaction": r.compaction.value,
        "trace_id": r.trace_id,
    }


def _span(span: Span) -> Json | None:
    return {"from_seq": span.from_seq, "to_seq": span.to_seq} if span.to_seq > 0 else None


def _fate_run(run: FateRun) -> Json:
    return {"from_seq": run.from_seq, "to_seq": run.to_seq, "fate": run.fate.value}


def _rendered(call: ModelCall, index: int, m: RenderedMessage) -> Json:
    return {
        "index": index,
        "role": m.role.value,
        "section": m.section.value,
        "content": m.content,
        "tokens": m.tokens,
        "seq": log_seq(call, m),
        "stubbed": m.stubbed,
        "tool_call_id": m.tool_call_id,
        "tool_calls": [_tool_call(c) for c in m.tool_calls],
    }


def trace_url(template: str, trace_id: str) -> str:
    return template.replace("{trace_id}", trace_id) if template and trace_id else ""


def model_call(inspected: InspectedCall, offset: int, template: str) -> Json:
    """The call with its rendered messages from `offset`, MESSAGES_PER_PAGE of them."""
    c, r = inspected.call, inspected.call.report
    page = c.messages[offset : offset + MESSAGES_PER_PAGE]
    following = offset + len(page)
    return {
        "model_call_id": c.model_call_id,
        "episode_id": c.episode_id,
        "agent_id": c.agent_id,
        "user_id": c.user_id,
        "create_time": _time(c.created_at),
        "request_id": c.request_id,
        "trace_id": r.trace_id,
        "trace_url": trace_url(template, r.trace_id),
        "model": r.model,
        "token_encoding": r.token_encoding,
        "budget_tokens": r.budget,
        "ceiling_tokens": r.ceiling,
        "total_tokens": c.report.total_tokens,
        "over_budget": r.over_budget,
        "reply_priming_tokens": r.reply_priming,
        "sections": [{"section": s.value, "tokens": r.section_tokens.get(s, 0)} for s in Section],
        "compaction": r.compaction.value,
        "summary_span": _span(r.summary_span),
        "history_span": _span(r.history_span),
        "user_message_seq": r.user_message_seq,
        "messages_pruned": r.pruned,
        "tool_results_stubbed": r.stubbed,
        "messages_summarized": r.summarized,
        "fates": [_fate_run(run) for run in inspected.fates],
        "recalled_episodes": [
            {
                "episode_id": e.episode_id,
                "score": e.score,
                "end_time": _time(e.ended_at),
                "rendered": e.rendered,
                "signals": [s.value for s in e.signals],
            }
            for e in r.recalled
        ],
        "recalled_memories": [
            {"memory_id": m.memory_id, "score": m.score, "rendered": m.rendered, "pending": m.pending}
            for m in r.memories
        ],
        "earlier_passages": [_passage(p) for p in r.earlier],
        "why_recalled": why_recalled(inspected.why_recalled),
        "session_data_keys": list(r.session_keys),
        "knowledge": [_knowledge(c, k) for k in r.knowledge],
        "reply": _reply(c),
        "message_count": len(c.messages),
        "offset": offset,
        "messages": [_rendered(c, offset + i, m) for i, m in enumerate(page)],
        "next_offset": following if following < len(c.messages) else None,
    }


def _passage(p: RecalledPassage) -> Json:
    """A passage of this episode recalled into "[Earlier in this conversation]": its log
    messages, and whether it was rendered whole, cut, or dropped for want of room."""
    signals = [s.value for s in p.signals]
    return {"seqs": list(p.seqs), "score": p.score, "fate": p.fate.value, "signals": signals}


# What the call record lacks to say more (docs/inspector.md, "Why recalled?").
NOT_RECORDED = (
    "The call does not record the recall query (a caller's recall_query, if sent, replaced the user "
    "message): the words are the user message's, matched against what the call rendered. Which signals "
    "found each episode is recorded since calls of 2026-11-27 on."
)


def why_recalled(why: RecallExplanation | None) -> Json | None:
    """Why each recalled episode ranked: the query's words its rendered entry holds, and the
    passages (excerpts) that matched them."""
    if why is None:
        return None
    return {
        "query": why.query,
        "query_source": why.source.value,
        "query_words": list(why.words),
        "unmatched_words": list(why.unmatched),
        "split": why.split,
        "not_recorded": NOT_RECORDED,
        "episodes": [_why_episode(e) for e in why.episodes],
    }


def _why_episode(e: WhyRecalled) -> Json:
    return {
        "episode_id": e.episode_id,
        "rank": e.rank,
        "candidates": e.candidates,
        "score": e.score,
        "rendered": e.rendered,
        "basis": e.basis.value,
        "signals": list(e.signals),
        "matched_words": list(e.matched),
        "missing_words": list(e.missing),
        "parts": [_part(p) for p in e.parts],
        "passages": [_part(p) for p in e.passages],
    }


def _part(p: Part) -> Json:
    return {
        "kind": p.kind.value,
        "text": p.text,
        "matched_words": list(p.matched),
        "segments": [{"text": s.text, "word": s.word} for s in p.segments],
    }


def candidacy(call: ModelCall, c: Candidacy) -> Json:
    return {
        "model_call_id": call.model_call_id,
        "about": c.about,
        "verdict": c.verdict.value,
        "episode_ids": list(c.episode_ids),
        "shared_words": list(c.shared),
        "unseen_candidates": c.unseen,
        "candidates": len(call.report.recalled),
    }


def _knowledge(c: ModelCall, k: RenderedKnowledge) -> Json:
    """A knowledge item of the call; a stored chunk links to its document."""
    href = f"/api/agents/{quote(c.agent_id)}/documents/{quote(k.document_id)}" if k.document_id else None
    return {
        "source_id": k.source_id,
        "origin": k.origin.value,
        "fate": k.fate.value,
        "score": k.score,
        "tokens": k.tokens,
        "start_char": k.start,
        "end_char": k.end,
        "document_id": k.document_id,
        "chunk_index": k.chunk_index,
        "document_href": href,
    }


def document(d: Document, chunks: Sequence[DocumentChunk]) -> Json:
    return {
        "agent_id": d.agent_id,
        "document_id": d.document_id,
        "title": d.title,
        "uri": d.uri,
        "format": d.format.value,
        "metadata": dict(d.metadata),
        "update_time": _time(d.updated_at),
        "text": d.text,
        "chunks": [
            {
                "chunk_index": c.index,
                "start_char": c.start,
                "end_char": c.end,
                "heading_path": list(c.heading_path),
            }
            for c in chunks
        ],
    }


def _reply(c: ModelCall) -> Json | None:
    if c.reply is None:
        return None
    return {
        "input_tokens": c.reply.input_tokens,
        "output_tokens": c.reply.output_tokens,
        "latency_ms": c.reply.latency.total_seconds() * 1000,
        "assistant_message_seq": c.reply.assistant_message_seq,
    }


def _item(call: ModelCall, m: RenderedMessage) -> Json:
    return {
        "section": m.section.value,
        "seq": log_seq(call, m),
        "stubbed": m.stubbed,
        "role": m.role.value,
        "tokens": m.tokens,
        "preview": preview(m.content),
    }


def diff(d: Diffed) -> Json:
    return {
        "model_call_id": d.call.model_call_id,
        "previous_model_call_id": d.previous.model_call_id if d.previous is not None else "",
        "entered": [_item(d.call, m) for m in d.diff.entered],
        "left": [_item(d.previous, m) for m in d.diff.left] if d.previous is not None else [],
        "kept": d.diff.kept,
    }


def where(phrase: str, traced: Traced) -> Json:
    t = traced.trace
    return {
        "phrase": phrase,
        "truncated": traced.truncated,
        "messages": [{"seq": m.seq, "role": m.role.value, "preview": preview(m.content)} for m in t.messages],
        "calls": [
            {
                "model_call_id": row.call.model_call_id,
                "create_time": _time(row.call.created_at),
                "user_message_seq": row.call.report.user_message_seq,
                "fates": [{"seq": seq, "fate": fate.value} for seq, fate in row.fates],
                "present": [section.value for section in row.present],
            }
            for row in t.calls
        ],
        "gone": None
        if t.gone is None
        else {
            "model_call_id": t.gone.model_call_id,
            "create_time": _time(t.gone.created_at),
            "reason": t.gone.reason.value,
            "last_seen_in": [section.value for section in t.gone.last_seen_in],
        },
        "dropped": [
            {
                "seq": d.seq,
                "model_call_id": d.model_call_id,
                "create_time": _time(d.created_at),
                "reason": d.reason.value,
            }
            for d in t.dropped
        ],
        "returned": [
            {
                "seq": r.seq,
                "model_call_id": r.model_call_id,
                "create_time": _time(r.created_at),
                "fate": r.fate.value,
            }
            for r in t.returned
        ],
        "back": None
        if t.back is None
        else {
            "model_call_id": t.back.model_call_id,
            "create_time": _time(t.back.created_at),
            "present": [section.value for section in t.back.present],
        },
    }


def listing(key: str, items: Sequence[Json], next_page_token: str) -> Json:
    return {key: list(items), "next_page_token": next_page_token}
