"""Domain results as what a tool returns: plain JSON objects (the structured content), and
the rendered context as the text the model would see."""

from __future__ import annotations

import json
from datetime import datetime

from episodic.domain.context import ModelCall, RenderedMessage
from episodic.domain.inspection import UserSummary
from episodic.domain.knowledge import Document, KnowledgeHit
from episodic.domain.memories import Memory, MemoryHit
from episodic.domain.model import Agent, Episode, Message, Page
from episodic.domain.recall import Snippet
from episodic.service.memories import Created
from episodic.service.recall import SearchResult

Json = dict[str, object]


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def agent(a: Agent) -> Json:
    return {"agent_id": a.agent_id, "model": a.model, "token_encoding": a.token_encoding}


def users(page: Page[UserSummary]) -> Json:
    return {
        "users": [
            {
                "user_id": u.user_id,
                "episodes": u.episodes,
                "open_episodes": u.open_episodes,
                "memories": u.memories,
                "last_activity_at": _time(u.last_activity_at),
            }
            for u in page.items
        ],
        "next_page_token": page.next_token,
    }


def episode(e: Episode) -> Json:
    return {
        "episode_id": e.episode_id,
        "agent_id": e.agent_id,
        "user_id": e.user_id,
        "state": e.state.value,
        "started_at": _time(e.started_at),
        "ended_at": _time(e.ended_at),
        "message_count": e.message_count,
    }


def message(m: Message, deduplicated: bool) -> Json:
    return {
        "episode_id": m.episode_id,
        "seq": m.seq,
        "role": m.role.value,
        "token_count": m.token_count,
        "deduplicated": deduplicated,
    }


def search_result(result: SearchResult) -> Json:
    return {
        "episodes": [_snippet(s) for s in result.snippets],
        "pending_digests": result.pending_digests,  # closed, not yet searchable by meaning
    }


def _snippet(s: Snippet) -> Json:
    return {
        "episode_id": s.episode_id,
        "started_at": _time(s.started_at),
        "ended_at": _time(s.ended_at),
        "summary": s.summary,
        "key_facts": list(s.key_facts),
        "score": round(s.score, 4),
    }


def memory(m: Memory) -> Json:
    found: Json = {"memory_id": m.memory_id, "text": m.text, "kind": m.kind.value, "state": m.state.value}
    if m.event_time is not None:
        found["event_time"] = _time(m.event_time)
    return found


def memory_hits(hits: list[MemoryHit]) -> Json:
    return {"memories": [{**memory(h.memory), "score": round(h.score, 4)} for h in hits]}


def created(made: Created) -> Json:
    return {**memory(made.memory), "outcome": made.outcome.value, "superseded": list(made.superseded)}


def document(d: Document, created: bool) -> Json:
    """created False: the same content was there already (a retry), nothing changed."""
    return {
        "agent_id": d.agent_id,
        "document_id": d.document_id,
        "title": d.title,
        "uri": d.uri,
        "format": d.format.value,
        "metadata": dict(d.metadata),
        "chunk_count": d.chunk_count,
        "updated_at": _time(d.updated_at),
        "created": created,
    }


def knowledge_hits(hits: list[KnowledgeHit]) -> Json:
    return {"chunks": [_chunk(h) for h in hits]}


def _chunk(h: KnowledgeHit) -> Json:
    d, c = h.document, h.chunk
    return {
        "document_id": d.document_id,
        "title": d.title,
        "uri": d.uri,
        "chunk_index": c.index,
        "start_char": c.start,  # the passage is the document's text[start_char:end_char]
        "end_char": c.end,
        "heading_path": list(c.heading_path),
        "score": round(h.score, 4),
        "text": c.text,
    }


def model_call(call: ModelCall) -> Json:
    r = call.report
    return {
        "model_call_id": call.model_call_id,
        "episode_id": call.episode_id,
        "total_tokens": r.total_tokens,
        "budget_tokens": r.budget,
        "over_budget": r.over_budget,
        "recalled_episodes": [e.episode_id for e in r.recalled],
        "recalled_memories": [m.memory_id for m in r.memories],
        "user_message_seq": r.user_message_seq,
        "messages": [
            {"role": m.role.value, "section": m.section.value, "content": m.content} for m in call.messages
        ],
    }


def rendered(call: ModelCall) -> str:
    """The context as the model sees it, one block per message, then the model call id (to
    quote when the reply is recorded)."""
    blocks = [_block(m) for m in call.messages]
    blocks.append(f"(model call {call.model_call_id}: {call.report.total_tokens} tokens)")
    return "\n\n".join(blocks)


def _block(m: RenderedMessage) -> str:
    head = f"[{m.role.value} · {m.section.value}]"
    lines = [head, m.content] if m.content else [head]
    lines += [f"(calls {c.tool_name} {json.dumps(c.input, ensure_ascii=False)})" for c in m.tool_calls]
    if m.tool_call_id:
        lines.append(f"(result of tool call {m.tool_call_id})")
    return "\n".join(lines)
