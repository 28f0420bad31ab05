"""The `ScopeVectorSource` port: one scope's stored vectors of the current embedding model
(digests', memories', agent knowledge's), read when a replica's index cache loads or
refreshes that scope (state/index_cache.py), or a page at a time when the scope is too
large to hold and is searched as it is read (`ScopeVectorPages`, pages in key order after
the last key read). The reads go by the scope's index (migration 0008; knowledge's by its
primary key, migration 0011)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
from sqlalchemy import Connection, Select, select, tuple_

from episodic.domain.knowledge import chunk_key
from episodic.domain.memories import MemoryState
from episodic.domain.recall import Scope, Vector, episode_of, vector_key
from episodic.store import schema as s
from episodic.store.database import Database

V, M, K = s.digest_vectors, s.memories, s.knowledge_chunks
Read = tuple[list[str], list[Vector]]


class _ScopeReads:
    """A whole scope, or some of its items, in one read; or a page of the scope."""

    def __init__(self, db: Database, model: str) -> None:
        self._db = db
        self._model = model

    async def scope_vectors(self, scope: Scope) -> Read:
        return await self._db.read(lambda conn: self._read(conn, scope, None))

    async def item_vectors(self, scope: Scope, items: Sequence[str]) -> Read:
        return await self._db.read(lambda conn: self._read(conn, scope, list(items)))

    async def scope_vector_page(self, scope: Scope, after: str, limit: int) -> Read:
        return await self._db.read(lambda conn: self._page(conn, scope, after, limit))

    async def scope_vectors_upto(self, scope: Scope, limit: int) -> Read:
        return await self._db.read(lambda conn: self._upto(conn, scope, limit))

    def _read(self, conn: Connection, scope: Scope, items: list[str] | None) -> Read:
        raise NotImplementedError

    def _page(self, conn: Connection, scope: Scope, after: str, limit: int) -> Read:
        raise NotImplementedError

    def _upto(self, conn: Connection, scope: Scope, limit: int) -> Read:
        raise NotImplementedError


class SqlDigestVectors(_ScopeReads):
    """Digests' vectors, keyed "<episode>#<chunk>"."""

    def _read(self, conn: Connection, scope: Scope, items: list[str] | None) -> Read:
        stmt = self._scope(scope)
        if items is not None:
            stmt = stmt.where(V.c.episode_id.in_(items))
        return self._rows(conn, stmt)

    def _page(self, conn: Connection, scope: Scope, after: str, limit: int) -> Read:
        stmt = self._scope(scope)
        if after:
            stmt = stmt.where(tuple_(V.c.episode_id, V.c.chunk) > (episode_of(after), _chunk_of(after)))
        return self._rows(conn, stmt.order_by(V.c.episode_id, V.c.chunk).limit(limit))

    def _upto(self, conn: Connection, scope: Scope, limit: int) -> Read:
        return self._rows(conn, self._scope(scope).limit(limit))

    def _scope(self, scope: Scope) -> Select[Any]:
        return select(V.c.episode_id, V.c.chunk, V.c.vector).where(
            V.c.tenant_id == scope.tenant_id,
            V.c.agent_id == scope.agent_id,
            V.c.user_id == scope.user_id,
            V.c.model == self._model,
        )

    @staticmethod
    def _rows(conn: Connection, stmt: Select[Any]) -> Read:
        rows = conn.execute(stmt).all()
        return [vector_key(e, c) for e, c, _ in rows], [_vector(v) for *_, v in rows]


class SqlMemoryVectors(_ScopeReads):
    """Promoted memories' vectors, keyed by memory id."""

    def _read(self, conn: Connection, scope: Scope, items: list[str] | None) -> Read:
        stmt = self._scope(scope)
        if items is not None:
            stmt = stmt.where(M.c.memory_id.in_(items))
        return self._rows(conn, stmt)

    def _page(self, conn: Connection, scope: Scope, after: str, limit: int) -> Read:
        stmt = self._scope(scope)
        if after:
            stmt = stmt.where(M.c.memory_id > after)
        return self._rows(conn, stmt.order_by(M.c.memory_id).limit(limit))

    def _upto(self, conn: Connection, scope: Scope, limit: int) -> Read:
        return self._rows(conn, self._scope(scope).limit(limit))

    def _scope(self, scope: Scope) -> Select[Any]:
        return select(M.c.memory_id, M.c.vector).where(
            M.c.tenant_id == scope.tenant_id,
            M.c.agent_id == scope.agent_id,
            M.c.user_id == scope.user_id,
            M.c.state == MemoryState.PROMOTED.value,
            M.c.model == self._model,
            M.c.vector.is_not(None),
        )

    @staticmethod
    def _rows(conn: Connection, stmt: Select[Any]) -> Read:
        rows = conn.execute(stmt).all()
        return [m for m, _ in rows], [_vector(v) for _, v in rows]


class SqlKnowledgeVectors(_ScopeReads):
    """An agent's knowledge chunks' vectors, keyed by chunk key ("<document>#<index>"); the
    scope is `knowledge_scope(tenant, agent)` (no user), its items document ids (every chunk
    of each). Expired documents' chunks stay until the expiry sweep deletes them (reads
    filter them out)."""

    def _read(self, conn: Connection, scope: Scope, items: list[str] | None) -> Read:
        if scope.user_id:  # not a knowledge scope (those have no user): it holds no knowledge
            return [], []
        stmt = self._scope(scope)
        if items is not None:
            stmt = stmt.where(K.c.document_id.in_(items))
        return self._rows(conn, stmt.order_by(K.c.document_id, K.c.chunk_index))

    def _page(self, conn: Connection, scope: Scope, after: str, limit: int) -> Read:
        if scope.user_id:
            return [], []
        stmt = self._scope(scope)
        if after:
            stmt = stmt.where(
                tuple_(K.c.document_id, K.c.chunk_index) > (episode_of(after), _chunk_of(after))
            )
        return self._rows(conn, stmt.order_by(K.c.document_id, K.c.chunk_index).limit(limit))

    def _upto(self, conn: Connection, scope: Scope, limit: int) -> Read:
        if scope.user_id:
            return [], []
        return self._rows(conn, self._scope(scope).order_by(K.c.document_id, K.c.chunk_index).limit(limit))

    def _scope(self, scope: Scope) -> Select[Any]:
        return select(K.c.document_id, K.c.chunk_index, K.c.vector).where(
            K.c.tenant_id == scope.tenant_id,
            K.c.agent_id == scope.agent_id,
            K.c.model == self._model,
            K.c.vector.is_not(None),
        )

    @staticmethod
    def _rows(conn: Connection, stmt: Select[Any]) -> Read:
        rows = conn.execute(stmt).all()
        return [chunk_key(d, i) for d, i, _ in rows], [_vector(v) for *_, v in rows]


def _chunk_of(key: str) -> int:
    return int(key.rpartition("#")[2])


def _vector(data: Any) -> Vector:
    return cast(Vector, np.frombuffer(data, dtype="<f4"))
