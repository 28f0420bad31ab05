"""Digests in SQL: the work queue of the background digester (claimed with a lease so
replicas do not collide), the stored vectors FAISS caches per scope, and the reads
recall needs. Writes go through the group-commit writer. Leases and due times count on
the database's clock, so a replica whose clock runs ahead cannot take work leased by
another before the lease ends."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import Connection, RowMapping, Select, and_, bindparam, delete, func, or_, select, update

from episodic.domain.changes import Declared, Recorded
from episodic.domain.model import Message
from episodic.domain.ports.episodes import ReadBatch
from episodic.domain.recall import Digest, DigestState, Hit, Scope, Vector, vector_key
from episodic.store import lexical
from episodic.store import schema as s
from episodic.store.cluster_clock import database_now
from episodic.store.database import Database
from episodic.store.rows import digest_from_row, digest_values, message_from_row
from episodic.store.writer import GroupCommitWriter

D, V, T, M = s.digests, s.digest_vectors, s.digest_texts, s.messages
_WAITING = (DigestState.PENDING.value, DigestState.FAILED.value)
# Never claimed since its episode closed (a new digest is due when made, on whatever clock
# the closing replica had; a claim or a failure moves next_attempt_at off updated_at).
_FRESH = D.c.next_attempt_at == D.c.updated_at


class SqlDigestStore:
    def __init__(
        self, db: Database, writer: GroupCommitWriter, common_words: lexical.CommonWords | None = None
    ) -> None:
        self._db = db
        self._writer = writer
        self._common = common_words or lexical.CommonWords()

    async def claim_due(self, now: datetime, limit: int, lease: timedelta) -> list[Digest]:
        """Digests due for an attempt, pushed `lease` into the future so no other worker
        takes them meanwhile (a crashed worker's claims come back when the lease ends).
        `now` is this replica's clock; on PostgreSQL the database's is used instead."""

        def op(conn: Connection) -> list[Digest]:
            at = database_now(conn, now)
            due = select(D).where(D.c.state.in_(_WAITING), or_(D.c.next_attempt_at <= at, _FRESH))
            rows = conn.execute(
                due.order_by(D.c.next_attempt_at).limit(limit).with_for_update(skip_locked=True)
            )
            claimed = [digest_from_row(r) for r in rows.mappings()]
            for d in claimed:
                conn.execute(_where(d).values(next_attempt_at=at + lease))
            return claimed

        return await self._writer.run(op)

    async def stale(self, model: str, limit: int) -> list[Digest]:
        """READY digests embedded with another model: to re-embed after a model change."""
        stmt = (
            select(D).where(D.c.state == DigestState.READY.value, D.c.embedding_model != model).limit(limit)
        )
        return await self._db.read(lambda conn: [digest_from_row(r) for r in conn.execute(stmt).mappings()])

    async def count_stale(self, model: str) -> int:
        stmt = select(func.count()).where(D.c.state == DigestState.READY.value, D.c.embedding_model != model)
        return await self._db.read(lambda conn: _count(conn, stmt))

    async def count_outstanding(self, model: str) -> int:
        stale = (D.c.state == DigestState.READY.value) & (D.c.embedding_model != model)
        stmt = select(func.count()).where((D.c.state != DigestState.READY.value) | stale)
        return await self._db.read(lambda conn: _count(conn, stmt))

    async def transcript(self, digest: Digest) -> list[Message]:
        """The episode's messages less the retracted ones: what the digest and extraction read."""
        stmt = select(M).where(
            M.c.tenant_id == digest.tenant_id, M.c.episode_id == digest.episode_id, M.c.retracted_at.is_(None)
        )
        stmt = stmt.order_by(M.c.seq)
        return await self._db.read(lambda conn: [message_from_row(r) for r in conn.execute(stmt).mappings()])

    async def save_ready(
        self, digest: Digest, vectors: Sequence[Vector], body: str, declared: Declared[bool]
    ) -> Recorded[bool]:
        def op(conn: Connection) -> bool:
            if conn.execute(_where(digest).values(digest_values(digest))).rowcount == 0:
                return False  # erased meanwhile: its vectors and text would have no digest to belong to
            _replace_vectors(conn, digest, vectors)
            _replace_text(conn, digest, body)
            return True

        return await self._writer.run(op, declared)

    async def save_failed(self, digest: Digest, declared: Declared[bool]) -> Recorded[bool]:
        """The rules' back-off (next attempt - updated, both on the replica's clock) is
        counted from the database's clock. False when the row is gone (erased meanwhile)."""

        def op(conn: Connection) -> bool:
            backoff = digest.next_attempt_at - digest.updated_at
            due = database_now(conn, digest.updated_at) + backoff
            values = {**digest_values(digest), "next_attempt_at": due}
            return bool(conn.execute(_where(digest).values(values)).rowcount)

        return await self._writer.run(op, declared)

    async def get(self, tenant_id: str, episode_id: str) -> Digest | None:
        stmt = select(D).where(D.c.tenant_id == tenant_id, D.c.episode_id == episode_id)
        row = await self._db.read(lambda conn: conn.execute(stmt).mappings().first())
        return digest_from_row(row) if row else None

    async def vector_keys(self, tenant_id: str, model: str, agent_id: str = "") -> list[tuple[Scope, str]]:
        """(scope, key) of every stored vector of `model` in one tenant (or one agent of it):
        the keys the index should hold, for comparing it with SQL."""
        stmt = select(V.c.agent_id, V.c.user_id, V.c.episode_id, V.c.chunk)
        stmt = stmt.where(V.c.tenant_id == tenant_id, V.c.model == model)
        if agent_id:
            stmt = stmt.where(V.c.agent_id == agent_id)
        return await self._db.read(
            lambda conn: [_scoped_key(tenant_id, r) for r in conn.execute(stmt).mappings()]
        )

    async def recent(
        self,
        scope: Scope,
        limit: int,
        after: datetime | None,
        before: datetime | None,
        batch: ReadBatch | None = None,
    ) -> list[Digest]:
        stmt = _RECENT[after is not None, before is not None]
        params = {**_scope_params(scope), **_period_params(after, before), "b_limit": limit}
        return await self._db.quick_read(
            lambda conn: [digest_from_row(r) for r in conn.execute(stmt, params).mappings()], batch
        )

    async def ready_among(
        self,
        scope: Scope,
        episode_ids: Sequence[str],
        after: datetime | None,
        before: datetime | None,
        batch: ReadBatch | None = None,
    ) -> dict[str, Digest]:
        """By primary key, then filtered here: SQLite walked the scope's READY digests in its
        (scope, state, ended_at) index to find the few candidates among them."""
        if not episode_ids:
            return {}
        params = {"b_tenant": scope.tenant_id, "b_ids": list(episode_ids)}
        return await self._db.quick_read(
            lambda conn: {
                d.episode_id: d
                for d in map(digest_from_row, conn.execute(_BY_IDS, params).mappings())
                if _ready_in_scope(d, scope, after, before)
            },
            batch,
        )

    async def pending_count(self, scope: Scope, batch: ReadBatch | None = None) -> int:
        params = _scope_params(scope)
        return await self._db.quick_read(lambda conn: int(conn.scalar(_PENDING_COUNT, params) or 0), batch)

    async def waiting(self) -> list[tuple[str, int, datetime | None]]:
        """The digester's queue, over every tenant: per waiting state, how many digests and
        when the oldest one's episode ended (for metrics)."""
        stmt = select(D.c.state, func.count(), func.min(D.c.ended_at)).where(D.c.state.in_(_WAITING))
        stmt = stmt.group_by(D.c.state)
        return await self._db.read(lambda conn: [(r[0], int(r[1]), r[2]) for r in conn.execute(stmt)])

    async def lexical(
        self, scope: Scope, query: str, limit: int, batch: ReadBatch | None = None
    ) -> list[Hit]:
        return await self._db.read(
            lambda conn: lexical.search(conn, scope, query, limit, self._common), batch
        )


def _count(conn: Connection, stmt: Any) -> int:
    return int(conn.scalar(stmt) or 0)


def _where(digest: Digest):  # type: ignore[no-untyped-def]
    return update(D).where(D.c.tenant_id == digest.tenant_id, D.c.episode_id == digest.episode_id)


# Recall's reads, built once (a turn makes several): each call only binds its values, so
# SQLAlchemy reuses the statement's cache key and compiled form instead of building a new
# tree per call. One statement per combination of the optional period bounds.
_IN_SCOPE = and_(
    D.c.tenant_id == bindparam("b_tenant"),
    D.c.agent_id == bindparam("b_agent"),
    D.c.user_id == bindparam("b_user"),
)


def _scope_params(scope: Scope) -> dict[str, object]:
    return {"b_tenant": scope.tenant_id, "b_agent": scope.agent_id, "b_user": scope.user_id}


def _period_params(after: datetime | None, before: datetime | None) -> dict[str, object]:
    bounds = {"b_after": after, "b_before": before}
    return {name: value for name, value in bounds.items() if value is not None}


def _ready_in(after: bool, before: bool) -> Select[Any]:
    stmt = select(D).where(_IN_SCOPE, D.c.state == DigestState.READY.value)
    if after:
        stmt = stmt.where(D.c.ended_at >= bindparam("b_after"))
    if before:
        stmt = stmt.where(D.c.ended_at < bindparam("b_before"))
    return stmt


_PERIODS = [(after, before) for after in (False, True) for before in (False, True)]
_RECENT = {
    p: _ready_in(*p).order_by(D.c.ended_at.desc(), D.c.episode_id).limit(bindparam("b_limit"))
    for p in _PERIODS
}
_BY_IDS = select(D).where(
    D.c.tenant_id == bindparam("b_tenant"), D.c.episode_id.in_(bindparam("b_ids", expanding=True))
)


def _ready_in_scope(d: Digest, scope: Scope, after: datetime | None, before: datetime | None) -> bool:
    """What `_ready_in`'s WHERE asks of a row, asked of a digest read by its key."""
    return (
        d.agent_id == scope.agent_id
        and d.user_id == scope.user_id
        and d.state is DigestState.READY
        and (after is None or d.ended_at >= after)
        and (before is None or d.ended_at < before)
    )


# IN, not !=: two index seeks instead of a walk over the scope's READY digests.
_PENDING_COUNT = select(func.count()).where(
    _IN_SCOPE, D.c.state.in_([DigestState.PENDING.value, DigestState.FAILED.value])
)


def _replace_vectors(conn: Connection, digest: Digest, vectors: Sequence[Vector]) -> None:
    key = (V.c.tenant_id == digest.tenant_id, V.c.episode_id == digest.episode_id)
    conn.execute(delete(V).where(*key))
    rows = [_vector_row(digest, chunk, v) for chunk, v in enumerate(vectors)]
    if rows:
        conn.execute(V.insert(), rows)


def _vector_row(digest: Digest, chunk: int, vector: Vector) -> dict[str, object]:
    return {
        "tenant_id": digest.tenant_id,
        "episode_id": digest.episode_id,
        "chunk": chunk,
        "agent_id": digest.agent_id,
        "user_id": digest.user_id,
        "model": digest.embedding_model,
        "dimension": len(vector),
        "vector": np.asarray(vector, dtype="<f4").tobytes(),
    }


def _replace_text(conn: Connection, digest: Digest, body: str) -> None:
    conn.execute(delete(T).where(T.c.tenant_id == digest.tenant_id, T.c.episode_id == digest.episode_id))
    scope = digest.scope
    values = {"tenant_id": scope.tenant_id, "episode_id": digest.episode_id, "agent_id": scope.agent_id}
    conn.execute(
        T.insert(), {**values, "user_id": scope.user_id, "body": body, "scope": lexical.scope_token(scope)}
    )


def _scoped_key(tenant_id: str, r: RowMapping) -> tuple[Scope, str]:
    return Scope(tenant_id, r["agent_id"], r["user_id"]), vector_key(r["episode_id"], r["chunk"])
