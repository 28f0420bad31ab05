"""The episode log in SQL. Writes are synchronous operations run by the group-commit
writer; each append locks its episode row first (FOR UPDATE on PostgreSQL; SQLite has
one writer), so sequence numbers stay dense across replicas too. Hot-path statements
are built once, at import."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, Select, and_, bindparam, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from episodic.domain import episodes as rules
from episodic.domain.episodes import OpenRequest
from episodic.domain.log import AppendContext, AppendPlan, PreparedMessage, StoredMessage, plan_append
from episodic.domain.model import CloseReason, Episode, Message, ToolCallRecord
from episodic.domain.ports import Clock, EpisodeCursor, EpisodeFilter
from episodic.errors import NotFound
from episodic.store import schema as s
from episodic.store.database import Database
from episodic.store.dialect import InsertIgnoringConflicts
from episodic.store.rows import (
    episode_from_row,
    episode_values,
    message_from_row,
    message_values,
    tool_call_from_row,
    tool_call_values,
    tool_result_values,
)
from episodic.store.writer import GroupCommitWriter

E, M, TC = s.episodes, s.messages, s.tool_calls
_SCOPE = (bindparam("b_tenant", type_=s.ID), bindparam("b_episode", type_=s.ID))
_EPISODE = select(E).where(E.c.tenant_id == _SCOPE[0], E.c.episode_id == _SCOPE[1])
_EPISODE_LOCKED = _EPISODE.with_for_update()
_BY_CLIENT_ID = select(M).where(
    M.c.tenant_id == _SCOPE[0], M.c.episode_id == _SCOPE[1], M.c.client_message_id == bindparam("b_id")
)
_BY_CLIENT_IDS = select(M).where(
    M.c.tenant_id == _SCOPE[0],
    M.c.episode_id == _SCOPE[1],
    M.c.client_message_id.in_(bindparam("b_ids", expanding=True)),
)
_TOOL_CALLS = select(TC).where(
    TC.c.tenant_id == _SCOPE[0],
    TC.c.episode_id == _SCOPE[1],
    TC.c.tool_call_id.in_(bindparam("b_ids", expanding=True)),
)
_GROW_EPISODE = (
    update(E)
    .where(E.c.tenant_id == _SCOPE[0], E.c.episode_id == _SCOPE[1])
    .values(
        message_count=bindparam("b_count"),
        token_count=bindparam("b_tokens"),
        last_activity_at=bindparam("b_now"),
    )
)
_SET_TOOL_RESULT = update(TC).where(
    TC.c.tenant_id == _SCOPE[0],
    TC.c.episode_id == _SCOPE[1],
    TC.c.tool_call_id == bindparam("b_call"),
)
_INSERT_EPISODE = InsertIgnoringConflicts(E)


def _scope(tenant_id: str, episode_id: str) -> dict[str, object]:
    return {"b_tenant": tenant_id, "b_episode": episode_id}


class SqlEpisodeStore:
    def __init__(self, db: Database, writer: GroupCommitWriter, clock: Clock) -> None:
        self._db = db
        self._writer = writer
        self._clock = clock

    async def open_episode(
        self, tenant_id: str, request: OpenRequest, token_encoding: str
    ) -> tuple[Episode, bool]:
        fresh = rules.new_episode(tenant_id, request, token_encoding)

        def op(conn: Connection) -> tuple[Episode, bool]:
            if _INSERT_EPISODE.inserted(conn, episode_values(fresh)):
                return fresh, True
            return rules.reopen(_load_episode(conn, tenant_id, fresh.episode_id), request), False

        return await self._writer.run(op)

    async def append(
        self, tenant_id: str, episode_id: str, batch: Sequence[PreparedMessage]
    ) -> list[tuple[Message, bool]]:
        def op(conn: Connection) -> list[tuple[Message, bool]]:
            episode = _load_episode(conn, tenant_id, episode_id, lock=True)
            ctx = AppendContext(
                episode, _stored_by_client_id(conn, episode, batch), _tool_calls_named(conn, episode, batch)
            )
            now = self._clock()
            plan = plan_append(ctx, batch, now)
            if plan.inserts:
                _write_plan(conn, episode, plan, now)
            return plan.results

        return await self._writer.run(op)

    async def close_episode(
        self, tenant_id: str, episode_id: str, reason: CloseReason, note: str, ended_at: datetime
    ) -> Episode:
        def op(conn: Connection) -> Episode:
            episode = _load_episode(conn, tenant_id, episode_id, lock=True)
            closed = rules.close(episode, reason, note, ended_at)
            if closed is not episode:
                stmt = update(E).where(E.c.tenant_id == tenant_id, E.c.episode_id == episode_id)
                conn.execute(stmt.values(episode_values(closed)))
            return closed

        return await self._writer.run(op)

    async def get_episode(self, tenant_id: str, episode_id: str) -> Episode:
        async with self._db.engine.connect() as conn:
            row = (await conn.execute(_EPISODE, _scope(tenant_id, episode_id))).mappings().first()
        return _episode_or_missing(row, episode_id)

    async def list_episodes(
        self, tenant_id: str, where: EpisodeFilter, after: EpisodeCursor | None, limit: int
    ) -> list[Episode]:
        stmt = _episode_listing(tenant_id, where, after).limit(limit)
        async with self._db.engine.connect() as conn:
            return [episode_from_row(r) for r in (await conn.execute(stmt)).mappings()]

    async def list_messages(
        self, tenant_id: str, episode_id: str, before_seq: int | None, limit: int
    ) -> list[Message]:
        stmt = select(M).where(M.c.tenant_id == tenant_id, M.c.episode_id == episode_id)
        if before_seq is not None:
            stmt = stmt.where(M.c.seq < before_seq)
        stmt = stmt.order_by(M.c.seq.desc()).limit(limit)
        async with self._db.engine.connect() as conn, conn.begin():
            await _require_episode(conn, tenant_id, episode_id)
            return [message_from_row(r) for r in (await conn.execute(stmt)).mappings()]


def _episode_or_missing(row: object, episode_id: str) -> Episode:
    if row is None:
        raise NotFound("episode", episode_id)
    return episode_from_row(row)  # type: ignore[arg-type]


def _load_episode(conn: Connection, tenant_id: str, episode_id: str, *, lock: bool = False) -> Episode:
    stmt = _EPISODE_LOCKED if lock else _EPISODE
    row = conn.execute(stmt, _scope(tenant_id, episode_id)).mappings().first()
    return _episode_or_missing(row, episode_id)


async def _require_episode(conn: AsyncConnection, tenant_id: str, episode_id: str) -> None:
    if (await conn.execute(_EPISODE, _scope(tenant_id, episode_id))).first() is None:
        raise NotFound("episode", episode_id)


def _stored_by_client_id(
    conn: Connection, episode: Episode, batch: Sequence[PreparedMessage]
) -> dict[str, StoredMessage]:
    ids = sorted({p.new.client_message_id for p in batch if p.new.client_message_id})
    if not ids:
        return {}
    scope = _scope(episode.tenant_id, episode.episode_id)
    # One id (the common case) avoids re-rendering an expanding IN on every call.
    stmt, params = (
        (_BY_CLIENT_ID, {**scope, "b_id": ids[0]})
        if len(ids) == 1
        else (_BY_CLIENT_IDS, {**scope, "b_ids": ids})
    )
    rows = conn.execute(stmt, params).mappings()
    return {r["client_message_id"]: StoredMessage(message_from_row(r), r["fingerprint"]) for r in rows}


def _tool_calls_named(
    conn: Connection, episode: Episode, batch: Sequence[PreparedMessage]
) -> dict[str, ToolCallRecord]:
    ids = {c.tool_call_id for p in batch for c in p.new.tool_calls}
    ids |= {p.new.tool_result.tool_call_id for p in batch if p.new.tool_result}
    if not ids:
        return {}
    params = {**_scope(episode.tenant_id, episode.episode_id), "b_ids": sorted(ids)}
    return {r["tool_call_id"]: tool_call_from_row(r) for r in conn.execute(_TOOL_CALLS, params).mappings()}


def _write_plan(conn: Connection, episode: Episode, plan: AppendPlan, now: datetime) -> None:
    conn.execute(M.insert(), [message_values(episode.tenant_id, m, fp) for m, fp in plan.inserts])
    grown = dataclasses.replace(
        episode, message_count=plan.last_seq, token_count=episode.token_count + plan.token_delta
    )
    conn.execute(
        _GROW_EPISODE,
        {
            **_scope(episode.tenant_id, episode.episode_id),
            "b_count": grown.message_count,
            "b_tokens": grown.token_count,
            "b_now": now,
        },
    )
    _write_tool_calls(conn, episode, plan)


def _write_tool_calls(conn: Connection, episode: Episode, plan: AppendPlan) -> None:
    if plan.new_tool_calls:
        rows = [tool_call_values(episode.tenant_id, episode.episode_id, r) for r in plan.new_tool_calls]
        conn.execute(TC.insert(), rows)
    scope = _scope(episode.tenant_id, episode.episode_id)
    for record in plan.tool_results:
        stmt = _SET_TOOL_RESULT.values(tool_result_values(record))
        conn.execute(stmt, {**scope, "b_call": record.tool_call_id})


def _episode_listing(
    tenant_id: str, where: EpisodeFilter, after: EpisodeCursor | None
) -> Select[tuple[object, ...]]:
    stmt = select(E).where(E.c.tenant_id == tenant_id)
    if where.agent_id:
        stmt = stmt.where(E.c.agent_id == where.agent_id)
    if where.user_id:
        stmt = stmt.where(E.c.user_id == where.user_id)
    if where.state is not None:
        stmt = stmt.where(E.c.state == where.state.value)
    if after is not None:
        stmt = stmt.where(
            or_(
                E.c.started_at < after.started_at,
                and_(E.c.started_at == after.started_at, E.c.episode_id < after.episode_id),
            )
        )
    return stmt.order_by(E.c.started_at.desc(), E.c.episode_id.desc())
