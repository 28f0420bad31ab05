"""Long-term memories in SQL, with the vectors FAISS caches per scope. Writes go through the
group-commit writer; each `MemoryWrite` is one transaction.

The filter's rule is `domain/memory_filter.py`. Its topics and entities ("any of", over JSON
lists) run in Python on rows the SQL filters already narrowed to one scope: portable, and a
scope holds few memories."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any, cast

import numpy as np
from sqlalchemy import (
    Connection,
    RowMapping,
    Select,
    and_,
    bindparam,
    case,
    delete,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.sql.elements import ColumnElement

from episodic.domain.changes import Declared, Recorded
from episodic.domain.erasure import user_hash
from episodic.domain.memories import (
    Memory,
    MemoryKind,
    MemoryOrigin,
    MemoryState,
    Source,
    text_key,
)
from episodic.domain.memory_filter import passes, tagged
from episodic.domain.memory_merge import frame_key
from episodic.domain.ports.clock import Clock
from episodic.domain.ports.episodes import ReadBatch
from episodic.domain.ports.memories import MemoryFilter, MemoryWrite
from episodic.domain.recall import Scope, Vector
from episodic.domain.transfer import ErasureWatch
from episodic.store import schema as s
from episodic.store.database import Database
from episodic.store.erasure import erasures_known, hold_user, refuse_if_erased
from episodic.store.rows import Columns
from episodic.store.session_data import lock_episode
from episodic.store.writer import GroupCommitWriter

M, A = s.memories, s.agents
_CHUNK = 200  # rows read per round while Python-side filters thin a page out
_PROMOTED, _PENDING = MemoryState.PROMOTED.value, MemoryState.PENDING.value


def _system_clock() -> datetime:
    return datetime.now(UTC)


class SqlMemoryStore:
    """`embedding_model`: the id recorded with every vector written (the embedder's), so
    a change of model makes the old vectors `stale`. `clock` decides what has expired for
    the reads that take no `now`."""

    def __init__(
        self,
        db: Database,
        writer: GroupCommitWriter,
        *,
        embedding_model: str,
        clock: Clock = _system_clock,
    ) -> None:
        self._db = db
        self._writer = writer
        self._model = embedding_model
        self._clock = clock

    async def write(
        self, change: MemoryWrite, declared: Declared[frozenset[str]]
    ) -> Recorded[frozenset[str]]:
        def op(conn: Connection) -> frozenset[str]:
            _hold_users(conn, change)
            if change.episode is not None:
                lock_episode(conn, *change.episode)
            rows = [memory_values(m) | self._vector_values(v) for m, v in change.insert]
            if rows:
                conn.execute(M.insert(), rows)
            gone = set()
            for m, v in change.replace:  # a row gone meanwhile (erased) stays gone
                kept = self._vector_values(v) if v is not None else {}
                if not conn.execute(
                    _by_id(m.tenant_id, m.memory_id).values(memory_values(m) | kept)
                ).rowcount:
                    gone.add(m.memory_id)
            for tenant_id, memory_id in change.delete:
                if not conn.execute(
                    delete(M).where(M.c.tenant_id == tenant_id, M.c.memory_id == memory_id)
                ).rowcount:
                    gone.add(memory_id)
            return frozenset(gone)

        return await self._writer.run(op, declared)

    async def erasure_watch(self, tenant_id: str, user_id: str) -> ErasureWatch:
        hashed = user_hash(tenant_id, user_id)
        return await self._db.read(lambda conn: erasures_known(conn, tenant_id, hashed))

    async def get(self, tenant_id: str, memory_id: str) -> Memory | None:
        return (await self.get_many(tenant_id, [memory_id])).get(memory_id)

    async def get_many(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, Memory]:
        if not memory_ids:
            return {}
        params = {"b_tenant": tenant_id, "b_ids": list(memory_ids)}
        return await self._db.read(lambda conn: _by_memory_id(conn.execute(_BY_IDS, params).mappings()))

    async def vectors_of(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, Vector]:
        if not memory_ids:
            return {}
        params = {"b_tenant": tenant_id, "b_ids": list(memory_ids)}
        return await self._db.read(
            lambda conn: {
                r["memory_id"]: _vector(r["vector"]) for r in conn.execute(_VECTORS, params).mappings()
            }
        )

    async def page(
        self,
        scope: Scope,
        where: MemoryFilter,
        now: datetime,
        after: tuple[datetime, str] | None,
        limit: int,
        batch: ReadBatch | None = None,
    ) -> list[Memory]:
        chunk = max(limit, _CHUNK) if where.topics or where.entities else limit
        params = _scope_params(scope) | _filter_params(where, now)
        return await self._db.read(lambda conn: _page(conn, params, where, after, limit, chunk), batch)

    async def among(
        self,
        scope: Scope,
        memory_ids: Sequence[str],
        where: MemoryFilter,
        now: datetime,
        batch: ReadBatch | None = None,
    ) -> dict[str, Memory]:
        """By primary key, then filtered here: a scope of 100k memories made SQLite walk the
        scope's index (370 ms) instead of looking up the few candidates."""
        if not memory_ids:
            return {}
        params = {"b_tenant": scope.tenant_id, "b_ids": list(memory_ids)}
        return await self._db.read(
            lambda conn: {
                m.memory_id: m for m in _rows(conn, _BY_IDS, params) if passes(m, scope, where, now)
            },
            batch,
        )

    async def same_text(self, scope: Scope, text_keys: Sequence[str]) -> list[Memory]:
        return await self._live_matching(scope, _SAME_TEXT, text_keys)

    async def same_frame(self, scope: Scope, frame_keys: Sequence[str]) -> list[Memory]:
        return await self._live_matching(scope, _SAME_FRAME, frame_keys)

    async def pending(
        self, tenant_id: str, episode_id: str, batch: ReadBatch | None = None
    ) -> list[tuple[Memory, Vector | None]]:
        params = {"b_tenant": tenant_id, "b_episode": episode_id}
        return await self._db.read(
            lambda conn: [
                (memory_from_row(r), _vector_or_none(r)) for r in conn.execute(_PENDING_OF, params).mappings()
            ],
            batch,
        )

    async def touch(self, tenant_id: str, memory_ids: Sequence[str], at: datetime) -> None:
        if not memory_ids:
            return
        stmt = update(M).where(M.c.tenant_id == tenant_id, M.c.memory_id.in_(list(memory_ids)))

        def op(conn: Connection) -> None:
            conn.execute(stmt.values(last_recalled_at=at))

        await self._writer.run(op)

    async def stale(self, model: str, limit: int) -> list[Memory]:
        stmt = select(M).where(or_(M.c.model != model, M.c.vector.is_(None)))
        stmt = stmt.order_by(M.c.tenant_id, M.c.memory_id).limit(limit)
        return await self._db.read(lambda conn: _rows(conn, stmt))

    async def expired(self, now: datetime, limit: int) -> list[Memory]:
        """Past expiry first, then per agent with a retention: unused means neither updated
        nor recalled since the cut-off (a recall older than an update does not count)."""
        return await self._db.read(lambda conn: _expired(conn, now, limit))

    async def _live_matching(self, scope: Scope, stmt: Select[Any], keys: Sequence[str]) -> list[Memory]:
        if not keys:
            return []
        params = _scope_params(scope) | {"b_now": self._clock(), "b_keys": list(keys)}
        return await self._db.read(lambda conn: _rows(conn, stmt, params))

    def _vector_values(self, vector: Vector | None) -> dict[str, Any]:
        if vector is None:
            return {"model": "", "dimension": 0, "vector": None}
        data = np.asarray(vector, dtype="<f4")
        return {"model": self._model, "dimension": int(data.shape[0]), "vector": data.tobytes()}


def _hold_users(conn: Connection, change: MemoryWrite) -> None:
    """A write inserting memories is ordered with an erasure of their users (store/erasure.py),
    before any row lock: one in flight when the erasure begins commits first and is erased
    with the rest (the erasure deletes memories before episodes: without the hold, one
    holding its episode would commit after that delete); one after it is refused. Replaced
    rows need no hold (a row the erasure deleted stays gone), but a watching write's are
    checked too: a CreateMemories that only merged is refused as one that inserted."""
    written = [*change.insert, *change.replace] if change.watch is not None else change.insert
    for tenant_id, user_id in sorted({(m.tenant_id, m.user_id) for m, _ in written}):
        if change.watch is not None and change.watch.user_hash == user_hash(tenant_id, user_id):
            agents = {m.agent_id for m, _ in written if m.user_id == user_id}
            refuse_if_erased(conn, tenant_id, change.watch, agents)
        else:
            hold_user(conn, tenant_id, user_hash(tenant_id, user_id), shared=True)


# --- rows ---------------------------------------------------------------------------------


def memory_values(m: Memory) -> dict[str, Any]:
    """Every column but the vector's; the keys duplicate detection looks up are derived here,
    so they always match the text."""
    return {
        "tenant_id": m.tenant_id,
        "memory_id": m.memory_id,
        "agent_id": m.agent_id,
        "user_id": m.user_id,
        "state": m.state.value,
        "kind": m.kind.value,
        "text": m.text,
        "text_key": text_key(m.text),
        "frame_key": frame_key(m.kind.value, m.text, m.entities),
        "fingerprint": m.fingerprint,
        "topics": list(m.topics),
        "entities": list(m.entities),
        "origin": m.source.origin.value,
        "source_episode_id": m.source.episode_id,
        "from_seq": m.source.from_seq,
        "to_seq": m.source.to_seq,
        "episode_id": m.episode_id or None,
        "event_time": m.event_time,
        "expires_at": m.expires_at,
        "created_at": m.created_at,
        "updated_at": m.updated_at,
        "last_recalled_at": m.last_recalled_at,
        "superseded_by": m.superseded_by,
        "merge_count": m.merge_count,
        "metadata": m.metadata,
    }


def memory_from_row(r: Columns) -> Memory:
    source = Source(MemoryOrigin(r["origin"]), r["source_episode_id"], r["from_seq"], r["to_seq"])
    return Memory(
        tenant_id=r["tenant_id"],
        memory_id=r["memory_id"],
        agent_id=r["agent_id"],
        user_id=r["user_id"],
        text=r["text"],
        kind=MemoryKind(r["kind"]),
        source=source,
        state=MemoryState(r["state"]),
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        topics=tuple(r["topics"] or ()),
        entities=tuple(r["entities"] or ()),
        event_time=r["event_time"],
        expires_at=r["expires_at"],
        last_recalled_at=r["last_recalled_at"],
        superseded_by=r["superseded_by"],
        episode_id=r["episode_id"] or "",
        merge_count=r["merge_count"],
        fingerprint=r["fingerprint"],
        metadata=r["metadata"] or {},
    )


def _rows(conn: Connection, stmt: Any, params: dict[str, Any] | None = None) -> list[Memory]:
    return [memory_from_row(r) for r in conn.execute(stmt, params).mappings()]


def _by_memory_id(rows: Any) -> dict[str, Memory]:
    return {r["memory_id"]: memory_from_row(r) for r in rows}


def _vector(data: bytes) -> Vector:
    return cast(Vector, np.frombuffer(data, dtype="<f4"))


def _vector_or_none(r: RowMapping) -> Vector | None:
    return _vector(r["vector"]) if r["vector"] is not None else None


def _by_id(tenant_id: str, memory_id: str):  # type: ignore[no-untyped-def]
    return update(M).where(M.c.tenant_id == tenant_id, M.c.memory_id == memory_id)


# --- filters ------------------------------------------------------------------------------


def _unexpired(now: Any) -> ColumnElement[bool]:
    return or_(M.c.expires_at.is_(None), M.c.expires_at > now)


# memory_filter.happened: an EVENT's event_time (its creation if it has none), else its creation.
_happened = case(
    (M.c.kind == MemoryKind.EVENT.value, func.coalesce(M.c.event_time, M.c.created_at)),
    else_=M.c.created_at,
)


# The hot reads' statements are built once (the filtered page on first use of each set of
# filters): a call binds only its values, so SQLAlchemy reuses the statement's cache key
# and compiled form instead of building and walking a new tree per call.
_BY_IDS = select(M).where(
    M.c.tenant_id == bindparam("b_tenant"), M.c.memory_id.in_(bindparam("b_ids", expanding=True))
)
_PENDING_OF = (
    select(M)
    .where(
        M.c.tenant_id == bindparam("b_tenant"),
        M.c.episode_id == bindparam("b_episode"),
        M.c.state == _PENDING,
    )
    .order_by(M.c.created_at, M.c.memory_id)
)
_IN_SCOPE = (
    M.c.tenant_id == bindparam("b_tenant"),
    M.c.agent_id == bindparam("b_agent"),
    M.c.user_id == bindparam("b_user"),
)
_VECTORS = select(M.c.memory_id, M.c.vector).where(
    M.c.tenant_id == bindparam("b_tenant"),
    M.c.memory_id.in_(bindparam("b_ids", expanding=True)),
    M.c.vector.is_not(None),
)


def _live_with(column: Any) -> Select[Any]:
    """A scope's live promoted memories whose `column` is one of `b_keys`, oldest first."""
    return (
        select(M)
        .where(
            *_IN_SCOPE,
            M.c.state == _PROMOTED,
            M.c.superseded_by == "",
            _unexpired(bindparam("b_now")),
            column.in_(bindparam("b_keys", expanding=True)),
        )
        .order_by(M.c.created_at, M.c.memory_id)
    )


_SAME_TEXT, _SAME_FRAME = _live_with(M.c.text_key), _live_with(M.c.frame_key)


def _scope_params(scope: Scope) -> dict[str, Any]:
    return {"b_tenant": scope.tenant_id, "b_agent": scope.agent_id, "b_user": scope.user_id}


def _filter_params(where: MemoryFilter, now: datetime) -> dict[str, Any]:
    """The values `_filtered`'s statement for `where` binds (its filters' names are its key)."""
    params: dict[str, Any] = {"b_now": now}
    if where.kinds:
        params["b_kinds"] = sorted(k.value for k in where.kinds)
    if where.state is not None:
        params["b_state"] = where.state.value
    if where.episode_id:
        params["b_episode"] = where.episode_id
    if where.after is not None:
        params["b_after"] = where.after
    if where.before is not None:
        params["b_before"] = where.before
    return params


def _page_statement(where: MemoryFilter, cursor: bool) -> Select[Any]:
    return _filtered(
        bool(where.kinds),
        where.state is not None,
        not where.include_superseded,
        bool(where.episode_id),
        where.after is not None,
        where.before is not None,
        cursor,
    )


@cache
def _filtered(
    kinds: bool, state: bool, live_only: bool, episode: bool, after: bool, before: bool, cursor: bool
) -> Select[Any]:
    """`memory_filter.passes` in SQL, all but topics and entities (`memory_filter.tagged`,
    applied to the rows read); tests/contracts checks the two agree. One statement per
    combination of filters present (at most 128), newest first, a keyset page of
    `b_limit` rows (older than the `cursor`'s row if there is one)."""
    stmt = select(M).where(*_IN_SCOPE, _unexpired(bindparam("b_now")))
    if kinds:
        stmt = stmt.where(M.c.kind.in_(bindparam("b_kinds", expanding=True)))
    if state:
        stmt = stmt.where(M.c.state == bindparam("b_state"))
    if live_only:
        stmt = stmt.where(M.c.superseded_by == "")
    if episode:
        stmt = stmt.where(
            or_(M.c.episode_id == bindparam("b_episode"), M.c.source_episode_id == bindparam("b_episode"))
        )
    if after:
        stmt = stmt.where(_happened >= bindparam("b_after"))
    if before:
        stmt = stmt.where(_happened < bindparam("b_before"))
    if cursor:
        stmt = stmt.where(_older_than(bindparam("b_cursor_at"), bindparam("b_cursor_id")))
    return stmt.order_by(M.c.created_at.desc(), M.c.memory_id.desc()).limit(bindparam("b_limit"))


def _page(
    conn: Connection,
    params: dict[str, Any],
    where: MemoryFilter,
    after: tuple[datetime, str] | None,
    limit: int,
    chunk: int,
) -> list[Memory]:
    """Keyset pages of `chunk` rows, newest first, until `limit` pass `tagged`."""
    found: list[Memory] = []
    cursor = after
    while len(found) < limit:
        stmt = _page_statement(where, cursor is not None)
        bound = {**params, "b_limit": chunk}
        if cursor is not None:
            bound |= {"b_cursor_at": cursor[0], "b_cursor_id": cursor[1]}
        batch = _rows(conn, stmt, bound)
        found += [m for m in batch if tagged(m, where)]
        if len(batch) < chunk:
            break
        cursor = (batch[-1].created_at, batch[-1].memory_id)
    return found[:limit]


def _older_than(created_at: Any, memory_id: Any) -> ColumnElement[bool]:
    return or_(M.c.created_at < created_at, and_(M.c.created_at == created_at, M.c.memory_id < memory_id))


# --- expiry -------------------------------------------------------------------------------

_RETAINING_AGENTS = (
    select(A.c.tenant_id, A.c.agent_id, A.c.retention_days)
    .where(A.c.retention_days > 0)
    .order_by(A.c.tenant_id, A.c.agent_id)
)


def _expired(conn: Connection, now: datetime, limit: int) -> list[Memory]:
    past_expiry = select(M).where(M.c.expires_at <= now).order_by(M.c.expires_at, M.c.memory_id)
    found = {(m.tenant_id, m.memory_id): m for m in _rows(conn, past_expiry.limit(limit))}
    for tenant_id, agent_id, days in conn.execute(_RETAINING_AGENTS).all():
        if len(found) >= limit:
            break
        for m in _rows(conn, _unused(tenant_id, agent_id, now - timedelta(days=days), limit)):
            found.setdefault((m.tenant_id, m.memory_id), m)
    return list(found.values())[:limit]


def _unused(tenant_id: str, agent_id: str, cut: datetime, limit: int):  # type: ignore[no-untyped-def]
    recalled_before = or_(M.c.last_recalled_at.is_(None), M.c.last_recalled_at < cut)
    stmt = select(M).where(M.c.tenant_id == tenant_id, M.c.agent_id == agent_id, M.c.updated_at < cut)
    return stmt.where(recalled_before).order_by(M.c.updated_at, M.c.memory_id).limit(limit)
