"""Request builders of KnowledgeService, and `knowledge_item` for BuildContext, shared by both
clients. Formats take names ("text", "markdown") or enum numbers; search modes as elsewhere
("recency", "semantic", "hybrid")."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Final

from google.protobuf import field_mask_pb2

from episodic_client import values
from episodic_client.v1 import knowledge_pb2, knowledge_service_pb2
from episodic_client.values import SearchModeLike

FormatLike = str | int
_FORMATS = {
    name.removeprefix("DOCUMENT_FORMAT_").lower(): number
    for name, number in knowledge_pb2.DocumentFormat.items()
    if number != knowledge_pb2.DOCUMENT_FORMAT_UNSPECIFIED
}


class Unchanged(enum.Enum):
    """The type of `UNCHANGED`: the default of `update_document`'s expire_time, where None
    means "never expires"."""

    UNCHANGED = "unchanged"


UNCHANGED: Final = Unchanged.UNCHANGED


def document_format(value: FormatLike) -> knowledge_pb2.DocumentFormat.ValueType:
    if isinstance(value, int):
        return knowledge_pb2.DocumentFormat.ValueType(value)
    key = value.strip().lower().removeprefix("document_format_")
    if key not in _FORMATS:
        raise ValueError(f"unknown document format {value!r}; use text or markdown")
    return _FORMATS[key]


def document_input(
    document_id: str,
    text: str,
    *,
    format: FormatLike = "markdown",
    title: str = "",
    uri: str = "",
    metadata: Mapping[str, str] | None = None,
    expire_time: datetime | None = None,
) -> knowledge_service_pb2.DocumentInput:
    """One document for `create_documents`; document_id is the client's (a retry with the
    same content is answered with the stored document)."""
    return knowledge_service_pb2.DocumentInput(
        document_id=document_id,
        text=text,
        format=document_format(format),
        title=title,
        uri=uri,
        metadata=metadata,
        expire_time=values.timestamp(expire_time),
    )


def knowledge_item(
    text: str,
    *,
    source_id: str = "",
    title: str = "",
    uri: str = "",
    score: float | None = None,
    metadata: Mapping[str, str] | None = None,
) -> knowledge_pb2.KnowledgeItem:
    """Knowledge retrieved elsewhere, for `build_context(knowledge=[...])`: rendered in the
    "[Knowledge]" section (best score first) and listed in the report by source_id. A score
    of None is left unset (rendered after the scored items, in the order given)."""
    return knowledge_pb2.KnowledgeItem(
        text=text, source_id=source_id, title=title, uri=uri, score=score, metadata=metadata
    )


def create_documents(
    agent_id: str, documents: Sequence[knowledge_service_pb2.DocumentInput]
) -> knowledge_service_pb2.CreateDocumentsRequest:
    return knowledge_service_pb2.CreateDocumentsRequest(agent_id=agent_id, documents=documents)


def get_document(
    agent_id: str, document_id: str, *, include_chunks: bool = False
) -> knowledge_service_pb2.GetDocumentRequest:
    return knowledge_service_pb2.GetDocumentRequest(
        agent_id=agent_id, document_id=document_id, include_chunks=include_chunks
    )


def list_documents(
    agent_id: str, *, metadata: Mapping[str, str] | None = None, page_size: int = 0, page_token: str = ""
) -> knowledge_service_pb2.ListDocumentsRequest:
    return knowledge_service_pb2.ListDocumentsRequest(
        agent_id=agent_id, metadata=metadata, page_size=page_size, page_token=page_token
    )


def update_document(
    agent_id: str,
    document_id: str,
    *,
    text: str | None = None,
    format: FormatLike | None = None,
    title: str | None = None,
    uri: str | None = None,
    metadata: Mapping[str, str] | None = None,
    expire_time: datetime | Unchanged | None = UNCHANGED,
) -> knowledge_service_pb2.UpdateDocumentRequest:
    """Sets the fields given (and names them in the update mask); None leaves a field as it
    is, except expire_time, where None removes the expiry. metadata replaces the whole map."""
    document = knowledge_pb2.Document(agent_id=agent_id, document_id=document_id)
    paths: list[str] = []
    if text is not None:
        document.text = text
        paths.append("text")
    if format is not None:
        document.format = document_format(format)
        paths.append("format")
    if title is not None:
        document.title = title
        paths.append("title")
    if uri is not None:
        document.uri = uri
        paths.append("uri")
    if metadata is not None:
        document.metadata.update(metadata)
        paths.append("metadata")
    if not isinstance(expire_time, Unchanged):
        if expire_time is not None:
            document.expire_time.FromDatetime(expire_time)
        paths.append("expire_time")
    if not paths:
        raise ValueError(
            "update_document needs a field to set: text, format, title, uri, metadata or expire_time"
        )
    return knowledge_service_pb2.UpdateDocumentRequest(
        document=document, update_mask=field_mask_pb2.FieldMask(paths=paths)
    )


def delete_document(agent_id: str, document_id: str) -> knowledge_service_pb2.DeleteDocumentRequest:
    return knowledge_service_pb2.DeleteDocumentRequest(agent_id=agent_id, document_id=document_id)


def search_knowledge(
    agent_id: str,
    query: str = "",
    *,
    mode: SearchModeLike = "hybrid",
    top_k: int = 0,
    min_score: float | None = None,
    metadata: Mapping[str, str] | None = None,
    updated_after: datetime | None = None,
    updated_before: datetime | None = None,
) -> knowledge_service_pb2.SearchKnowledgeRequest:
    """A min_score of None is left unset; metadata keeps documents with every entry."""
    return knowledge_service_pb2.SearchKnowledgeRequest(
        agent_id=agent_id,
        mode=values.search_mode(mode),
        query=query,
        top_k=top_k,
        min_score=min_score,
        metadata=metadata,
        updated_after=values.timestamp(updated_after),
        updated_before=values.timestamp(updated_before),
    )
