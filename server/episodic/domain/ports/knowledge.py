"""An agent's documents: rows, chunks, vectors and full text."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from episodic.domain.changes import Declared, Recorded
from episodic.domain.knowledge import Document, DocumentChunk, KnowledgeFilter
from episodic.domain.recall import Scope, Vector


@dataclass(frozen=True, slots=True)
class DocumentWrite:
    """One document as the store keeps it: the row, its chunks (in order) and each chunk's
    vector of `model` (a write carries every chunk's, or none: None)."""

    document: Document
    chunks: Sequence[DocumentChunk]
    vectors: Sequence[Vector] | None
    model: str


class KnowledgeStore(Protocol):
    """An agent's documents and their chunks: rows, vectors and full text (the FAISS index of
    an agent's knowledge is a cache of the vectors). Every read and write is of one tenant's
    one agent; `expired` is a cluster-wide sweep (see the module docstring)."""

    async def create(
        self, writes: Sequence[DocumentWrite], declared: Declared[list[tuple[Document, bool]]]
    ) -> Recorded[list[tuple[Document, bool]]]:
        """All of them in one transaction, or none. An id already held with the same
        content_hash is a retry: (the stored document, False) and nothing written; with
        another content_hash AlreadyExists, and nothing of the batch is written."""
        ...

    async def replace(self, write: DocumentWrite, declared: Declared[Document]) -> Recorded[Document]:
        """The document's row, chunks, vectors and full text replaced whole (its
        created_at kept); NotFound when it is not held."""
        ...

    async def delete(
        self, tenant_id: str, agent_id: str, document_id: str, declared: Declared[Document]
    ) -> Recorded[Document]:
        """The row with every chunk, vector and full-text row of it; NotFound when not held."""
        ...

    async def get(self, tenant_id: str, agent_id: str, document_id: str, now: datetime) -> Document:
        """NotFound when not held or expired."""
        ...

    async def page(
        self,
        tenant_id: str,
        agent_id: str,
        where: KnowledgeFilter,
        now: datetime,
        after: str | None,
        limit: int,
    ) -> list[Document]:
        """Documents passing `where`, by document_id, those after `after` (exclusive)."""
        ...

    async def chunks(
        self, tenant_id: str, agent_id: str, keys: Sequence[str], where: KnowledgeFilter, now: datetime
    ) -> dict[str, tuple[Document, DocumentChunk]]:
        """The chunks named by key (domain/knowledge.chunk_key) whose document passes `where`,
        each with its document without its text (""); keys not held (or filtered out) are
        left out."""
        ...

    async def texts(
        self, tenant_id: str, agent_id: str, document_ids: Sequence[str] | None = None
    ) -> list[tuple[str, str]]:
        """(chunk key, the text it is matched as: domain/knowledge.embedded_text) of every
        chunk of the agent's documents (of `document_ids` only, when given), expired ones
        too, in key order: what the agent's word index is built from."""
        ...

    async def chunk_page(
        self, tenant_id: str, agent_id: str, after: tuple[str, int] | None, limit: int
    ) -> list[tuple[Document, DocumentChunk]]:
        """At most `limit` of the agent's chunks after (document_id, index) `after`, in that
        order, expired ones too, each with its document without its text (""; one object
        per document in a page): the chunk cache is filled from these."""
        ...

    async def newest(
        self, tenant_id: str, agent_id: str, where: KnowledgeFilter, now: datetime, limit: int
    ) -> list[tuple[Document, DocumentChunk]]:
        """At most `limit` chunks of the most recently updated documents passing `where`,
        newest document first (ties by document_id), each document's chunks in order; each
        with its document without its text ("")."""
        ...

    async def expired(self, now: datetime, limit: int) -> list[Document]:
        """Documents of every tenant past their expires_at, oldest expiry first."""
        ...

    async def counts(self) -> tuple[int, int]:
        """(documents, chunks) held, of every tenant (metrics)."""
        ...

    async def vector_keys(self, tenant_id: str, model: str, agent_id: str = "") -> list[tuple[Scope, str]]:
        """(knowledge scope, chunk key) of every stored chunk vector of `model` in one tenant
        (or one agent of it): what the knowledge index should hold (StoredVectorKeys)."""
        ...
