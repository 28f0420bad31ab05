"""Agent knowledge in SQL: each document's row and its chunks (text, place in the document,
headings, vector); their words are indexed in RAM (state/knowledge_words.py). Writes go
through the group-commit writer, each call one transaction; every read but the expiry sweep
and the counts is of one tenant's one agent.

The filter's rule is `domain/knowledge.passes`; `_passing` says it in the WHERE clause
(metadata pairs too: SQLite through json_each, PostgreSQL by JSONB containment), so a page's
`limit` is exact and its read bounded. tests/contracts holds the two to the same cases."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import (
    Connection,
    RowMapping,
    Select,
    and_,
    bindparam,
    delete,
    exists,
    func,
    literal,
    or_,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.sql.elements import ColumnElement

from episodic.domain.changes import Declared, Recorded
from episodic.domain.chunking import DocumentFormat
from episodic.domain.knowledge import (
    Document,
    DocumentChunk,
    KnowledgeFilter,
    chunk_key,
    expired,
    headed_text,
    knowledge_scope,
    metadata_of,
    split_chunk_key,
)
from episodic.domain.ports.knowledge import DocumentWrite
from episodic.domain.recall import Scope, Vector
from episodic.errors import AlreadyExists, NotFound
from episodic.store import schema as s
from episodic.store.database import Database
from episodic.store.dialect import InsertIgnoringConflicts
from episodic.store.writer import GroupCommitWriter

D, C = s.knowledge_documents, s.knowledge_chunks
Key = tuple[str, str, str]  # (tenant, agent, document)
_INSERT_DOCUMENT = InsertIgnoringConflicts(D)
_CHUNK_COLUMNS = (C.c.document_id, C.c.chunk_index, C.c.text, C.c.start_char, C.c.end_char, C.c.heading_path)
_WITHOUT_TEXT = (*[c for c in D.c if c.name != "text"], literal("").label("text"))
_WITH_CHUNKS = D.join(
    C, and_(C.c.tenant_id == D.c.tenant_id, C.c.agent_id == D.c.agent_id, C.c.document_id == D.c.document_id)
)

# A search's rows (a few chunks by primary key, ~0.1 ms) are read on the calling thread: a hop
# to a reader thread and its BEGIN/COMMIT cost ~0.7 ms more at 100k chunks (bench-knowledge).
# A turn's read-ahead of every candidate (~50-100) goes to a reader thread.
QUICK_CHUNKS = 32


class SqlKnowledgeStore:
    def __init__(self, db: Database, writer: GroupCommitWriter) -> None:
        self._db = db
        self._writer = writer

    async def create(
        self, writes: Sequence[DocumentWrite], declared: Declared[list[tuple[Document, bool]]]
    ) -> Recorded[list[tuple[Document, bool]]]:
        return await self._writer.run(lambda conn: _create(conn, writes), declared)

    async def replace(self, write: DocumentWrite, declared: Declared[Document]) -> Recorded[Document]:
        def op(conn: Connection) -> Document:
            d = write.document
            created_at = conn.execute(
                select(D.c.created_at).where(*_document(_key(d))).with_for_update()
            ).scalar()
            if created_at is None:
                raise NotFound("document", d.document_id)
            kept = dataclasses.replace(d, created_at=created_at)
            conn.execute(update(D).where(*_document(_key(d))).values(_changed_values(kept)))
            conn.execute(delete(C).where(*_chunks_of(_key(d))))
            _insert_chunks(conn, write)
            return kept

        return await self._writer.run(op, declared)

    async def delete(
        self, tenant_id: str, agent_id: str, document_id: str, declared: Declared[Document]
    ) -> Recorded[Document]:
        key = (tenant_id, agent_id, document_id)

        def op(conn: Connection) -> Document:
            row = conn.execute(select(D).where(*_document(key)).with_for_update()).mappings().first()
            if row is None:
                raise NotFound("document", document_id)
            # The chunks would go in the cascade; named here so no setting of the connection
            # (SQLite's foreign_keys) decides it. SQLite's triggers take their full text along.
            conn.execute(delete(C).where(*_chunks_of(key)))
            conn.execute(delete(D).where(*_document(key)))
            return document_from_row(row)

        return await self._writer.run(op, declared)

    async def get(self, tenant_id: str, agent_id: str, document_id: str, now: datetime) -> Document:
        stmt = select(D).where(*_document((tenant_id, agent_id, document_id)))
        row = await self._db.read(lambda conn: conn.execute(stmt).mappings().first())
        found = document_from_row(row) if row is not None else None
        if found is None or expired(found, now):
            raise NotFound("document", document_id)
        return found

    async def page(
        self,
        tenant_id: str,
        agent_id: str,
        where: KnowledgeFilter,
        now: datetime,
        after: str | None,
        limit: int,
    ) -> list[Document]:
        def read(conn: Connection) -> list[Document]:
            stmt = select(D).where(*_passing(conn, tenant_id, agent_id, where, now))
            if after is not None:
                stmt = stmt.where(D.c.document_id > after)
            stmt = stmt.order_by(D.c.document_id).limit(limit)
            return [document_from_row(r) for r in conn.execute(stmt).mappings()]

        return await self._db.read(read)

    async def chunks(
        self, tenant_id: str, agent_id: str, keys: Sequence[str], where: KnowledgeFilter, now: datetime
    ) -> dict[str, tuple[Document, DocumentChunk]]:
        named = _parsed(keys)
        if not named:
            return {}

        def read(conn: Connection) -> dict[str, tuple[Document, DocumentChunk]]:
            if where == KnowledgeFilter():  # one statement, both rows; expiry checked here
                joined = _named_rows(conn, tenant_id, agent_id, named, with_documents=True).mappings()
                rows = [(_bare_document(r), _chunk_from_row(r)) for r in joined]
                rows = [row for row in rows if not expired(row[0], now)]
            else:
                passing = _passing(conn, tenant_id, agent_id, where, now)
                rows = _pairs(conn, passing, _named_rows(conn, tenant_id, agent_id, named).mappings().all())
            found = {row[1].key: row for row in rows}
            return {k: found[k] for k in dict.fromkeys(chunk_key(*n) for n in named) if k in found}

        if where == KnowledgeFilter() and len(named) <= QUICK_CHUNKS:  # one statement of a few rows
            return await self._db.quick_read(read)
        return await self._db.read(read)

    async def texts(
        self, tenant_id: str, agent_id: str, document_ids: Sequence[str] | None = None
    ) -> list[tuple[str, str]]:
        stmt = (
            select(D.c.title, *_CHUNK_COLUMNS)
            .select_from(_WITH_CHUNKS)
            .where(D.c.tenant_id == tenant_id, D.c.agent_id == agent_id)
            .order_by(C.c.document_id, C.c.chunk_index)
        )
        if document_ids is not None:
            stmt = stmt.where(D.c.document_id.in_(list(document_ids)))

        def read(conn: Connection) -> list[tuple[str, str]]:
            rows = conn.execute(stmt).mappings()
            return [(chunk_key(r["document_id"], r["chunk_index"]), _matched_text(r)) for r in rows]

        return await self._db.read(read)

    async def chunk_page(
        self, tenant_id: str, agent_id: str, after: tuple[str, int] | None, limit: int
    ) -> list[tuple[Document, DocumentChunk]]:
        stmt = (
            select(*_CHUNK_COLUMNS, *_DOCUMENT_FIELDS)
            .select_from(_WITH_CHUNKS)
            .where(C.c.tenant_id == tenant_id, C.c.agent_id == agent_id)
            .order_by(C.c.document_id, C.c.chunk_index)
            .limit(limit)
        )
        if after is not None:  # the primary key's order: (document_id, chunk_index)
            document_id, index = after
            later = and_(C.c.document_id == document_id, C.c.chunk_index > index)
            stmt = stmt.where(or_(C.c.document_id > document_id, later))

        def read(conn: Connection) -> list[tuple[Document, DocumentChunk]]:
            documents: dict[str, Document] = {}
            page = []
            for r in conn.execute(stmt).mappings():
                d = documents.get(r["document_id"])
                if d is None:
                    d = documents[r["document_id"]] = _bare_document(r)
                page.append((d, _chunk_from_row(r)))
            return page

        return await self._db.read(read)

    async def newest(
        self, tenant_id: str, agent_id: str, where: KnowledgeFilter, now: datetime, limit: int
    ) -> list[tuple[Document, DocumentChunk]]:
        """At most `limit` chunks: the newest document's first, in order, then the next
        document's (the last one taken may be cut short). Ties of updated_at by document_id."""

        def read(conn: Connection) -> list[tuple[Document, DocumentChunk]]:
            passing = _passing(conn, tenant_id, agent_id, where, now)
            stmt = _with_chunks(passing).order_by(D.c.updated_at.desc(), D.c.document_id, C.c.chunk_index)
            return _pairs(conn, passing, conn.execute(stmt.limit(limit)).mappings().all())

        return await self._db.read(read)

    async def expired(self, now: datetime, limit: int) -> list[Document]:
        stmt = select(D).where(D.c.expires_at <= now)
        stmt = stmt.order_by(D.c.expires_at, D.c.tenant_id, D.c.agent_id, D.c.document_id).limit(limit)
        return await self._db.read(lambda conn: [document_from_row(r) for r in conn.execute(stmt).mappings()])

    async def vector_keys(self, tenant_id: str, model: str, agent_id: str = "") -> list[tuple[Scope, str]]:
        stmt = select(C.c.agent_id, C.c.document_id, C.c.chunk_index).where(
            C.c.tenant_id == tenant_id, C.c.model == model, C.c.vector.is_not(None)
        )
        if agent_id:
            stmt = stmt.where(C.c.agent_id == agent_id)

        def read(conn: Connection) -> list[tuple[Scope, str]]:
            rows = conn.execute(stmt).all()
            return [(knowledge_scope(tenant_id, a), chunk_key(d, i)) for a, d, i in rows]

        return await self._db.read(read)

    async def counts(self) -> tuple[int, int]:
        documents = select(func.count()).select_from(D).scalar_subquery()
        chunks = select(func.count()).select_from(C).scalar_subquery()
        row = await self._db.read(lambda conn: conn.execute(select(documents, chunks)).one())
        return int(row[0]), int(row[1])


# --- writes -------------------------------------------------------------------------------


def _create(conn: Connection, writes: Sequence[DocumentWrite]) -> list[tuple[Document, bool]]:
    """Every document checked against what is held (and what comes before it in the batch)
    before anything is written; a conflict raises, and the writer rolls the batch back."""
    held = _held(conn, [_key(w.document) for w in writes])
    outcomes: list[tuple[Document, bool]] = []
    new: list[DocumentWrite] = []
    for w in writes:
        key = _key(w.document)
        stored = held.get(key)
        if stored is not None:
            outcomes.append((_same(stored, w.document), False))
            continue
        held[key] = w.document
        outcomes.append((w.document, True))
        new.append(w)
    raced: dict[Key, Document] = {}
    for w in new:
        if _INSERT_DOCUMENT.inserted(conn, document_values(w.document)):
            _insert_chunks(conn, w)
        else:  # created meanwhile by another transaction, committed since this one looked
            key = _key(w.document)
            raced[key] = _same(_held(conn, [key])[key], w.document)
    if not raced:
        return outcomes
    return [(raced[_key(d)], False) if made and _key(d) in raced else (d, made) for d, made in outcomes]


def _same(stored: Document, wanted: Document) -> Document:
    """A create of a held id: the same content is a retry (the stored document)."""
    if stored.content_hash != wanted.content_hash:
        raise AlreadyExists(
            f"document {wanted.document_id!r} already exists with other content", reason="DOCUMENT_EXISTS"
        )
    return stored


def _held(conn: Connection, keys: Iterable[Key]) -> dict[Key, Document]:
    by_agent: dict[tuple[str, str], list[str]] = {}
    for tenant_id, agent_id, document_id in keys:
        by_agent.setdefault((tenant_id, agent_id), []).append(document_id)
    found: dict[Key, Document] = {}
    for (tenant_id, agent_id), ids in by_agent.items():
        stmt = select(D).where(D.c.tenant_id == tenant_id, D.c.agent_id == agent_id, D.c.document_id.in_(ids))
        found |= {_key(d): d for d in (document_from_row(r) for r in conn.execute(stmt).mappings())}
    return found


def _insert_chunks(conn: Connection, write: DocumentWrite) -> None:
    rows = chunk_values(write)
    if rows:
        conn.execute(C.insert(), rows)


# --- rows ---------------------------------------------------------------------------------


def document_values(d: Document) -> dict[str, Any]:
    return {
        "tenant_id": d.tenant_id,
        "agent_id": d.agent_id,
        "document_id": d.document_id,
        "title": d.title,
        "uri": d.uri,
        "format": d.format.value,
        "text": d.text,
        "metadata": dict(d.metadata),
        "content_hash": d.content_hash,
        "chunk_count": d.chunk_count,
        "created_at": d.created_at,
        "updated_at": d.updated_at,
        "expires_at": d.expires_at,
    }


def _changed_values(d: Document) -> dict[str, Any]:
    """What a replace writes: all but the key and created_at."""
    values = document_values(d)
    for kept in ("tenant_id", "agent_id", "document_id", "created_at"):
        del values[kept]
    return values


def chunk_values(write: DocumentWrite) -> list[dict[str, Any]]:
    """One row per chunk, with its vector when the write carries them (every chunk's)."""
    d = write.document
    vectors: Sequence[Vector | None] = (
        write.vectors if write.vectors is not None else [None] * len(write.chunks)
    )
    return [
        {
            "tenant_id": d.tenant_id,
            "agent_id": d.agent_id,
            "document_id": d.document_id,
            "chunk_index": c.index,
            "text": c.text,
            "start_char": c.start,
            "end_char": c.end,
            "heading_path": list(c.heading_path),
            "model": write.model if v is not None else None,
            "vector": np.asarray(v, dtype="<f4").tobytes() if v is not None else None,
        }
        for c, v in zip(write.chunks, vectors, strict=True)
    ]


def document_from_row(r: Mapping[Any, Any]) -> Document:
    return Document(
        tenant_id=r["tenant_id"],
        agent_id=r["agent_id"],
        document_id=r["document_id"],
        title=r["title"],
        uri=r["uri"],
        format=DocumentFormat(r["format"]),
        text=r["text"],
        metadata=metadata_of(r["metadata"] or {}),
        content_hash=r["content_hash"],
        chunk_count=r["chunk_count"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        expires_at=r["expires_at"],
    )


def _pairs(
    conn: Connection, passing: list[ColumnElement[bool]], rows: Sequence[RowMapping]
) -> list[tuple[Document, DocumentChunk]]:
    """Chunk rows (of _CHUNK_COLUMNS), in their order, each with its document without its text
    (which may be megabytes; a search wants its fields), read once by the same filter (on
    PostgreSQL a document changed between the two statements may have stopped passing: its
    chunks are left out)."""
    ids = sorted({r["document_id"] for r in rows})
    if not ids:
        return []
    stmt = select(*_WITHOUT_TEXT).where(*passing, D.c.document_id.in_(ids))
    documents = {r["document_id"]: document_from_row(r) for r in conn.execute(stmt).mappings()}
    return [(documents[r["document_id"]], _chunk_from_row(r)) for r in rows if r["document_id"] in documents]


def _matched_text(r: RowMapping) -> str:
    """`embedded_text` from a chunk row with its document's title."""
    return headed_text(r["title"], r["heading_path"] or (), r["text"])


def _chunk_from_row(r: RowMapping) -> DocumentChunk:
    return DocumentChunk(
        r["document_id"], r["chunk_index"], r["text"], r["start_char"], r["end_char"],
        tuple(r["heading_path"] or ()),
    )  # fmt: skip


def _key(d: Document) -> Key:
    return d.tenant_id, d.agent_id, d.document_id


# The chunks named by (document, index), each found by primary key, in one statement compiled
# once: a row-value IN made SQLite scan every chunk of the agent, and a statement built per call
# (a UNION ALL branch per document) cost ~9 ms of SQLAlchemy compiling for 50 keys. SQLite walks
# the pairs (a JSON array) and looks each up (CROSS JOIN fixes that order); PostgreSQL's planner
# uses the primary key for the row-value IN. Unfiltered (a search's rows), each chunk comes with
# its document's fields in the same statement: one statement instead of two saved ~1 ms a search
# at 100k chunks (bench-knowledge).
_NAMED_SQL = (
    "SELECT {columns} FROM json_each(:pairs) AS k CROSS JOIN knowledge_chunks AS c "
    "ON c.tenant_id = :t AND c.agent_id = :a AND c.document_id = json_extract(k.value, '$[0]') "
    "AND c.chunk_index = json_extract(k.value, '$[1]'){join}"
)
_CHUNK_SQL = "c.document_id, c.chunk_index, c.text, c.start_char, c.end_char, c.heading_path"
# A chunk's document's fields but its text (which may be megabytes; a search wants its fields).
_DOCUMENT_FIELDS = tuple(c for c in D.c if c.name not in ("document_id", "text"))
_NAMED_SQLITE = text(_NAMED_SQL.format(columns=_CHUNK_SQL, join="")).columns(*_CHUNK_COLUMNS)
_NAMED_SQLITE_WITH_DOCUMENTS = text(
    _NAMED_SQL.format(
        columns=_CHUNK_SQL + "".join(f", d.{c.name}" for c in _DOCUMENT_FIELDS),
        join=" JOIN knowledge_documents AS d "
        "ON d.tenant_id = c.tenant_id AND d.agent_id = c.agent_id AND d.document_id = c.document_id",
    )
).columns(*_CHUNK_COLUMNS, *_DOCUMENT_FIELDS)
_NAMED_KEYS = (
    C.c.tenant_id == bindparam("t"),
    C.c.agent_id == bindparam("a"),
    tuple_(C.c.document_id, C.c.chunk_index).in_(bindparam("pairs", expanding=True)),
)
_NAMED_POSTGRES = select(*_CHUNK_COLUMNS).where(*_NAMED_KEYS)
_NAMED_POSTGRES_WITH_DOCUMENTS = (
    select(*_CHUNK_COLUMNS, *_DOCUMENT_FIELDS).select_from(_WITH_CHUNKS).where(*_NAMED_KEYS)
)


def _named_rows(
    conn: Connection,
    tenant_id: str,
    agent_id: str,
    named: Sequence[tuple[str, int]],
    with_documents: bool = False,
) -> Any:
    if conn.dialect.name == "sqlite":
        pairs = json.dumps([[d, i] for d, i in named])
        lite = _NAMED_SQLITE_WITH_DOCUMENTS if with_documents else _NAMED_SQLITE
        return conn.execute(lite, {"pairs": pairs, "t": tenant_id, "a": agent_id})
    pg = _NAMED_POSTGRES_WITH_DOCUMENTS if with_documents else _NAMED_POSTGRES
    return conn.execute(pg, {"pairs": list(named), "t": tenant_id, "a": agent_id})


def _bare_document(r: RowMapping) -> Document:
    """A chunk row's document (of `_DOCUMENT_FIELDS`), without its text."""
    return document_from_row({**r, "text": ""})


def _parsed(keys: Sequence[str]) -> list[tuple[str, int]]:
    """(document, index) of each well-formed chunk key, once; others name no chunk."""
    named: dict[tuple[str, int], None] = {}
    for key in keys:
        try:
            named.setdefault(split_chunk_key(key), None)
        except ValueError:
            continue
    return list(named)


# --- filters ------------------------------------------------------------------------------


def _document(key: Key) -> list[ColumnElement[bool]]:
    tenant_id, agent_id, document_id = key
    return [D.c.tenant_id == tenant_id, D.c.agent_id == agent_id, D.c.document_id == document_id]


def _chunks_of(key: Key) -> list[ColumnElement[bool]]:
    tenant_id, agent_id, document_id = key
    return [C.c.tenant_id == tenant_id, C.c.agent_id == agent_id, C.c.document_id == document_id]


def _passing(
    conn: Connection, tenant_id: str, agent_id: str, where: KnowledgeFilter, now: datetime
) -> list[ColumnElement[bool]]:
    """`knowledge.passes` in SQL, for one agent's documents."""
    found = [
        D.c.tenant_id == tenant_id,
        D.c.agent_id == agent_id,
        or_(D.c.expires_at.is_(None), D.c.expires_at > now),
    ]
    if where.metadata:
        found += _has_metadata(conn, where.metadata)
    if where.updated_after is not None:
        found.append(D.c.updated_at >= where.updated_after)
    if where.updated_before is not None:
        found.append(D.c.updated_at < where.updated_before)
    return found


def _has_metadata(conn: Connection, pairs: Sequence[tuple[str, str]]) -> list[ColumnElement[bool]]:
    """Every pair held, exactly: JSONB containment on PostgreSQL; on SQLite one json_each
    lookup per pair (keys are bound as values, never spelt into a JSON path)."""
    if conn.dialect.name == "postgresql":
        return [D.c.metadata.op("@>")(literal(dict(pairs), JSONB))]
    found: list[ColumnElement[bool]] = []
    for key, value in pairs:
        entry = func.json_each(D.c.metadata).table_valued("key", "value", "type").alias()
        found.append(exists().where(entry.c.key == key, entry.c.type == "text", entry.c.value == value))
    return found


def _with_chunks(passing: list[ColumnElement[bool]]) -> Select[Any]:
    """The chunks of the documents `passing` (a `_passing`) lets through."""
    return select(*_CHUNK_COLUMNS).select_from(_WITH_CHUNKS).where(*passing)
