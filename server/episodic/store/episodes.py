"""The episode log in SQL. Writes go through the group-commit writer; each append
locks its episode row first, so sequence numbers stay dense across replicas too."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Select, and_, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from episodic.domain import episodes as rules
from episodic.domain.episodes import OpenRequest
from episodic.domain.log import AppendContext, PreparedMessage, StoredMessage, plan_append
from episodic.domain.model import CloseReason, Episode, Message, ToolCallRecord
from episodic.domain.ports import Clock, EpisodeCursor, EpisodeFilter
from episodic.errors import NotFound
from episodic.store import schema as s
from episodic.store.database import Database
from episodic.store.dialect import insert_ignoring_conflicts
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


class SqlEpisodeStore:
    def __init__(self, db: Database, writer: GroupCommitWriter, clock: Clock) -> None:
        self._db = db
        self._writer = writer
        self._clock = clock

    async def open_episode(
        self, tenant_id: str, request: OpenRequest, token_encoding: str
    ) -> tuple[Episode, bool]:
        fresh = rules.new_episode(tenant_id, request, token_encoding)

        async def op(conn: AsyncConnection) -> tuple[Episode, bool]:
            stmt = insert_ignoring_conflicts(conn, s.episodes, episode_values(fresh))
            created = (await conn.execute(stmt)).rowcount == 1
            if created:
                return fresh, True
            existing = await _load_episode(conn, tenant_id, fresh.episode_id)
            return rules.reopen(existing, request), False

        return await self._writer.run(op)

    async def append(
        self, tenant_id: str, episode_id: str, batch: Sequence[PreparedMessage]
    ) -> list[tuple[Message, bool]]:
        async def op(conn: AsyncConnection) -> list[tuple[Message, bool]]:
            episode = await _load_episode(conn, tenant_id, episode_id, lock=True)
            ctx = AppendContext(
                episode,
                await _stored_by_client_id(conn, episode, batch),
                await _tool_calls_named(conn, episode, batch),
            )
            plan = plan_append(ctx, batch, self._clock())
            if plan.inserts:
                await _write_plan(conn, episode, plan.inserts, plan.token_delta, self._clock())
                await _write_tool_calls(conn, episode, plan.new_tool_calls, plan.tool_results)
            return plan.results

        return await self._writer.run(op)

    async def close_episode(
        self, tenant_id: str, episode_id: str, reason: CloseReason, note: str, ended_at: datetime
    ) -> Episode:
        async def op(conn: AsyncConnection) -> Episode:
            episode = await _load_episode(conn, tenant_id, episode_id, lock=True)
            closed = rules.close(episode, reason, note, ended_at)
            if closed is not episode:
                values = episode_values(closed)
                await conn.execute(_episode_update(closed).values(values))
            return closed

        return await self._writer.run(op)

    async def get_episode(self, tenant_id: str, episode_id: str) -> Episode:
        async with self._db.reader.connect() as conn:
            return await _load_episode(conn, tenant_id, episode_id)

    async def list_episodes(
        self, tenant_id: str, where: EpisodeFilter, after: EpisodeCursor | None, limit: int
    ) -> list[Episode]:
        stmt = _episode_listing(tenant_id, where, after).limit(limit)
        async with self._db.reader.connect() as conn:
            rows = (await conn.execute(stmt)).mappings()
            return [episode_from_row(r) for r in rows]

    async def list_messages(
        self, tenant_id: str, episode_id: str, before_seq: int | None, limit: int
    ) -> list[Message]:
        m = s.messages
        stmt = select(m).where(m.c.tenant_id == tenant_id, m.c.episode_id == episode_id)
        if before_seq is not None:
            stmt = stmt.where(m.c.seq < before_seq)
        stmt = stmt.order_by(m.c.seq.desc()).limit(limit)
        async with self._db.reader.connect() as conn, conn.begin():
            await _load_episode(conn, tenant_id, episode_id)
            return [message_from_row(r) for r in (await conn.execute(stmt)).mappings()]


async def _load_episode(
    conn: AsyncConnection, tenant_id: str, episode_id: str, *, lock: bool = False
) -> Episode:
    e = s.episodes
    stmt = select(e).where(e.c.tenant_id == tenant_id, e.c.episode_id == episode_id)
    if lock:
        stmt = stmt.with_for_update()
    row = (await conn.execute(stmt)).mappings().first()
    if row is None:
        raise NotFound("episode", episode_id)
    return episode_from_row(row)


async def _stored_by_client_id(
    conn: AsyncConnection, episode: Episode, batch: Sequence[PreparedMessage]
) -> dict[str, StoredMessage]:
    ids = {p.new.client_message_id for p in batch if p.new.client_message_id}
    if not ids:
        return {}
    m = s.messages
    stmt = select(m).where(
        m.c.tenant_id == episode.tenant_id,
        m.c.episode_id == episode.episode_id,
        m.c.client_message_id.in_(ids),
    )
    rows = (await conn.execute(stmt)).mappings()
    return {r["client_message_id"]: StoredMessage(message_from_row(r), r["fingerprint"]) for r in rows}


async def _tool_calls_named(
    conn: AsyncConnection, episode: Episode, batch: Sequence[PreparedMessage]
) -> dict[str, ToolCallRecord]:
    ids = {c.tool_call_id for p in batch for c in p.new.tool_calls}
    ids |= {p.new.tool_result.tool_call_id for p in batch if p.new.tool_result}
    if not ids:
        return {}
    t = s.tool_calls
    stmt = select(t).where(
        t.c.tenant_id == episode.tenant_id,
        t.c.episode_id == episode.episode_id,
        t.c.tool_call_id.in_(ids),
    )
    rows = (await conn.execute(stmt)).mappings()
    return {r["tool_call_id"]: tool_call_from_row(r) for r in rows}


async def _write_plan(
    conn: AsyncConnection,
    episode: Episode,
    inserts: list[tuple[Message, str]],
    token_delta: int,
    now: datetime,
) -> None:
    rows = [message_values(episode.tenant_id, m, fp) for m, fp in inserts]
    await conn.execute(s.messages.insert(), rows)
    grown = dataclasses.replace(
        episode,
        message_count=inserts[-1][0].seq,
        token_count=episode.token_count + token_delta,
        last_activity_at=now,
    )
    await conn.execute(
        _episode_update(grown).values(
            message_count=grown.message_count,
            token_count=grown.token_count,
            last_activity_at=grown.last_activity_at,
        )
    )


async def _write_tool_calls(
    conn: AsyncConnection,
    episode: Episode,
    new_calls: list[ToolCallRecord],
    results: list[ToolCallRecord],
) -> None:
    if new_calls:
        rows = [tool_call_values(episode.tenant_id, episode.episode_id, r) for r in new_calls]
        await conn.execute(s.tool_calls.insert(), rows)
    t = s.tool_calls
    for record in results:
        await conn.execute(
            update(t)
            .where(
                t.c.tenant_id == episode.tenant_id,
                t.c.episode_id == episode.episode_id,
                t.c.tool_call_id == record.tool_call_id,
            )
            .values(tool_result_values(record))
        )


def _episode_update(episode: Episode):  # type: ignore[no-untyped-def]
    e = s.episodes
    return update(e).where(e.c.tenant_id == episode.tenant_id, e.c.episode_id == episode.episode_id)


def _episode_listing(
    tenant_id: str, where: EpisodeFilter, after: EpisodeCursor | None
) -> Select[tuple[object, ...]]:
    e = s.episodes
    stmt = select(e).where(e.c.tenant_id == tenant_id)
    if where.agent_id:
        stmt = stmt.where(e.c.agent_id == where.agent_id)
    if where.user_id:
        stmt = stmt.where(e.c.user_id == where.user_id)
    if where.state is not None:
        stmt = stmt.where(e.c.state == where.state.value)
    if after is not None:
        stmt = stmt.where(
            or_(
                e.c.started_at < after.started_at,
                and_(e.c.started_at == after.started_at, e.c.episode_id < after.episode_id),
            )
        )
    return stmt.order_by(e.c.started_at.desc(), e.c.episode_id.desc())
