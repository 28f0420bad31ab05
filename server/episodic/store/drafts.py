"""Drafts (assistant replies in progress) in SQL, and the reads that watch an episode.
A push locks its episode row, like an append, so pushes, appends, finalizations and the
close of one episode are ordered, also across replicas. A draft's text is kept as pieces,
one row per push: a push inserts its delta and updates the draft's small row, whatever the
length of the reply so far. Statements are built once."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Integer, RowMapping, and_, bindparam, delete, func, select, update

from episodic.domain.drafts import (
    DraftLimits,
    DraftRow,
    Push,
    Pushed,
    PushPlan,
    episode_closed_error,
    finalized_error,
    overlap_span,
    plan_push,
)
from episodic.domain.model import Episode, EpisodeState, Message
from episodic.domain.watch import DraftChange, LiveRead
from episodic.errors import NotFound
from episodic.store import schema as s
from episodic.store.database import Database
from episodic.store.rows import digest_from_row, episode_from_row, message_from_row
from episodic.store.writer import GroupCommitWriter

E, M, D, P, DG = s.episodes, s.messages, s.drafts, s.draft_pieces, s.digests
_TENANT, _EPISODE = bindparam("b_tenant", type_=s.ID), bindparam("b_episode", type_=s.ID)
_DRAFT = bindparam("b_draft", type_=s.ID)
_OF_EPISODE = (D.c.tenant_id == _TENANT, D.c.episode_id == _EPISODE)
_ONE_DRAFT = (*_OF_EPISODE, D.c.draft_id == _DRAFT)

_EPISODE_LOCKED = (
    select(E)
    .where(E.c.tenant_id == _TENANT, E.c.episode_id == _EPISODE, E.c.deleted_at.is_(None))
    .with_for_update()
)
# The episode with its digest (prefix "d_"), as GetEpisode returns it.
_EPISODE_READ = (
    select(E, *[c.label(f"d_{c.name}") for c in DG.c])
    .outerjoin(DG, and_(DG.c.tenant_id == E.c.tenant_id, DG.c.episode_id == E.c.episode_id))
    .where(E.c.tenant_id == _TENANT, E.c.episode_id == _EPISODE, E.c.deleted_at.is_(None))
)
_MESSAGE_OF_DRAFT = select(M).where(
    M.c.tenant_id == _TENANT, M.c.episode_id == _EPISODE, M.c.client_message_id == _DRAFT
)
_DRAFT_ROWS = select(D.c.draft_id, D.c.length, D.c.size, D.c.updated_at).where(*_OF_EPISODE)
_DRAFT_LENGTH = select(D.c.length).where(*_ONE_DRAFT)
_OF_PIECES = (P.c.tenant_id == _TENANT, P.c.episode_id == _EPISODE, P.c.draft_id == _DRAFT)
_ALL_PIECES = select(P.c.text).where(*_OF_PIECES).order_by(P.c.start)
# The pieces from the one holding offset b_from (0-based, code points): the pieces tile the
# text, so that one is the last to start at or before it. Both are seeks on the primary key.
_HOLDING = (
    select(func.coalesce(func.max(P.c.start), 0))
    .where(*_OF_PIECES, P.c.start <= bindparam("b_from", type_=Integer))
    .scalar_subquery()
)
_PIECES_FROM = select(P.c.start, P.c.text).where(*_OF_PIECES, P.c.start >= _HOLDING).order_by(P.c.start)
_PIECES_BETWEEN = _PIECES_FROM.where(P.c.start < bindparam("b_until", type_=Integer))
_GROW = (
    update(D)
    .where(*_ONE_DRAFT)
    .values(length=bindparam("v_length"), size=bindparam("v_size"), updated_at=bindparam("v_now"))
)
_REMOVE = delete(D).where(*_ONE_DRAFT)
_REMOVE_ALL = delete(D).where(*_OF_EPISODE)
_AFTER = bindparam("b_after", type_=s.messages.c.seq.type)
_MESSAGES_AFTER = (
    select(M)
    .where(M.c.tenant_id == _TENANT, M.c.episode_id == _EPISODE, M.c.seq > _AFTER)
    .order_by(M.c.seq)
    .limit(bindparam("b_limit", type_=Integer))
)
_MESSAGES_BETWEEN = _MESSAGES_AFTER.where(M.c.seq <= bindparam("b_through", type_=s.messages.c.seq.type))


def _scope(tenant_id: str, episode_id: str, draft_id: str | None = None) -> dict[str, Any]:
    scope: dict[str, Any] = {"b_tenant": tenant_id, "b_episode": episode_id}
    if draft_id is not None:
        scope["b_draft"] = draft_id
    return scope


class SqlDraftStore:
    """Implements the `DraftStore` port (domain/ports/episodes.py)."""

    def __init__(self, db: Database, writer: GroupCommitWriter) -> None:
        self._db = db
        self._writer = writer

    async def push(
        self, tenant_id: str, episode_id: str, push: Push, now: datetime, limits: DraftLimits
    ) -> Pushed:
        def op(conn: Connection) -> Pushed:
            scope = _scope(tenant_id, episode_id, push.draft_id)
            _open_episode_locked(conn, scope)
            done = conn.execute(_MESSAGE_OF_DRAFT, scope).mappings().first()
            if done is not None:
                raise finalized_error(push.draft_id, done["seq"])
            rows = [DraftRow(**r) for r in conn.execute(_DRAFT_ROWS, scope).mappings()]
            plan = plan_push(rows, push, _stored_span(conn, scope, rows, push), now, limits)
            _write(conn, scope, plan, now)
            return Pushed(plan.length, plan.writes)

        result: Pushed = await self._writer.run(op)
        return result

    async def text_of(self, tenant_id: str, episode_id: str, draft_id: str) -> str | None:
        scope = _scope(tenant_id, episode_id, draft_id)
        text: str | None = await self._db.quick_read(lambda conn: _whole_text(conn, scope))
        return text

    async def finalized(self, tenant_id: str, episode_id: str, draft_id: str) -> Message | None:
        scope = _scope(tenant_id, episode_id, draft_id)
        row = await self._db.quick_read(
            lambda conn: conn.execute(_MESSAGE_OF_DRAFT, scope).mappings().first()
        )
        return None if row is None else message_from_row(row)

    async def remove(self, tenant_id: str, episode_id: str, draft_id: str) -> None:
        scope = _scope(tenant_id, episode_id, draft_id)
        await self._writer.run(_executing(_REMOVE, scope))

    async def discard_all(self, tenant_id: str, episode_id: str) -> None:
        scope = _scope(tenant_id, episode_id)
        await self._writer.run(_executing(_REMOVE_ALL, scope))

    async def read_live(
        self, tenant_id: str, episode_id: str, after_seq: int, known: dict[str, int], limit: int
    ) -> LiveRead:
        scope = _scope(tenant_id, episode_id)
        return await self._db.read(lambda conn: _read_live(conn, scope, after_seq, known, limit))

    async def messages_after(
        self, tenant_id: str, episode_id: str, after_seq: int, through_seq: int, limit: int
    ) -> list[Message]:
        bounds = {"b_after": after_seq, "b_through": through_seq, "b_limit": limit}
        params = _scope(tenant_id, episode_id) | bounds
        return await self._db.read(
            lambda conn: [message_from_row(r) for r in conn.execute(_MESSAGES_BETWEEN, params).mappings()]
        )


def _executing(statement: Any, params: dict[str, Any]) -> Callable[[Connection], None]:
    def op(conn: Connection) -> None:
        conn.execute(statement, params)

    return op


def _open_episode_locked(conn: Connection, scope: dict[str, Any]) -> Episode:
    row = conn.execute(_EPISODE_LOCKED, scope).mappings().first()
    if row is None:
        raise NotFound("episode", scope["b_episode"])
    episode = episode_from_row(row)
    if episode.state is not EpisodeState.OPEN:
        raise episode_closed_error(episode.episode_id)
    return episode


def _whole_text(conn: Connection, scope: dict[str, Any]) -> str | None:
    if conn.execute(_DRAFT_LENGTH, scope).scalar() is None:
        return None
    return "".join(conn.execute(_ALL_PIECES, scope).scalars())


def _text_between(conn: Connection, scope: dict[str, Any], start: int, stop: int | None) -> str:
    """The draft's text in [start, stop) (to its end when `stop` is None), read from the
    pieces that hold it only."""
    params = scope | {"b_from": start}
    if stop is not None:
        params["b_until"] = stop
    rows = conn.execute(_PIECES_FROM if stop is None else _PIECES_BETWEEN, params).all()
    if not rows:
        return ""
    joined = "".join(row.text for row in rows)
    begin = start - rows[0].start
    return joined[begin:] if stop is None else joined[begin : begin + stop - start]


def _stored_span(conn: Connection, scope: dict[str, Any], rows: Sequence[DraftRow], push: Push) -> str:
    """The stored text a repeated push must match ("" when the push starts at the end)."""
    current = next((r for r in rows if r.draft_id == push.draft_id), None)
    offset, count = overlap_span(push)
    if current is None or offset >= current.length or count == 0:
        return ""
    return _text_between(conn, scope, offset, offset + count)


def _write(conn: Connection, scope: dict[str, Any], plan: PushPlan, now: datetime) -> None:
    if plan.replaces is not None:
        conn.execute(_REMOVE, scope | {"b_draft": plan.replaces})  # its pieces go with it
    key = {"tenant_id": scope["b_tenant"], "episode_id": scope["b_episode"], "draft_id": scope["b_draft"]}
    if plan.creates:
        conn.execute(D.insert(), key | {"length": plan.length, "size": plan.size, "updated_at": now})
    elif plan.tail:
        conn.execute(_GROW, scope | {"v_length": plan.length, "v_size": plan.size, "v_now": now})
    if plan.tail:
        conn.execute(P.insert(), key | {"start": plan.length - len(plan.tail), "text": plan.tail})


def _read_live(
    conn: Connection, scope: dict[str, Any], after_seq: int, known: dict[str, int], limit: int
) -> LiveRead:
    """In LiveRead's order: the episode, its drafts, then the messages."""
    row = conn.execute(_EPISODE_READ, scope).mappings().first()
    if row is None:
        raise NotFound("episode", scope["b_episode"])
    episode = _episode_and_digest(row)
    drafts = {} if episode.state is EpisodeState.CLOSED else _changed_drafts(conn, scope, known)
    params = scope | {"b_after": after_seq, "b_limit": limit + 1}
    messages = [message_from_row(r) for r in conn.execute(_MESSAGES_AFTER, params).mappings()]
    return LiveRead(episode, drafts, messages[:limit], complete=len(messages) <= limit)


def _changed_drafts(conn: Connection, scope: dict[str, Any], known: dict[str, int]) -> dict[str, DraftChange]:
    found: dict[str, DraftChange] = {}
    for draft_id, length in conn.execute(_DRAFT_ROWS.with_only_columns(D.c.draft_id, D.c.length), scope):
        had = known.get(draft_id)
        if had == length:
            found[draft_id] = DraftChange(length)
            continue
        start = had if had is not None and had < length else 0
        found[draft_id] = DraftChange(
            length, start, _text_between(conn, scope | {"b_draft": draft_id}, start, None)
        )
    return found


def _episode_and_digest(row: RowMapping) -> Episode:
    episode = episode_from_row(row)
    if row["d_state"] is None:
        return episode
    return dataclasses.replace(episode, digest=digest_from_row(row, prefix="d_"))
