"""Proto <-> domain conversions of knowledge: the items a caller hands to BuildContext, the
report's lines, and KnowledgeService's documents, chunks and hits."""

from __future__ import annotations

from episodic.domain.chunking import DocumentFormat
from episodic.domain.knowledge import (
    Document,
    DocumentChunk,
    DocumentDraft,
    KnowledgeFate,
    KnowledgeFilter,
    KnowledgeHit,
    KnowledgeItem,
    KnowledgeOrigin,
    RenderedKnowledge,
    metadata_of,
)
from episodic.domain.recall import Signal
from episodic.edges.grpc.convert import SEARCH_MODES, SIGNAL_NUMBERS, enum_in, optional_time_in, time_out
from episodic.service.knowledge import KnowledgeQuery
from episodic.v1 import knowledge_pb2, knowledge_service_pb2

FORMATS = {  # proto number -> domain; unset reads as markdown (see knowledge.proto)
    knowledge_pb2.DOCUMENT_FORMAT_TEXT: DocumentFormat.TEXT,
    knowledge_pb2.DOCUMENT_FORMAT_MARKDOWN: DocumentFormat.MARKDOWN,
}
FORMAT_NUMBERS = {fmt: number for number, fmt in FORMATS.items()}
ORIGINS = {
    KnowledgeOrigin.REQUEST: knowledge_pb2.KNOWLEDGE_ORIGIN_REQUEST,
    KnowledgeOrigin.STORED: knowledge_pb2.KNOWLEDGE_ORIGIN_STORED,
}
FATES = {
    KnowledgeFate.WHOLE: knowledge_pb2.KNOWLEDGE_FATE_WHOLE,
    KnowledgeFate.TRIMMED: knowledge_pb2.KNOWLEDGE_FATE_TRIMMED,
    KnowledgeFate.DROPPED: knowledge_pb2.KNOWLEDGE_FATE_DROPPED,
    KnowledgeFate.DUPLICATE: knowledge_pb2.KNOWLEDGE_FATE_DUPLICATE,
}


def knowledge_item_in(item: knowledge_pb2.KnowledgeItem) -> KnowledgeItem:
    return KnowledgeItem(
        text=item.text,
        source_id=item.source_id,
        title=item.title,
        uri=item.uri,
        score=item.score if item.HasField("score") else None,
        metadata=metadata_of(item.metadata),
    )


def rendered_knowledge_out(k: RenderedKnowledge) -> knowledge_pb2.RenderedKnowledge:
    out = knowledge_pb2.RenderedKnowledge(
        source_id=k.source_id,
        origin=ORIGINS[k.origin],
        fate=FATES[k.fate],
        tokens=k.tokens,
        start_char=k.start,
        end_char=k.end,
        document_id=k.document_id,
        chunk_index=max(k.chunk_index, 0),
    )
    if k.score is not None:
        out.score = k.score
    return out


def format_in(number: int, field: str) -> DocumentFormat:
    return enum_in(FORMATS, number, field, required=False) or DocumentFormat.MARKDOWN


def draft_in(d: knowledge_service_pb2.DocumentInput, field: str) -> DocumentDraft:
    return DocumentDraft(
        document_id=d.document_id,
        text=d.text,
        format=format_in(d.format, f"{field}.format"),
        title=d.title,
        uri=d.uri,
        metadata=metadata_of(d.metadata),
        expires_at=optional_time_in(d, "expire_time", f"{field}.expire_time"),
    )


def update_in(d: knowledge_pb2.Document) -> DocumentDraft:
    return DocumentDraft(
        document_id=d.document_id,
        text=d.text,
        format=format_in(d.format, "document.format"),
        title=d.title,
        uri=d.uri,
        metadata=metadata_of(d.metadata),
        expires_at=optional_time_in(d, "expire_time", "document.expire_time"),
    )


def query_in(r: knowledge_service_pb2.SearchKnowledgeRequest) -> KnowledgeQuery:
    return KnowledgeQuery(
        agent_id=r.agent_id,
        mode=enum_in(SEARCH_MODES, r.mode, "mode", required=False),
        query=r.query,
        top_k=r.top_k,
        min_score=r.min_score if r.HasField("min_score") else None,
        where=KnowledgeFilter(
            metadata=metadata_of(r.metadata),
            updated_after=optional_time_in(r, "updated_after", "updated_after"),
            updated_before=optional_time_in(r, "updated_before", "updated_before"),
        ),
    )


def document_out(d: Document, *, with_text: bool = False) -> knowledge_pb2.Document:
    out = knowledge_pb2.Document(
        agent_id=d.agent_id,
        document_id=d.document_id,
        title=d.title,
        uri=d.uri,
        format=FORMAT_NUMBERS[d.format],
        text=d.text if with_text else "",
        metadata=dict(d.metadata),
        chunk_count=d.chunk_count,
        create_time=time_out(d.created_at),
        update_time=time_out(d.updated_at),
        content_hash=d.content_hash,
    )
    if d.expires_at is not None:
        out.expire_time.CopyFrom(time_out(d.expires_at))
    return out


def chunk_out(c: DocumentChunk) -> knowledge_pb2.DocumentChunk:
    return knowledge_pb2.DocumentChunk(
        document_id=c.document_id,
        chunk_index=c.index,
        text=c.text,
        start_char=c.start,
        end_char=c.end,
        heading_path=c.heading_path,
    )


def hit_out(h: KnowledgeHit) -> knowledge_service_pb2.KnowledgeHit:
    return knowledge_service_pb2.KnowledgeHit(
        chunk=chunk_out(h.chunk),
        document=document_out(h.document),
        score=h.score,
        signals=[SIGNAL_NUMBERS[Signal(s)] for s in h.signals],
    )
