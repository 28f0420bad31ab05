"""Appends, handled in bulk: every append queued in one group-commit batch shares one
locked read of their episodes, one read of their client ids and tool calls (on SQLite, a
single AddMessage's episode and client id are one read), one INSERT
of all their messages and one UPDATE of all their episodes. Each append is still
planned on its own, in queue order, by the domain's plan_append; a refused append
writes nothing and gets its error, the others go ahead.

A BuildContext turn's append also takes its episode's PENDING memories (the episode's
working memory) in the same transaction: the turn then needs no read of its own for them."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, RowMapping, and_, bindparam, select, tuple_, update

from episodic.domain.log import AppendContext, AppendPlan, PreparedMessage, StoredMessage, plan_append
from episodic.domain.memories import Memory, MemoryState
from episodic.domain.model import Episode, Message, ToolCallRecord
from episodic.domain.ports.clock import Clock
from episodic.errors import EpisodicError, NotFound
from episodic.store import schema as s
from episodic.store.direct import Direct
from episodic.store.memories import memory_from_row
from episodic.store.rows import (
    episode_from_row,
    message_from_row,
    message_values,
    tool_call_from_row,
    tool_call_values,
    tool_result_values,
)
from episodic.store.writer import Outcome

E, M, TC, MEM = s.episodes, s.messages, s.tool_calls, s.memories
Key = tuple[str, str]  # (tenant_id, episode_id)

_EPISODES_LOCKED_IN = (
    select(E)
    .where(tuple_(E.c.tenant_id, E.c.episode_id).in_(bindparam("b_keys", expanding=True)))
    .where(E.c.deleted_at.is_(None))  # soft-deleted by retention: gone for every caller
    .order_by(E.c.tenant_id, E.c.episode_id)  # one lock order for every writer: no deadlocks
    .with_for_update()
)
# Equality forms for the common single-key case: an expanding IN is re-rendered per call.
_EPISODE_LOCKED = (
    select(E)
    .where(E.c.tenant_id == bindparam("b_0"), E.c.episode_id == bindparam("b_1"), E.c.deleted_at.is_(None))
    .with_for_update()
)
_ONE_EPISODE = Direct(_EPISODE_LOCKED)  # SQLite's one AddMessage, without a client id
# An AddMessage (one episode, one client_message_id) on SQLite: the episode and the message
# already stored under that id if any, in one read; the message's columns come as m_<name>.
# SQLite only, whose one writer runs one batch at a time: on PostgreSQL (READ COMMITTED) a
# statement that waited for the episode's lock still sees only what committed before it
# began, so a retry waiting on the first try would miss its message: the dedup read there
# is a statement of its own, run once the lock is held.
_EPISODE_AND_CLIENT_ID = Direct(
    select(E, *(column.label(f"m_{column.name}") for column in M.c))
    .select_from(
        E.outerjoin(
            M,
            and_(
                M.c.tenant_id == E.c.tenant_id,
                M.c.episode_id == E.c.episode_id,
                M.c.client_message_id == bindparam("b_2"),
            ),
        )
    )
    .where(E.c.tenant_id == bindparam("b_0"), E.c.episode_id == bindparam("b_1"), E.c.deleted_at.is_(None))
    .with_for_update(of=E)
)
_BY_CLIENT_ID = select(M).where(
    M.c.tenant_id == bindparam("b_0"),
    M.c.episode_id == bindparam("b_1"),
    M.c.client_message_id == bindparam("b_2"),
)
_TOOL_CALL = select(TC).where(
    TC.c.tenant_id == bindparam("b_0"),
    TC.c.episode_id == bindparam("b_1"),
    TC.c.tool_call_id == bindparam("b_2"),
)
_BY_CLIENT_IDS = select(M).where(
    tuple_(M.c.tenant_id, M.c.episode_id, M.c.client_message_id).in_(bindparam("b_keys", expanding=True))
)
_TOOL_CALLS = select(TC).where(
    tuple_(TC.c.tenant_id, TC.c.episode_id, TC.c.tool_call_id).in_(bindparam("b_keys", expanding=True))
)
_PENDING = (
    select(MEM).where(MEM.c.state == MemoryState.PENDING.value).order_by(MEM.c.created_at, MEM.c.memory_id)
)
_PENDING_MEMORIES = _PENDING.where(
    tuple_(MEM.c.tenant_id, MEM.c.episode_id).in_(bindparam("b_keys", expanding=True))
)
# The same for one episode (a BuildContext turn's append), by equality, direct on SQLite.
_PENDING_MEMORIES_OF = Direct(
    _PENDING.where(MEM.c.tenant_id == bindparam("b_0"), MEM.c.episode_id == bindparam("b_1"))
)
_SCOPE = {"tenant_id": bindparam("b_tenant", type_=s.ID), "episode_id": bindparam("b_episode", type_=s.ID)}
_GROW_EPISODES = Direct(
    update(E)
    .where(E.c.tenant_id == _SCOPE["tenant_id"], E.c.episode_id == _SCOPE["episode_id"])
    .values(
        message_count=bindparam("v_count"),
        token_count=bindparam("v_tokens"),
        last_activity_at=bindparam("v_now"),
    )
)
# Built once: a statement object made per call is also keyed for the compiled cache per call.
# The writes run direct on SQLite (store/direct.py): they are most of an AddMessage's SQL.
_INSERT_MESSAGES = Direct(M.insert())
_INSERT_TOOL_CALLS = Direct(TC.insert())
_RESULT_COLUMNS = (
    "has_result",
    "output",
    "succeeded",
    "error",
    "called_at",
    "duration_seconds",
    "result_seq",
)
_SET_TOOL_RESULTS = Direct(
    update(TC)
    .where(
        TC.c.tenant_id == _SCOPE["tenant_id"],
        TC.c.episode_id == _SCOPE["episode_id"],
        TC.c.tool_call_id == bindparam("b_call"),
    )
    .values({name: bindparam(f"v_{name}") for name in _RESULT_COLUMNS})
)


@dataclass(frozen=True, slots=True)
class AppendItem:
    tenant_id: str
    episode_id: str
    batch: Sequence[PreparedMessage]
    with_pending: bool = False  # the outcome is (results, the episode's PENDING memories)

    @property
    def key(self) -> Key:
        return (self.tenant_id, self.episode_id)


@dataclass(slots=True)
class _State:
    """What the appends of one bulk run know, kept current as each one is planned."""

    episodes: dict[Key, Episode]
    stored: defaultdict[Key, dict[str, StoredMessage]]
    calls: defaultdict[Key, dict[str, ToolCallRecord]]
    grown: set[Key] = field(default_factory=set)
    messages: list[dict[str, Any]] = field(default_factory=list)
    new_calls: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)


class AppendBulk:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    def run_all(self, conn: Connection, items: Sequence[AppendItem]) -> list[Outcome]:
        now = self._clock()
        state = _load(conn, items)
        outcomes = [_plan_one(state, item, now) for item in items]
        _flush(conn, state, now)
        wanting = [i for i, item in enumerate(items) if item.with_pending and outcomes[i][0]]
        if wanting:
            held = _pending_memories(conn, sorted({items[i].key for i in wanting}))
            for i in wanting:
                outcomes[i] = (True, (outcomes[i][1], held.get(items[i].key, [])))
        return outcomes


def _pending_memories(conn: Connection, keys: Sequence[Key]) -> dict[Key, list[Memory]]:
    found: dict[Key, list[Memory]] = {}
    if len(keys) == 1:
        rows = _PENDING_MEMORIES_OF.all(conn, {"b_0": keys[0][0], "b_1": keys[0][1]})
        return {keys[0]: [memory_from_row(r) for r in rows]}
    for r in conn.execute(_PENDING_MEMORIES, {"b_keys": list(keys)}).mappings():
        found.setdefault((r["tenant_id"], r["episode_id"]), []).append(memory_from_row(r))
    return found


def _load(conn: Connection, items: Sequence[AppendItem]) -> _State:
    keys = sorted({item.key for item in items})
    wanted = _client_ids(items)
    if len(keys) == 1 and len(wanted) <= 1 and conn.dialect.name == "sqlite":
        episodes, stored = _episode_and_client_id(conn, keys[0], wanted[0][2] if wanted else None)
        return _State(episodes, stored, _tool_calls_named(conn, items))
    rows = _select_keys(conn, (_EPISODE_LOCKED, _EPISODES_LOCKED_IN), keys)
    episodes = {(r["tenant_id"], r["episode_id"]): episode_from_row(r) for r in rows}
    return _State(episodes, _stored_by_client_id(conn, wanted), _tool_calls_named(conn, items))


def _client_ids(items: Sequence[AppendItem]) -> list[tuple[str, str, str]]:
    return sorted(
        {(*i.key, p.new.client_message_id) for i in items for p in i.batch if p.new.client_message_id}
    )


def _episode_and_client_id(
    conn: Connection, key: Key, client_id: str | None
) -> tuple[dict[Key, Episode], defaultdict[Key, dict[str, StoredMessage]]]:
    """What the two reads of `_load` find, in one: the episode and its message under the id
    (when the append names one)."""
    episodes: dict[Key, Episode] = {}
    stored: defaultdict[Key, dict[str, StoredMessage]] = defaultdict(dict)
    if client_id is None:
        row = _ONE_EPISODE.first(conn, {"b_0": key[0], "b_1": key[1]})
    else:
        row = _EPISODE_AND_CLIENT_ID.first(conn, {"b_0": key[0], "b_1": key[1], "b_2": client_id})
    if row is None:
        return episodes, stored
    episodes[key] = episode_from_row(row)
    if client_id is not None and row["m_seq"] is not None:
        columns = {column.name: row[f"m_{column.name}"] for column in M.c}  # the message's own names
        stored[key][client_id] = StoredMessage(message_from_row(columns), row["m_fingerprint"])
    return episodes, stored


def _stored_by_client_id(
    conn: Connection, wanted: Sequence[tuple[str, str, str]]
) -> defaultdict[Key, dict[str, StoredMessage]]:
    found: defaultdict[Key, dict[str, StoredMessage]] = defaultdict(dict)
    for r in _select_keys(conn, (_BY_CLIENT_ID, _BY_CLIENT_IDS), wanted):
        found[(r["tenant_id"], r["episode_id"])][r["client_message_id"]] = StoredMessage(
            message_from_row(r), r["fingerprint"]
        )
    return found


def _tool_calls_named(
    conn: Connection, items: Sequence[AppendItem]
) -> defaultdict[Key, dict[str, ToolCallRecord]]:
    wanted = sorted({(*i.key, call_id) for i in items for call_id in _tool_call_ids(i.batch)})
    found: defaultdict[Key, dict[str, ToolCallRecord]] = defaultdict(dict)
    for r in _select_keys(conn, (_TOOL_CALL, _TOOL_CALLS), wanted):
        found[(r["tenant_id"], r["episode_id"])][r["tool_call_id"]] = tool_call_from_row(r)
    return found


def _tool_call_ids(batch: Sequence[PreparedMessage]) -> Iterable[str]:
    for p in batch:
        yield from (c.tool_call_id for c in p.new.tool_calls)
        if p.new.tool_result is not None:
            yield p.new.tool_result.tool_call_id


def _select_keys(
    conn: Connection, stmts: tuple[Any, Any], keys: Sequence[tuple[str, ...]]
) -> Iterable[RowMapping]:
    """Rows whose key columns match one of `keys`: (one-key statement, many-keys statement)."""
    if not keys:
        return ()
    if len(keys) == 1:
        return conn.execute(stmts[0], {f"b_{i}": part for i, part in enumerate(keys[0])}).mappings()
    return conn.execute(stmts[1], {"b_keys": list(keys)}).mappings()


def _plan_one(state: _State, item: AppendItem, now: datetime) -> Outcome:
    episode = state.episodes.get(item.key)
    if episode is None:
        return False, NotFound("episode", item.episode_id)
    ctx = AppendContext(episode, state.stored[item.key], state.calls[item.key])
    try:
        plan = plan_append(ctx, item.batch, now)
    except EpisodicError as exc:  # refused before anything was written
        return False, exc
    if plan.inserts:
        _record(state, item.key, episode, plan, now)
    return True, plan.results


def _record(state: _State, key: Key, episode: Episode, plan: AppendPlan, now: datetime) -> None:
    state.episodes[key] = dataclasses.replace(
        episode,
        message_count=plan.last_seq,
        token_count=episode.token_count + plan.token_delta,
        last_activity_at=now,
    )
    state.grown.add(key)
    for message, fingerprint in plan.inserts:
        state.messages.append(message_values(episode.tenant_id, message, fingerprint))
        _remember(state, key, message, fingerprint)
    for record in plan.new_tool_calls:
        state.calls[key][record.tool_call_id] = record
        state.new_calls.append(tool_call_values(*key, record))
    for record in plan.tool_results:
        state.calls[key][record.tool_call_id] = record
        state.results.append(_result_params(key, record))


def _remember(state: _State, key: Key, message: Message, fingerprint: str) -> None:
    if message.client_message_id:
        state.stored[key][message.client_message_id] = StoredMessage(message, fingerprint)


def _result_params(key: Key, record: ToolCallRecord) -> dict[str, Any]:
    values = tool_result_values(record)
    return {
        "b_tenant": key[0],
        "b_episode": key[1],
        "b_call": record.tool_call_id,
        **{f"v_{name}": values[name] for name in _RESULT_COLUMNS},
    }


def _flush(conn: Connection, state: _State, now: datetime) -> None:
    if state.messages:
        _INSERT_MESSAGES.execute(conn, state.messages)
    if state.new_calls:
        _INSERT_TOOL_CALLS.execute(conn, state.new_calls)
    if state.results:
        _SET_TOOL_RESULTS.execute(conn, state.results)
    if state.grown:
        _GROW_EPISODES.execute(conn, [_growth_params(state.episodes[key]) for key in sorted(state.grown)])


def _growth_params(episode: Episode) -> dict[str, Any]:
    return {
        "b_tenant": episode.tenant_id,
        "b_episode": episode.episode_id,
        "v_count": episode.message_count,
        "v_tokens": episode.token_count,
        "v_now": episode.last_activity_at,
    }
