"""Proto <-> domain conversions of ContextService, and the framing of a rendered context
into stream frames that each stay under the maximum message size."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta

from google.protobuf.internal.containers import RepeatedCompositeFieldContainer

from episodic.domain.context import (
    Compaction,
    ContextReport,
    ModelCall,
    ModelReply,
    PassageFate,
    RecalledEpisode,
    RenderedMessage,
    Section,
)
from episodic.edges.grpc import convert as c
from episodic.edges.grpc import knowledge_convert as kc
from episodic.service.context import ContextRequest
from episodic.v1 import context_pb2, context_service_pb2, memory_pb2

SECTIONS = {
    Section.SYSTEM: context_pb2.CONTEXT_SECTION_SYSTEM,
    Section.KNOWLEDGE: context_pb2.CONTEXT_SECTION_KNOWLEDGE,
    Section.KNOWN_FACTS: context_pb2.CONTEXT_SECTION_KNOWN_FACTS,
    Section.PAST_CONVERSATIONS: context_pb2.CONTEXT_SECTION_PAST_CONVERSATIONS,
    Section.SUMMARY: context_pb2.CONTEXT_SECTION_SUMMARY,
    Section.EARLIER: context_pb2.CONTEXT_SECTION_EARLIER,
    Section.HISTORY: context_pb2.CONTEXT_SECTION_HISTORY,
    Section.USER_MESSAGE: context_pb2.CONTEXT_SECTION_USER_MESSAGE,
}
PASSAGE_FATES = {
    PassageFate.WHOLE: context_pb2.PASSAGE_FATE_WHOLE,
    PassageFate.CUT: context_pb2.PASSAGE_FATE_CUT,
    PassageFate.DROPPED: context_pb2.PASSAGE_FATE_DROPPED,
}
COMPACTIONS = {
    Compaction.NONE: context_pb2.COMPACTION_NONE,
    Compaction.SUMMARIZED: context_pb2.COMPACTION_SUMMARIZED,
    Compaction.SCHEDULED: context_pb2.COMPACTION_SCHEDULED,
    Compaction.SKIPPED_CLOSED: context_pb2.COMPACTION_SKIPPED_CLOSED,
}
ROLES_OUT = {role: number for number, role in c.ROLES.items()}
FRAME_SLACK_BYTES = 1024  # room for field tags and lengths around the messages of a frame


def context_request_in(r: context_service_pb2.BuildContextRequest) -> ContextRequest:
    return ContextRequest(
        episode_id=r.episode_id,
        user_message=r.user_message,
        append_user_message=r.append_user_message,
        client_message_id=r.client_message_id,
        system_prompt=r.system_prompt if r.HasField("system_prompt") else None,
        memory=c.memory_draft_in(r.memory_config, "memory_config"),
        model=r.model,
        recall_query=r.recall_query,
        request_id=r.request_id,
        knowledge=tuple(kc.knowledge_item_in(item) for item in r.knowledge),
    )


def reply_in(r: context_service_pb2.RecordModelReplyRequest) -> ModelReply:
    latency = c.duration_in(r.latency, "latency") if r.HasField("latency") else None
    return ModelReply(
        input_tokens=r.input_tokens,
        output_tokens=r.output_tokens,
        latency=latency if latency is not None else timedelta(0),
        assistant_message_seq=r.assistant_message_seq,
    )


def context_message_out(index: int, m: RenderedMessage) -> context_pb2.ContextMessage:
    return context_pb2.ContextMessage(
        index=index,
        role=ROLES_OUT[m.role],
        content=m.content,
        section=SECTIONS[m.section],
        tool_calls=[c.tool_call_out(t) for t in m.tool_calls],
        tool_call_id=m.tool_call_id,
        seq=m.seq,
        stubbed=m.stubbed,
        token_count=m.tokens,
    )


def report_out(r: ContextReport) -> context_pb2.ContextReport:
    t = r.section_tokens
    return context_pb2.ContextReport(
        section_tokens=context_pb2.SectionTokens(
            system=t[Section.SYSTEM],
            past_conversations=t[Section.PAST_CONVERSATIONS],
            summary=t[Section.SUMMARY],
            history=t[Section.HISTORY],
            user_message=t[Section.USER_MESSAGE],
            reply_priming=r.reply_priming,
            known_facts=t.get(Section.KNOWN_FACTS, 0),  # reports stored before memories lack it
            knowledge=t.get(Section.KNOWLEDGE, 0),  # and those before knowledge this
            earlier=t.get(Section.EARLIER, 0),  # and those before migration 0015 this
        ),
        total_tokens=r.total_tokens,
        budget_tokens=r.budget,
        ceiling_tokens=r.ceiling,
        messages_pruned=r.pruned,
        tool_results_stubbed=r.stubbed,
        messages_summarized=r.summarized,
        summary_from_seq=r.summary_span.from_seq,
        summary_to_seq=r.summary_span.to_seq,
        compaction=COMPACTIONS[r.compaction],
        history_from_seq=r.history_span.from_seq,
        history_to_seq=r.history_span.to_seq,
        recalled_episodes=[_recalled_out(e) for e in r.recalled],
        pending_digests=r.pending_digests,
        model_call_id=r.model_call_id,
        trace_id=r.trace_id,
        user_message_seq=r.user_message_seq,
        model=r.model,
        token_encoding=r.token_encoding,
        over_budget=r.over_budget,
        recalled_memories=[
            context_pb2.RecalledMemory(
                memory_id=m.memory_id,
                score=m.score,
                rendered=m.rendered,
                state=memory_pb2.MEMORY_STATE_PENDING if m.pending else memory_pb2.MEMORY_STATE_PROMOTED,
            )
            for m in r.memories
        ],
        session_data_keys=r.session_keys,
        knowledge=[kc.rendered_knowledge_out(k) for k in r.knowledge],
        earlier_passages=[
            context_pb2.RecalledPassage(
                seqs=p.seqs, score=p.score, fate=PASSAGE_FATES[p.fate],
                signals=[c.SIGNAL_NUMBERS[s] for s in p.signals],
            )
            for p in r.earlier
        ],
    )  # fmt: skip


def _recalled_out(e: RecalledEpisode) -> context_pb2.RecalledEpisode:
    out = context_pb2.RecalledEpisode(
        episode_id=e.episode_id,
        score=e.score,
        rendered=e.rendered,
        signals=[c.SIGNAL_NUMBERS[s] for s in e.signals],
    )
    if e.ended_at is not None:
        out.end_time.CopyFrom(c.time_out(e.ended_at))
    return out


def model_call_out(call: ModelCall) -> context_pb2.ModelCall:
    out = context_pb2.ModelCall(
        model_call_id=call.model_call_id,
        episode_id=call.episode_id,
        agent_id=call.agent_id,
        user_id=call.user_id,
        create_time=c.time_out(call.created_at),
        request_id=call.request_id,
        messages=[context_message_out(i, m) for i, m in enumerate(call.messages)],
        report=report_out(call.report),
    )
    if call.reply is not None:
        out.reply.CopyFrom(_reply_out(call.reply))
    return out


def _reply_out(r: ModelReply) -> context_pb2.ModelReply:
    out = context_pb2.ModelReply(
        input_tokens=r.input_tokens,
        output_tokens=r.output_tokens,
        latency=c.duration_out(r.latency),
        assistant_message_seq=r.assistant_message_seq,
    )
    if r.recorded_at is not None:
        out.record_time.CopyFrom(c.time_out(r.recorded_at))
    return out


def frames(call: ModelCall, max_frame_bytes: int) -> Iterator[context_service_pb2.BuildContextResponse]:
    """The stream of one call: messages packed in order into frames under the limit (a
    message too large for one frame is split into content parts), the report last."""
    whole = one_frame(call, max_frame_bytes)  # the usual case: one frame, no per-message sizing
    if whole is not None:
        yield whole
        return
    yield from _packed(call, max_frame_bytes - FRAME_SLACK_BYTES)


def one_frame(call: ModelCall, max_frame_bytes: int) -> context_service_pb2.BuildContextResponse | None:
    """The whole stream as one frame (messages and report), when it surely fits; else None."""
    if not _surely_fits(call, max_frame_bytes - FRAME_SLACK_BYTES):
        return None
    frame = context_service_pb2.BuildContextResponse(report=report_out(call.report))
    add_messages(frame.messages, call.messages)
    return frame


def add_messages(
    out: RepeatedCompositeFieldContainer[context_pb2.ContextMessage], messages: Sequence[RenderedMessage]
) -> None:
    """Made in place (`add`), the plain fields only: a context's ~50 messages took ~240 us as
    ContextMessage(...) each with its empty tool calls, ~50 us so."""
    add = out.add
    for index, m in enumerate(messages):
        if m.tool_calls or m.tool_call_id or m.stubbed:
            out.append(context_message_out(index, m))
        else:
            role, section = ROLES_OUT[m.role], SECTIONS[m.section]
            add(index=index, role=role, content=m.content, section=section, seq=m.seq, token_count=m.tokens)


def message_frames(
    call: ModelCall, max_frame_bytes: int
) -> Iterator[context_service_pb2.BuildContextResponse]:
    """The call's messages as `frames` packs them, without the report: sent while the
    call's record is being stored (the report, which names it, follows as `report_frame`)."""
    for batch in _batches(call.messages, max_frame_bytes - FRAME_SLACK_BYTES):
        yield context_service_pb2.BuildContextResponse(messages=batch)


def report_frame(call: ModelCall) -> context_service_pb2.BuildContextResponse:
    """The stream's last frame: the report alone."""
    return context_service_pb2.BuildContextResponse(report=report_out(call.report))


def _surely_fits(call: ModelCall, budget: int) -> bool:
    """An upper bound of the one-frame size: 4 bytes per character of text (UTF-8), 8 per
    character of a tool input's repr (Struct encoding), generous room for other fields."""
    bound = 1024 + 512 * len(call.report.recalled)
    for m in call.messages:
        bound += 256 + 4 * len(m.content) + sum(256 + 8 * len(repr(t.input)) for t in m.tool_calls)
    return bound <= budget


def _packed(call: ModelCall, budget: int) -> Iterator[context_service_pb2.BuildContextResponse]:
    report = report_out(call.report)
    last: list[context_pb2.ContextMessage] = []
    for batch in _batches(call.messages, budget):
        if last:
            yield context_service_pb2.BuildContextResponse(messages=last)
        last = batch
    if last and sum(m.ByteSize() + 8 for m in last) + report.ByteSize() + 8 > budget:
        yield context_service_pb2.BuildContextResponse(messages=last)
        last = []
    yield context_service_pb2.BuildContextResponse(messages=last, report=report)


def _batches(messages: Sequence[RenderedMessage], budget: int) -> Iterator[list[context_pb2.ContextMessage]]:
    """The messages' parts in order, packed into batches of at most `budget` bytes."""
    batch: list[context_pb2.ContextMessage] = []
    used = 0
    for part in _parts(messages, budget):
        size = part.ByteSize() + 8
        if batch and used + size > budget:
            yield batch
            batch, used = [], 0
        batch.append(part)
        used += size
    if batch:
        yield batch


def _parts(messages: Sequence[RenderedMessage], budget: int) -> Iterator[context_pb2.ContextMessage]:
    for index, m in enumerate(messages):
        whole = context_message_out(index, m)
        if whole.ByteSize() <= budget:
            yield whole
            continue
        yield from _split(whole, budget)


def _split(whole: context_pb2.ContextMessage, budget: int) -> Iterator[context_pb2.ContextMessage]:
    """Content in pieces of at most `room` UTF-8 bytes (cut at character boundaries); the
    other fields ride on the first part only."""
    head = context_pb2.ContextMessage()
    head.CopyFrom(whole)
    head.content = ""
    room = max(budget - head.ByteSize() - 16, 1024)
    pieces = list(_utf8_pieces(whole.content, room))
    for i, piece in enumerate(pieces):
        part = context_pb2.ContextMessage() if i else head
        if i:
            part.index, part.role, part.section = whole.index, whole.role, whole.section
        part.content = piece
        part.content_continues = i < len(pieces) - 1
        yield part


def _utf8_pieces(text: str, max_bytes: int) -> Iterator[str]:
    data = text.encode()
    start = 0
    while start < len(data):
        end = min(start + max_bytes, len(data))
        while end < len(data) and (data[end] & 0xC0) == 0x80:  # not inside a character
            end -= 1
        yield data[start:end].decode()
        start = end
