"""What context assembly reads and writes in SQL: the working set's sources (episode,
agent, latest summary, messages after a seq), summaries, and model calls."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy import Connection, Integer, and_, bindparam, func, or_, select, update
from sqlalchemy.exc import IntegrityError

from episodic.domain.context import ModelCall, ModelReply, Summary
from episodic.domain.earlier import MAX_MESSAGES as EARLIER_MESSAGES
from episodic.domain.model import Message, Role
from episodic.domain.ports.episodes import ContextSources
from episodic.domain.reducers import TailReach
from episodic.errors import AlreadyExists, InvalidArgument, NotFound
from episodic.store import schema as s
from episodic.store.context_rows import (
    model_call_from_row,
    model_call_values,
    reply_json,
    summary_from_row,
    summary_values,
)
from episodic.store.database import Database
from episodic.store.dialect import InsertIgnoringConflicts
from episodic.store.rows import agent_from_row, episode_from_row, message_from_row
from episodic.store.writer import GroupCommitWriter

E, A, M, S, MC = s.episodes, s.agents, s.messages, s.summaries, s.model_calls
_TENANT, _EPISODE = bindparam("b_tenant", type_=s.ID), bindparam("b_episode", type_=s.ID)
_EPISODE_ROW = select(E).where(E.c.tenant_id == _TENANT, E.c.episode_id == _EPISODE, E.c.deleted_at.is_(None))
_LATEST_SUMMARY_TO = (
    select(func.max(S.c.to_seq))
    .where(S.c.tenant_id == E.c.tenant_id, S.c.episode_id == E.c.episode_id)
    .scalar_subquery()
)
# One row says whether anything is new: the episode (message_count is its last seq, since
# seqs are dense), its agent (prefix "a_"), and the span end of its latest summary.
_HEAD = (
    select(E, *[c.label(f"a_{c.name}") for c in A.c], _LATEST_SUMMARY_TO.label("summary_to"))
    .join(A, and_(A.c.tenant_id == E.c.tenant_id, A.c.agent_id == E.c.agent_id))
    .where(E.c.tenant_id == _TENANT, E.c.episode_id == _EPISODE, E.c.deleted_at.is_(None))
)
_NEWER_SUMMARY = (
    select(S)
    .where(S.c.tenant_id == _TENANT, S.c.episode_id == _EPISODE, S.c.to_seq > bindparam("b_known"))
    .order_by(S.c.to_seq.desc())
    .limit(1)
)
_NEWEST_MESSAGES_BEFORE = (
    select(M)
    .where(
        M.c.tenant_id == _TENANT,
        M.c.episode_id == _EPISODE,
        M.c.seq > bindparam("b_after"),
        M.c.seq < bindparam("b_before"),
    )
    .order_by(M.c.seq.desc())
    .limit(bindparam("b_limit"))
)
_SPOKEN_BEFORE = (
    select(M)
    .where(
        M.c.tenant_id == _TENANT,
        M.c.episode_id == _EPISODE,
        M.c.seq < bindparam("b_before"),
        M.c.role.in_([Role.USER.value, Role.ASSISTANT.value]),
        M.c.retracted_at.is_(None),
    )
    .order_by(M.c.seq.desc())
    .limit(bindparam("b_limit"))
)
_RANKED_SPOKEN = (
    select(
        M.c.episode_id,
        M.c.seq,
        M.c.role,
        M.c.content,
        M.c.created_at,
        func.row_number().over(partition_by=M.c.episode_id, order_by=M.c.seq).label("n"),
    )
    .join(E, and_(E.c.tenant_id == M.c.tenant_id, E.c.episode_id == M.c.episode_id))
    .where(
        M.c.tenant_id == _TENANT,
        M.c.episode_id.in_(bindparam("b_episodes", expanding=True)),
        M.c.role.in_([Role.USER.value, Role.ASSISTANT.value]),
        M.c.retracted_at.is_(None),
        E.c.deleted_at.is_(None),
    )
    .subquery()
)
# The first `b_per_episode` spoken, unretracted messages of each of `b_episodes`.
_SPOKEN_OF = (
    select(
        _RANKED_SPOKEN.c.episode_id,
        _RANKED_SPOKEN.c.seq,
        _RANKED_SPOKEN.c.role,
        _RANKED_SPOKEN.c.content,
        _RANKED_SPOKEN.c.created_at,
    )
    .where(_RANKED_SPOKEN.c.n <= bindparam("b_per_episode", type_=Integer))
    .order_by(_RANKED_SPOKEN.c.episode_id, _RANKED_SPOKEN.c.seq)
)
_PAGE = 256  # rows per query of a working set's messages
_MESSAGE_ROLE = select(M.c.role).where(
    M.c.tenant_id == _TENANT, M.c.episode_id == _EPISODE, M.c.seq == bindparam("b_seq")
)
# Model calls of soft-deleted episodes are invisible like their episodes.
_VISIBLE_CALLS = select(MC).join(
    E, and_(E.c.tenant_id == MC.c.tenant_id, E.c.episode_id == MC.c.episode_id, E.c.deleted_at.is_(None))
)
_CALL_ROW = _VISIBLE_CALLS.where(MC.c.tenant_id == _TENANT, MC.c.model_call_id == bindparam("b_call"))
_CALL_FOR_REQUEST = _VISIBLE_CALLS.where(
    MC.c.tenant_id == _TENANT, MC.c.episode_id == _EPISODE, MC.c.request_id == bindparam("b_request")
)
_INSERT_SUMMARY = InsertIgnoringConflicts(S)
_INSERT_CALL = InsertIgnoringConflicts(MC)


class SqlContextStore:
    def __init__(self, db: Database, writer: GroupCommitWriter) -> None:
        self._db = db
        self._writer = writer

    async def spoken(
        self, tenant_id: str, episode_ids: Sequence[str], per_episode: int
    ) -> dict[str, list[Message]]:
        if not episode_ids:
            return {}
        params = {"b_tenant": tenant_id, "b_episodes": list(episode_ids), "b_per_episode": per_episode}
        rows = await self._db.read(lambda conn: list(conn.execute(_SPOKEN_OF, params)))
        found: dict[str, list[Message]] = {}
        for episode_id, seq, role, content, created_at in rows:
            message = Message(episode_id, seq, Role(role), content, 0, "", created_at)
            found.setdefault(episode_id, []).append(message)
        return found

    async def sources(
        self, tenant_id: str, episode_id: str, known_summary_to: int, after_seq: int | None, allowance: int
    ) -> ContextSources:
        """`after_seq` None means nothing is cached: read the latest summary and the messages
        after its span, never the whole log. Either way only the newest messages that an
        `allowance` (or the agent's budget, if larger) needs are read (see TailReach): a
        big import costs the next turn no more than a modest conversation."""
        read = partial(
            _sources,
            tenant_id=tenant_id,
            episode_id=episode_id,
            known=known_summary_to,
            after=after_seq,
            allowance=allowance,
        )
        # A cached working set needs only what is new (a few rows): read it inline.
        return await (self._db.quick_read(read) if after_seq is not None else self._db.read(read))

    async def save_call(self, call: ModelCall, summary: Summary | None) -> tuple[ModelCall, bool]:
        """Stores a model call (and the summary made for it) in one transaction. With a
        request_id already used on the episode, returns the stored call and False."""

        def op(conn: Connection) -> tuple[ModelCall, bool]:
            try:
                if summary is not None:
                    _INSERT_SUMMARY.inserted(conn, summary_values(summary))
                if _INSERT_CALL.inserted(conn, model_call_values(call)):
                    return call, True
            except IntegrityError as exc:  # the episode was erased while the turn was built
                raise NotFound("episode", call.episode_id) from exc
            return _call_for_request(conn, call.tenant_id, call.episode_id, call.request_id), False

        return await self._writer.run(op)

    async def save_summary(self, summary: Summary) -> None:
        await self._writer.run(lambda conn: _INSERT_SUMMARY.inserted(conn, summary_values(summary)))

    async def call_for_request(self, tenant_id: str, episode_id: str, request_id: str) -> ModelCall | None:
        params = {"b_tenant": tenant_id, "b_episode": episode_id, "b_request": request_id}
        row = await self._db.read(lambda c: c.execute(_CALL_FOR_REQUEST, params).mappings().first())
        return model_call_from_row(row) if row is not None else None

    async def get_call(self, tenant_id: str, model_call_id: str) -> ModelCall:
        return await self._db.read(lambda c: _get_call(c, tenant_id, model_call_id))

    async def list_calls(
        self, tenant_id: str, episode_id: str, before: tuple[datetime, str] | None, limit: int
    ) -> list[ModelCall]:
        return await self._db.read(lambda c: _list_calls(c, tenant_id, episode_id, before, limit))

    async def record_reply(self, tenant_id: str, model_call_id: str, reply: ModelReply) -> ModelCall:
        def op(conn: Connection) -> ModelCall:
            call = _get_call(conn, tenant_id, model_call_id)
            if call.reply is not None:
                return _same_reply(call, reply)
            if reply.assistant_message_seq:
                _require_assistant_message(conn, call, reply.assistant_message_seq)
            stmt = update(MC).where(MC.c.tenant_id == tenant_id, MC.c.model_call_id == model_call_id)
            conn.execute(stmt.values(reply=reply_json(reply)))
            return _get_call(conn, tenant_id, model_call_id)

        return await self._writer.run(op)


def _sources(
    conn: Connection, *, tenant_id: str, episode_id: str, known: int, after: int | None, allowance: int
) -> ContextSources:
    """Reads only what the head row says is new: usually that one row and nothing else."""
    scope: dict[str, Any] = {"b_tenant": tenant_id, "b_episode": episode_id}
    head = conn.execute(_HEAD, scope).mappings().first()
    if head is None:
        raise NotFound("episode", episode_id)
    episode, agent = episode_from_row(head), agent_from_row(head, prefix="a_")
    summary = None
    if (head["summary_to"] or 0) > known:
        row = conn.execute(_NEWER_SUMMARY, {**scope, "b_known": known}).mappings().one()
        summary = summary_from_row(row)
    since = after if after is not None else (summary.to_seq if summary else 0)
    newest: list[Message] = []
    complete = True
    if episode.message_count > since:
        reach = TailReach(max(allowance, agent.memory.max_working_memory_tokens))
        newest, complete = _newest_within(conn, scope, since, episode.message_count + 1, reach)
    # a cold read also brings what the tail does not hold, for recall inside the episode
    before = newest[0].seq if newest else episode.message_count + 1
    earlier = _spoken_before(conn, scope, before) if after is None and before > 1 else []
    return ContextSources(episode, agent, summary, newest, complete, earlier)


def _spoken_before(conn: Connection, scope: dict[str, Any], before: int) -> list[Message]:
    """The newest MAX_MESSAGES spoken, unretracted messages before seq `before`, oldest first."""
    params = {**scope, "b_before": before, "b_limit": EARLIER_MESSAGES}
    found = [message_from_row(r) for r in conn.execute(_SPOKEN_BEFORE, params).mappings()]
    found.reverse()
    return found


def _newest_within(
    conn: Connection, scope: dict[str, Any], since: int, before: int, reach: TailReach
) -> tuple[list[Message], bool]:
    """The messages after `since`, read newest first a page at a time until `reach` says
    they are enough. Returns them oldest first, and whether they reach back to `since`."""
    newest: list[Message] = []
    while True:
        params = {**scope, "b_after": since, "b_before": before, "b_limit": _PAGE}
        page = [message_from_row(r) for r in conn.execute(_NEWEST_MESSAGES_BEFORE, params).mappings()]
        for m in page:
            newest.append(m)
            if reach.reached_with(m):
                newest.reverse()
                return newest, m.seq == since + 1  # seqs are dense
        if len(page) < _PAGE:
            newest.reverse()
            return newest, True
        before = page[-1].seq


def _get_call(conn: Connection, tenant_id: str, model_call_id: str) -> ModelCall:
    row = conn.execute(_CALL_ROW, {"b_tenant": tenant_id, "b_call": model_call_id}).mappings().first()
    if row is None:
        raise NotFound("model call", model_call_id)
    return model_call_from_row(row)


def _call_for_request(conn: Connection, tenant_id: str, episode_id: str, request_id: str) -> ModelCall:
    params = {"b_tenant": tenant_id, "b_episode": episode_id, "b_request": request_id}
    return model_call_from_row(conn.execute(_CALL_FOR_REQUEST, params).mappings().one())


def _list_calls(
    conn: Connection, tenant_id: str, episode_id: str, before: tuple[datetime, str] | None, limit: int
) -> list[ModelCall]:
    if conn.execute(_EPISODE_ROW, {"b_tenant": tenant_id, "b_episode": episode_id}).first() is None:
        raise NotFound("episode", episode_id)
    stmt = select(MC).where(MC.c.tenant_id == tenant_id, MC.c.episode_id == episode_id)
    if before is not None:
        at, call_id = before
        older = and_(MC.c.created_at == at, MC.c.model_call_id < call_id)
        stmt = stmt.where(or_(MC.c.created_at < at, older))
    stmt = stmt.order_by(MC.c.created_at.desc(), MC.c.model_call_id.desc()).limit(limit)
    return [model_call_from_row(r) for r in conn.execute(stmt).mappings()]


def _require_assistant_message(conn: Connection, call: ModelCall, seq: int) -> None:
    params = {"b_tenant": call.tenant_id, "b_episode": call.episode_id, "b_seq": seq}
    role = conn.execute(_MESSAGE_ROLE, params).scalar()
    if role != Role.ASSISTANT.value:
        raise InvalidArgument.of(
            "assistant_message_seq", f"episode {call.episode_id} has no assistant message with seq {seq}"
        )


def _same_reply(call: ModelCall, reply: ModelReply) -> ModelCall:
    """Attaching the same reply again is a retry; a different one is refused."""
    stored = call.reply
    assert stored is not None
    if (stored.input_tokens, stored.output_tokens, stored.latency, stored.assistant_message_seq) == (
        reply.input_tokens,
        reply.output_tokens,
        reply.latency,
        reply.assistant_message_seq,
    ):
        return call
    raise AlreadyExists(
        f"model call {call.model_call_id} already has a different reply", reason="REPLY_ALREADY_RECORDED"
    )
