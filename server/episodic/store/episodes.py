"""The episode log in SQL. Writes are synchronous operations run by the group-commit
writer; each append locks its episode row first (FOR UPDATE on PostgreSQL; SQLite has
one writer), so sequence numbers stay dense across replicas too. Hot-path statements
are built once, at import."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Sequence
from datetime import datetime, timedelta

from sqlalchemy import (
    ColumnElement,
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

from episodic.domain import episodes as rules
from episodic.domain.changes import Declared, Recorded
from episodic.domain.digests import pending_digest
from episodic.domain.episodes import OpenRequest
from episodic.domain.inspection import UserSummary
from episodic.domain.log import PreparedMessage
from episodic.domain.memories import Memory
from episodic.domain.model import CloseReason, Episode, Message
from episodic.domain.ports.clock import Clock
from episodic.domain.ports.episodes import EpisodeCursor, EpisodeFilter
from episodic.errors import NotFound
from episodic.store import schema as s
from episodic.store.appends import AppendBulk, AppendItem
from episodic.store.database import Database
from episodic.store.dialect import InsertIgnoringConflicts
from episodic.store.rows import (
    digest_from_row,
    digest_values,
    episode_from_row,
    episode_values,
    message_from_row,
)
from episodic.store.writer import GroupCommitWriter

E, M, D, SM, TC = s.episodes, s.messages, s.digests, s.summaries, s.tool_calls
MEM, A = s.memories, s.agents
_SCOPE = (bindparam("b_tenant", type_=s.ID), bindparam("b_episode", type_=s.ID))
_ANY_EPISODE = select(E).where(E.c.tenant_id == _SCOPE[0], E.c.episode_id == _SCOPE[1])
# Soft-deleted episodes (retention) are invisible to every read; only OpenEpisode sees
# that an id is taken.
_EPISODE = _ANY_EPISODE.where(E.c.deleted_at.is_(None))
_EPISODE_LOCKED = _EPISODE.with_for_update()
# Reads return an episode with its digest, if it has one (prefix "d_").
_WITH_DIGEST = (
    select(E, *[c.label(f"d_{c.name}") for c in D.c])
    .outerjoin(D, and_(D.c.tenant_id == E.c.tenant_id, D.c.episode_id == E.c.episode_id))
    .where(E.c.deleted_at.is_(None))
)
_EPISODE_READ = _WITH_DIGEST.where(E.c.tenant_id == _SCOPE[0], E.c.episode_id == _SCOPE[1])
_INSERT_EPISODE = InsertIgnoringConflicts(E)


def _scope(tenant_id: str, episode_id: str) -> dict[str, object]:
    return {"b_tenant": tenant_id, "b_episode": episode_id}


class SqlEpisodeStore:
    def __init__(self, db: Database, writer: GroupCommitWriter, clock: Clock) -> None:
        self._db = db
        self._writer = writer
        self._clock = clock
        self._appends = AppendBulk(clock)

    async def open_episode(
        self, tenant_id: str, request: OpenRequest, token_encoding: str
    ) -> tuple[Episode, bool]:
        fresh = rules.new_episode(tenant_id, request, token_encoding, opened_at=self._clock())

        def op(conn: Connection) -> tuple[Episode, bool]:
            # The agent's row, held (FOR SHARE on PostgreSQL) until the commit: a DeleteAgent
            # committing first makes this NOT_FOUND, one coming after finds the episode.
            agent = (A.c.tenant_id == tenant_id, A.c.agent_id == request.agent_id)
            if conn.execute(select(A.c.agent_id).where(*agent).with_for_update(read=True)).first() is None:
                raise NotFound("agent", request.agent_id)
            if _INSERT_EPISODE.inserted(conn, episode_values(fresh)):
                return fresh, True
            taken = conn.execute(_ANY_EPISODE, _scope(tenant_id, fresh.episode_id)).mappings().first()
            return rules.reopen(_episode_or_missing(taken, fresh.episode_id), request), False

        return await self._writer.run(op)

    async def append(
        self, tenant_id: str, episode_id: str, batch: Sequence[PreparedMessage]
    ) -> list[tuple[Message, bool]]:
        result: list[tuple[Message, bool]] = await self._writer.run_bulk(
            self._appends, AppendItem(tenant_id, episode_id, batch)
        )
        return result

    async def append_turn(
        self, tenant_id: str, episode_id: str, message: PreparedMessage, with_pending: bool
    ) -> tuple[Message, bool, list[Memory], Awaitable[None]]:
        item = AppendItem(tenant_id, episode_id, [message], with_pending=with_pending)
        staged = await self._writer.run_bulk_staged(self._appends, item)
        if not with_pending:
            ((stored, replayed),) = staged.value
            return stored, replayed, [], staged.durable
        ((stored, replayed),), pending = staged.value
        return stored, replayed, pending, staged.durable

    async def close_episode(
        self,
        tenant_id: str,
        episode_id: str,
        reason: CloseReason,
        note: str,
        ended_at: datetime,
        declared: Declared[Episode],
    ) -> Recorded[Episode]:
        def op(conn: Connection) -> Episode:
            episode = _load_episode(conn, tenant_id, episode_id, lock=True)
            closed = rules.close(episode, reason, note, ended_at)
            if closed is episode:
                return _with_digest(conn, closed)
            stmt = update(E).where(E.c.tenant_id == tenant_id, E.c.episode_id == episode_id)
            conn.execute(stmt.values(episode_values(closed)))
            digest = pending_digest(closed, self._clock())
            conn.execute(D.insert(), digest_values(digest))
            return dataclasses.replace(closed, digest=digest)

        return await self._writer.run(op, declared)

    async def retract_message(
        self, tenant_id: str, episode_id: str, seq: int, declared: Declared[Message]
    ) -> Recorded[Message]:
        def op(conn: Connection) -> Message:
            episode = _load_episode(conn, tenant_id, episode_id, lock=True)
            scope = (M.c.tenant_id == tenant_id, M.c.episode_id == episode_id)
            row = conn.execute(select(M).where(*scope, M.c.seq == seq)).mappings().first()
            if row is None:
                raise NotFound("message", f"{episode_id}#{seq}")
            message = message_from_row(row)
            retracted = rules.retract(
                episode, message, _summarized_through(conn, tenant_id, episode_id),
                _live_results(conn, tenant_id, episode_id, message), self._clock(),
            )  # fmt: skip
            if retracted is not message:
                stmt = update(M).where(*scope, M.c.seq == seq)
                conn.execute(stmt.values(retracted_at=retracted.retracted_at))
                _unregister_tools(conn, tenant_id, episode_id, retracted)
            return retracted

        return await self._writer.run(op, declared)

    async def get_episode(self, tenant_id: str, episode_id: str) -> Episode:
        scope = _scope(tenant_id, episode_id)
        row = await self._db.read(lambda conn: conn.execute(_EPISODE_READ, scope).mappings().first())
        if row is None:
            raise NotFound("episode", episode_id)
        return _episode_and_digest(row)

    async def list_episodes(
        self, tenant_id: str, where: EpisodeFilter, after: EpisodeCursor | None, limit: int
    ) -> list[Episode]:
        stmt = _episode_listing(tenant_id, where, after).limit(limit)
        return await self._db.read(
            lambda conn: [_episode_and_digest(r) for r in conn.execute(stmt).mappings()]
        )

    async def idle_episodes(self, now: datetime, limit: int) -> list[Episode]:
        """Open episodes idle past their agent's timeout, oldest first: one query per agent
        (agents are few and each has its own cut-off)."""
        return await self._db.read(lambda conn: _idle(conn, now, limit))

    async def list_users(
        self, tenant_id: str, agent_id: str, after_user_id: str | None, limit: int
    ) -> list[UserSummary]:
        """A page of ids: the first `limit` of the episodes' and the memories' next ones, then
        one group per user of each."""
        live = _live_memory(self._clock())
        pages = _user_listing(tenant_id, agent_id, after_user_id, limit, live)
        return await self._db.read(lambda conn: _users(conn, tenant_id, agent_id, pages, limit, live))

    async def list_messages(
        self, tenant_id: str, episode_id: str, before_seq: int | None, limit: int
    ) -> list[Message]:
        stmt = select(M).where(M.c.tenant_id == tenant_id, M.c.episode_id == episode_id)
        if before_seq is not None:
            stmt = stmt.where(M.c.seq < before_seq)
        stmt = stmt.order_by(M.c.seq.desc()).limit(limit)

        def read(conn: Connection) -> list[Message]:
            _load_episode(conn, tenant_id, episode_id)
            return [message_from_row(r) for r in conn.execute(stmt).mappings()]

        return await self._db.read(read)


def _live_memory(now: datetime) -> ColumnElement[bool]:
    """A memory ListUsers counts: not superseded, not expired."""
    return and_(MEM.c.superseded_by == "", or_(MEM.c.expires_at.is_(None), MEM.c.expires_at > now))


def _user_listing(
    tenant_id: str, agent_id: str, after: str | None, limit: int, live: ColumnElement[bool]
) -> tuple[Select[str], Select[str]]:
    """The next `limit` user ids of the agent's episodes and of its memories: each a walk of an
    index that starts (tenant, agent, user), stopping after `limit` distinct ids."""
    episodes = select(E.c.user_id).where(
        E.c.tenant_id == tenant_id, E.c.agent_id == agent_id, E.c.deleted_at.is_(None)
    )
    memories = select(MEM.c.user_id).where(MEM.c.tenant_id == tenant_id, MEM.c.agent_id == agent_id, live)
    if after is not None:
        episodes, memories = episodes.where(E.c.user_id > after), memories.where(MEM.c.user_id > after)
    return (
        episodes.distinct().order_by(E.c.user_id).limit(limit),
        memories.distinct().order_by(MEM.c.user_id).limit(limit),
    )


def _users(
    conn: Connection,
    tenant_id: str,
    agent_id: str,
    pages: tuple[Select[str], Select[str]],
    limit: int,
    live: ColumnElement[bool],
) -> list[UserSummary]:
    ids = sorted({r[0] for page in pages for r in conn.execute(page)})[:limit]
    if not ids:
        return []
    opened = func.sum(case((E.c.state == "open", 1), else_=0))
    episodes = {
        r[0]: (int(r[1]), int(r[2] or 0), r[3])
        for r in conn.execute(
            select(E.c.user_id, func.count(), opened, func.max(E.c.last_activity_at))
            .where(E.c.tenant_id == tenant_id, E.c.agent_id == agent_id, E.c.deleted_at.is_(None))
            .where(E.c.user_id.in_(ids))
            .group_by(E.c.user_id)
        )
    }
    memories = {
        r[0]: (int(r[1]), r[2])
        for r in conn.execute(
            select(MEM.c.user_id, func.count(), func.max(MEM.c.updated_at))
            .where(MEM.c.tenant_id == tenant_id, MEM.c.agent_id == agent_id, live)
            .where(MEM.c.user_id.in_(ids))
            .group_by(MEM.c.user_id)
        )
    }
    found: list[UserSummary] = []
    for user_id in ids:
        count, open_count, episode_last = episodes.get(user_id, (0, 0, None))
        memory_count, memory_last = memories.get(user_id, (0, None))
        last = max(t for t in (episode_last, memory_last) if t is not None)
        found.append(UserSummary(user_id, count, last, open_count, memory_count))
    return found


def _episode_and_digest(row: RowMapping) -> Episode:
    episode = episode_from_row(row)
    if row["d_state"] is None:
        return episode
    return dataclasses.replace(episode, digest=digest_from_row(row, prefix="d_"))


def _with_digest(conn: Connection, episode: Episode) -> Episode:
    row = conn.execute(_EPISODE_READ, _scope(episode.tenant_id, episode.episode_id)).mappings().first()
    return _episode_and_digest(row) if row is not None else episode


def _episode_or_missing(row: object, episode_id: str) -> Episode:
    if row is None:
        raise NotFound("episode", episode_id)
    return episode_from_row(row)  # type: ignore[arg-type]


def _unregister_tools(conn: Connection, tenant_id: str, episode_id: str, message: Message) -> None:
    """The tool-call registry is a projection too: a retracted call frees its id, a retracted
    result leaves its call unanswered, so the client may send either again."""
    where = (TC.c.tenant_id == tenant_id, TC.c.episode_id == episode_id)
    if message.tool_calls:
        conn.execute(delete(TC).where(*where, TC.c.call_seq == message.seq))
    if message.tool_result is not None:
        unanswered = {"has_result": False, "output": None, "succeeded": False, "error": "", "called_at": None}
        stmt = update(TC).where(*where, TC.c.result_seq == message.seq)
        conn.execute(stmt.values(**unanswered, duration_seconds=None, result_seq=None))


def _summarized_through(conn: Connection, tenant_id: str, episode_id: str) -> int:
    stmt = select(func.max(SM.c.to_seq)).where(SM.c.tenant_id == tenant_id, SM.c.episode_id == episode_id)
    return int(conn.execute(stmt).scalar() or 0)


def _live_results(conn: Connection, tenant_id: str, episode_id: str, message: Message) -> list[int]:
    """The messages holding results of `message`'s tool calls that are not retracted."""
    if not message.tool_calls:
        return []
    calls = [c.tool_call_id for c in message.tool_calls]
    where = (TC.c.tenant_id == tenant_id, TC.c.episode_id == episode_id)
    results = select(TC.c.result_seq).where(
        *where, TC.c.tool_call_id.in_(calls), TC.c.result_seq.is_not(None)
    )
    stmt = (
        select(M.c.seq)
        .where(M.c.tenant_id == tenant_id, M.c.episode_id == episode_id, M.c.retracted_at.is_(None))
        .where(M.c.seq.in_(results))
        .order_by(M.c.seq)
    )
    return [int(seq) for seq in conn.execute(stmt).scalars()]


def _load_episode(conn: Connection, tenant_id: str, episode_id: str, *, lock: bool = False) -> Episode:
    stmt = _EPISODE_LOCKED if lock else _EPISODE
    row = conn.execute(stmt, _scope(tenant_id, episode_id)).mappings().first()
    return _episode_or_missing(row, episode_id)


def _episode_listing(
    tenant_id: str, where: EpisodeFilter, after: EpisodeCursor | None
) -> Select[tuple[object, ...]]:
    stmt = _WITH_DIGEST.where(E.c.tenant_id == tenant_id)
    if where.agent_id:
        stmt = stmt.where(E.c.agent_id == where.agent_id)
    if where.agent_ids is not None:
        stmt = stmt.where(E.c.agent_id.in_(sorted(where.agent_ids)))
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


def _idle(conn: Connection, now: datetime, limit: int) -> list[Episode]:
    agents = select(s.agents.c.tenant_id, s.agents.c.agent_id, s.agents.c.idle_timeout_seconds)
    found: list[Episode] = []
    for tenant_id, agent_id, seconds in conn.execute(agents).all():
        found += _idle_in(conn, tenant_id, agent_id, now - timedelta(seconds=seconds), limit - len(found))
        if len(found) >= limit:
            break
    return found


def _idle_in(conn: Connection, tenant_id: str, agent_id: str, cutoff: datetime, limit: int) -> list[Episode]:
    stmt = (
        select(E)
        .where(E.c.tenant_id == tenant_id, E.c.agent_id == agent_id, E.c.state == "open")
        .where(E.c.last_activity_at < cutoff)
        .order_by(E.c.last_activity_at)
        .limit(limit)
    )
    return [episode_from_row(r) for r in conn.execute(stmt).mappings()]
