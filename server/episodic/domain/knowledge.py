"""Knowledge: an agent's documents (chunked, embedded, searched by agent and shared by all of
its users) and the items a caller retrieved elsewhere and hands to BuildContext. Both reach
the model only through the "[Knowledge]" section (domain/knowledge_block.py), under the one
budget and recorded in the model call. Pure: values, the filter rule, validation."""

from __future__ import annotations

import enum
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from episodic.domain.chunking import Chunk, DocumentFormat, TooManyChunks, chunk_document
from episodic.domain.recall import Scope, episode_of, vector_key
from episodic.domain.validation import Violations, check_id, check_text, text_problem

# Caller-supplied items of one BuildContext (documented in docs/configuration.md).
MAX_REQUEST_ITEMS = 64
MAX_ITEM_BYTES = 64 * 1024
MAX_REQUEST_KNOWLEDGE_BYTES = 1024 * 1024
MAX_SOURCE_ID_CHARS = 256
MAX_TITLE_CHARS = 512
MAX_URI_CHARS = 2048
MAX_METADATA_ENTRIES = 32
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_VALUE_CHARS = 1024

# Stored documents.
# A larger document is refused: split it. Below the server's default largest request
# (max_receive_message_bytes, 4 MiB) so one document always fits a call.
MAX_DOCUMENT_BYTES = 2 * 1024 * 1024
MAX_DOCUMENTS_PER_CALL = 100
MAX_CHUNK_CHARS = 1600
MIN_CHUNK_CHARS = 200
# Chunks one document, and one call, may cut into: each chunk is embedded, indexed and held,
# and a document of tiny sections ("a\n=\n" x 524,287: 2 MiB) cut into 524,287 of them
# (seconds of CPU, ~2 GiB). A 2 MiB document of ordinary prose cuts into ~1,300-2,000, and
# one of a heading every 200 characters into ~10,000. Cutting stops at the chunk past the
# limit, so a refusal costs at most the limit's work.
MAX_DOCUMENT_CHUNKS = 10_000
MAX_CALL_CHUNKS = 20_000  # the default burst of a tenant's knowledge_chunks share

Metadata = tuple[tuple[str, str], ...]  # sorted (key, value) pairs: hashable, compared as a whole


def metadata_of(values: Mapping[str, str]) -> Metadata:
    return tuple(sorted(values.items()))


def knowledge_scope(tenant_id: str, agent_id: str) -> Scope:
    """The index scope of an agent's knowledge: every user of the agent shares it."""
    return Scope(tenant_id, agent_id, "")


def chunk_key(document_id: str, index: int) -> str:
    """A chunk's key in its agent's vector index: the shape of an episode's vector keys, so
    the index's removal by episode (state/unindex.py) removes a document's chunks too."""
    return vector_key(document_id, index)


def split_chunk_key(key: str) -> tuple[str, int]:
    return episode_of(key), int(key.rpartition("#")[2])


def content_hash(fmt: DocumentFormat, title: str, text: str) -> str:
    """What makes two creates of one id the same document (a retry) or a conflict."""
    digest = hashlib.sha256()
    for part in (fmt.value, title, text):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


class KnowledgeOrigin(enum.StrEnum):
    REQUEST = "request"  # handed to this BuildContext by its caller
    STORED = "stored"  # a chunk of one of the agent's documents


class KnowledgeFate(enum.StrEnum):
    """What became of one candidate item in the "[Knowledge]" section."""

    WHOLE = "whole"
    TRIMMED = "trimmed"  # cut at a token boundary to the room that was left
    DROPPED = "dropped"  # no room left
    DUPLICATE = "duplicate"  # the same text as an item rendered before it


@dataclass(frozen=True, slots=True)
class KnowledgeItem:
    """One candidate for the section: a caller's item, or a stored chunk found for the turn."""

    text: str
    source_id: str = ""
    title: str = ""
    uri: str = ""
    score: float | None = None
    metadata: Metadata = ()
    origin: KnowledgeOrigin = KnowledgeOrigin.REQUEST
    document_id: str = ""  # stored chunks only
    chunk_index: int = -1


@dataclass(frozen=True, slots=True)
class RenderedKnowledge:
    """The report's line for one candidate: where its text is in the section's message
    (`start`..`end`, characters of that message's content; 0, 0 when not rendered)."""

    source_id: str
    origin: KnowledgeOrigin
    fate: KnowledgeFate
    score: float | None
    tokens: int
    start: int = 0
    end: int = 0
    document_id: str = ""
    chunk_index: int = -1


@dataclass(frozen=True, slots=True)
class Document:
    tenant_id: str
    agent_id: str
    document_id: str
    title: str
    uri: str
    format: DocumentFormat
    text: str
    metadata: Metadata
    content_hash: str
    chunk_count: int
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None

    @property
    def scope(self) -> Scope:
        return knowledge_scope(self.tenant_id, self.agent_id)


@dataclass(frozen=True, slots=True)
class DocumentChunk:
    document_id: str
    index: int
    text: str
    start: int  # characters of the document's text: text == document.text[start:end]
    end: int
    heading_path: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return chunk_key(self.document_id, self.index)


@dataclass(frozen=True, slots=True)
class KnowledgeFilter:
    """Which documents a listing or search may return: every metadata pair given (exact), and
    updated within [updated_after, updated_before). Expired documents never pass."""

    metadata: Metadata = ()
    updated_after: datetime | None = None
    updated_before: datetime | None = None


def expired(d: Document, now: datetime) -> bool:
    return d.expires_at is not None and d.expires_at <= now


def passes(d: Document, where: KnowledgeFilter, now: datetime) -> bool:
    """The one statement of the filter rule; the SQL store says it in its WHERE clause, and
    tests/contracts holds the two to the same cases."""
    if expired(d, now):
        return False
    if where.metadata and not set(where.metadata) <= set(d.metadata):
        return False
    if where.updated_after is not None and d.updated_at < where.updated_after:
        return False
    return where.updated_before is None or d.updated_at < where.updated_before


@dataclass(frozen=True, slots=True)
class KnowledgeHit:
    document: Document
    chunk: DocumentChunk
    score: float
    signals: tuple[str, ...] = field(default_factory=tuple)  # Signal values: semantic, lexical, recency


# --- caller-supplied items ------------------------------------------------------------


def check_items(v: Violations, items: Sequence[KnowledgeItem]) -> None:
    """Each problem named by its field (`knowledge[3].text`); limits in docs/configuration.md."""
    if len(items) > MAX_REQUEST_ITEMS:
        v.add("knowledge", f"at most {MAX_REQUEST_ITEMS} items, got {len(items)}")
        return
    total = 0
    for i, item in enumerate(items):
        total += _check_item(v, f"knowledge[{i}]", item)
    if total > MAX_REQUEST_KNOWLEDGE_BYTES:
        v.add(
            "knowledge",
            f"the items' text is {total} bytes; at most {MAX_REQUEST_KNOWLEDGE_BYTES} in one call",
        )


def _check_item(v: Violations, at: str, item: KnowledgeItem) -> int:
    check_text(v, f"{at}.text", item.text, MAX_ITEM_BYTES)
    if not item.text.strip():
        v.add(f"{at}.text", "is required (not only whitespace)")
    _check_label(v, f"{at}.source_id", item.source_id, MAX_SOURCE_ID_CHARS)
    _check_label(v, f"{at}.title", item.title, MAX_TITLE_CHARS)
    _check_label(v, f"{at}.uri", item.uri, MAX_URI_CHARS)
    if item.score is not None and not math.isfinite(item.score):
        v.add(f"{at}.score", "must be a finite number")
    check_metadata(v, f"{at}.metadata", item.metadata)
    return len(item.text.encode("utf-8", "surrogatepass"))


def check_metadata(v: Violations, at: str, metadata: Metadata) -> None:
    if len(metadata) > MAX_METADATA_ENTRIES:
        v.add(at, f"at most {MAX_METADATA_ENTRIES} entries, got {len(metadata)}")
        return
    for key, value in metadata:
        if not key or len(key) > MAX_METADATA_KEY_CHARS or text_problem(key):
            shown = key[:MAX_METADATA_KEY_CHARS]
            v.add(f"{at}[{shown!r}]", f"keys are 1 to {MAX_METADATA_KEY_CHARS} characters of text")
        elif len(value) > MAX_METADATA_VALUE_CHARS or text_problem(value):
            v.add(f"{at}[{key!r}]", f"values are at most {MAX_METADATA_VALUE_CHARS} characters of text")


def _check_label(v: Violations, at: str, text: str, max_chars: int) -> None:
    if len(text) > max_chars:
        v.add(at, f"at most {max_chars} characters, got {len(text)}")
        return
    problem = text_problem(text)
    if problem:
        v.add(at, problem)


# --- documents as clients send them -----------------------------------------------------

DOCUMENT_FIELDS = ("text", "format", "title", "uri", "metadata", "expire_time")  # updatable


@dataclass(frozen=True, slots=True)
class DocumentDraft:
    document_id: str
    text: str = ""
    format: DocumentFormat = DocumentFormat.MARKDOWN
    title: str = ""
    uri: str = ""
    metadata: Metadata = ()
    expires_at: datetime | None = None


def check_drafts(v: Violations, drafts: Sequence[DocumentDraft], now: datetime) -> None:
    if not drafts:
        v.add("documents", "at least one document is required")
    if len(drafts) > MAX_DOCUMENTS_PER_CALL:
        v.add("documents", f"at most {MAX_DOCUMENTS_PER_CALL} per call, got {len(drafts)}")
        return
    seen: set[str] = set()
    for i, d in enumerate(drafts):
        check_draft(v, f"documents[{i}]", d, now)
        if d.document_id in seen:
            v.add(f"documents[{i}].document_id", "appears twice in this call")
        seen.add(d.document_id)


def check_draft(v: Violations, at: str, d: DocumentDraft, now: datetime) -> None:
    check_id(v, f"{at}.document_id", d.document_id)
    check_text(v, f"{at}.text", d.text, MAX_DOCUMENT_BYTES)
    if not d.text.strip():
        v.add(f"{at}.text", "is required (not only whitespace)")
    _check_label(v, f"{at}.title", d.title, MAX_TITLE_CHARS)
    _check_label(v, f"{at}.uri", d.uri, MAX_URI_CHARS)
    check_metadata(v, f"{at}.metadata", d.metadata)
    if d.expires_at is not None and d.expires_at <= now:
        v.add(f"{at}.expire_time", "must be in the future")


def chunk_documents(documents: Sequence[tuple[str, str, DocumentFormat]]) -> list[list[Chunk]]:
    """Each (field, text, format) cut into chunks, or InvalidArgument naming the text over
    MAX_DOCUMENT_CHUNKS (`documents[3].text`), or "documents" when the call's total passes
    MAX_CALL_CHUNKS. Bounded work: a document over its limit counts its limit against the
    call's, and the cut stops at the first chunk past either."""
    v = Violations()
    pieces: list[list[Chunk]] = []
    left = MAX_CALL_CHUNKS
    for at, text, fmt in documents:
        limit = min(MAX_DOCUMENT_CHUNKS, left)
        try:
            chunks = chunk_document(text, fmt, MAX_CHUNK_CHARS, MIN_CHUNK_CHARS, max_chunks=limit)
        except TooManyChunks:
            if limit < MAX_DOCUMENT_CHUNKS:
                v.add("documents", f"cut into more than {MAX_CALL_CHUNKS} chunks in all; send fewer per call")
                break
            v.add(f"{at}.text", f"cuts into more than {MAX_DOCUMENT_CHUNKS} chunks; split the document")
            left -= limit
            continue
        left -= len(chunks)
        pieces.append(chunks)
    v.raise_if_any()
    return pieces


def updated(d: Document, draft: DocumentDraft, mask: Sequence[str], now: datetime) -> Document:
    """The document with the masked fields of `draft` (text and format are re-chunked by the
    caller of this)."""
    fields = set(mask)
    text = draft.text if "text" in fields else d.text
    fmt = draft.format if "format" in fields else d.format
    title = draft.title if "title" in fields else d.title
    return Document(
        d.tenant_id, d.agent_id, d.document_id, title,
        draft.uri if "uri" in fields else d.uri, fmt, text,
        draft.metadata if "metadata" in fields else d.metadata,
        content_hash(fmt, title, text), d.chunk_count, d.created_at, now,
        draft.expires_at if "expire_time" in fields else d.expires_at,
    )  # fmt: skip


def check_mask(v: Violations, mask: Sequence[str]) -> None:
    if not mask:
        v.add("update_mask", f"is required: name the fields to set, of {', '.join(DOCUMENT_FIELDS)}")
    for path in mask:
        if path not in DOCUMENT_FIELDS:
            v.add("update_mask", f"path {path!r} is not updatable; use one of {', '.join(DOCUMENT_FIELDS)}")


def new_document(tenant_id: str, agent_id: str, d: DocumentDraft, chunks: int, now: datetime) -> Document:
    return Document(
        tenant_id, agent_id, d.document_id, d.title, d.uri, d.format, d.text, d.metadata,
        content_hash(d.format, d.title, d.text), chunks, now, now, d.expires_at,
    )  # fmt: skip


def embedded_text(d: Document, chunk: DocumentChunk) -> str:
    """What a chunk is embedded and matched as: its document's title and heading path give a
    passage the context its own words often leave out."""
    return headed_text(d.title, chunk.heading_path, chunk.text)


def headed_text(title: str, heading_path: Sequence[str], text: str) -> str:
    """`embedded_text` from the parts a row holds."""
    head = " > ".join(p for p in (title, *heading_path) if p)
    return f"{head}\n{text}" if head else text


def stored_item(hit: KnowledgeHit) -> KnowledgeItem:
    """A chunk found for a turn, as a candidate of the "[Knowledge]" section."""
    d, c = hit.document, hit.chunk
    return KnowledgeItem(
        text=c.text, source_id=d.document_id, title=d.title, uri=d.uri, score=hit.score,
        metadata=d.metadata, origin=KnowledgeOrigin.STORED, document_id=d.document_id, chunk_index=c.index,
    )  # fmt: skip
