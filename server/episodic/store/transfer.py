"""Export and import of one user's rows (domain/transfer.py is the format's rules).

A record is a row of its table as the log keeps it, less the tenant (the importer's) and
what the server derives (vectors, full-text rows, a digest's text: rebuilt after import).
Columns are read and checked by their SQL types, so a record that is not a valid row is
refused by part, record and column before anything is written.

Export reads inside one transaction (SQLite's WAL snapshot; PostgreSQL REPEATABLE READ),
streamed with server-side cursors: memory stays flat however long the user's history is.
Each episode is imported in one transaction.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    Float,
    Integer,
    RowMapping,
    Select,
    String,
    Table,
    Text,
    select,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from episodic.domain.changes import Declared, Recorded
from episodic.domain.digests import pending_digest
from episodic.domain.memories import Memory
from episodic.domain.model import Episode, EpisodeState
from episodic.domain.transfer import EPISODE_TYPES, EpisodeImported, EpisodeRows, ErasureWatch, ImportedRecord
from episodic.domain.validation import json_problem
from episodic.errors import AlreadyExists, FailedPrecondition, InvalidArgument
from episodic.store import schema as s
from episodic.store.context_rows import model_call_from_row, summary_from_row
from episodic.store.database import Database
from episodic.store.erasure import erasures_known, refuse_if_erased
from episodic.store.memories import memory_from_row
from episodic.store.rows import digest_values, episode_from_row, message_from_row, tool_call_from_row
from episodic.store.writer import GroupCommitWriter

E, M, TC, SM, D, SD, MC, MEM = (
    s.episodes, s.messages, s.tool_calls, s.summaries, s.digests, s.session_data, s.model_calls, s.memories,
)  # fmt: skip
TABLES: dict[str, Table] = {
    "episode": E,
    "message": M,
    "tool_call": TC,
    "summary": SM,
    "digest": D,
    "session_data": SD,
    "model_call": MC,
    "memory": MEM,
}
# Not exported: the tenant is the importer's; a soft delete hides the episode from export
# anyway; a memory's vector is the server's to make.
# JSON columns every later read takes for an object (GetSessionData, an episode's metadata).
_OBJECTS = {
    "episode": ("metadata",),
    "message": ("metadata",),
    "tool_call": ("input",),
    "session_data": ("data",),
    "memory": ("metadata",),
}
_LEFT_OUT = {"tenant_id", "deleted_at", "model", "dimension", "vector"}
_USER_COLUMNS = {"episode": "user_id", "digest": "user_id", "model_call": "user_id", "memory": "user_id"}
_BATCH = 500  # rows per fetch and per insert
# Columns that count or number things (and a duration): never negative, so no later read
# (BuildContext's counts, a page's seq) meets a value its wire type cannot carry.
_COUNTS = ("_count", "seq", "version", "_tokens", "duration_seconds")


def record_of(kind: str, row: Mapping[str, Any]) -> dict[str, object]:
    out: dict[str, object] = {"type": kind}
    for column in TABLES[kind].columns:
        if column.name not in _LEFT_OUT:
            value = row[column.name]
            out[column.name] = value.astimezone(UTC).isoformat() if isinstance(value, datetime) else value
    return out


def row_of(kind: str, record: Mapping[str, object], where: str) -> dict[str, Any]:
    """The record as a row of its table (without the tenant); `where` names it in errors."""
    table = TABLES.get(kind)
    if table is None:
        raise InvalidArgument.of("records", f"{where}: unknown record type {kind!r}")
    columns = {c.name: c for c in table.columns if c.name not in _LEFT_OUT}
    extra = sorted(set(record) - set(columns) - {"type"})
    if extra:
        raise InvalidArgument.of("records", f"{where}: unknown field {extra[0]!r} of a {kind} record")
    row = {name: _value(column, record.get(name), f"{where}.{name}") for name, column in columns.items()}
    for name in _OBJECTS.get(kind, ()):
        if row[name] is not None and not isinstance(row[name], dict):
            raise InvalidArgument.of("records", f"{where}.{name} must be a JSON object")
    return row


def _value(column: Column[Any], value: object, where: str) -> object:
    if value is None:
        if column.nullable or column.server_default is not None:
            return None
        raise InvalidArgument.of("records", f"{where} is required")
    for types, check in _CHECKS:
        if isinstance(column.type, types):
            return check(column, value, where)
    problem = json_problem(value)  # JSON columns: finite, shallow; their shape is the reader's
    if problem:
        raise InvalidArgument.of("records", f"{where} {problem}")
    return value


def _integer(column: Column[Any], value: object, where: str) -> object:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgument.of("records", f"{where} must be an integer")
    bits = 63 if isinstance(column.type, BigInteger) else 31  # what the column can store
    low = 0 if column.name.endswith(_COUNTS) else -(2**bits)
    if not low <= value < 2**bits:
        raise InvalidArgument.of("records", f"{where} must be between {low} and {2**bits - 1}")
    return value


def _boolean(_: Column[Any], value: object, where: str) -> object:
    if isinstance(value, bool):
        return value
    raise InvalidArgument.of("records", f"{where} must be true or false")


def _number(column: Column[Any], value: object, where: str) -> object:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        if column.name.endswith(_COUNTS) and value < 0:
            raise InvalidArgument.of("records", f"{where} must not be negative")
        return float(value)
    raise InvalidArgument.of("records", f"{where} must be a finite number")


def _text(column: Column[Any], value: object, where: str) -> object:
    if not isinstance(value, str) or "\x00" in value:
        raise InvalidArgument.of("records", f"{where} must be a string without NUL")
    length = getattr(column.type, "length", None)
    if length is not None and len(value) > length:
        raise InvalidArgument.of("records", f"{where} is over {length} characters")
    return value


def _moment(_: Column[Any], value: object, where: str) -> object:
    return _time(value, where)


_CHECKS: tuple[tuple[type | tuple[type, ...], Callable[[Column[Any], object, str], object]], ...] = (
    (s.UtcDateTime, _moment),
    (Boolean, _boolean),
    ((Integer, BigInteger), _integer),
    (Float, _number),
    ((String, Text), _text),
)


def _time(value: object, where: str) -> datetime:
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            try:
                return parsed.astimezone(UTC)
            except OverflowError:  # an offset past the calendar's edge
                pass
    raise InvalidArgument.of("records", f"{where} must be an ISO 8601 time with an offset")


# Each kind's domain reader: a row it cannot read (an unknown role, a malformed tool call)
# is refused here, not discovered by a later read of the log.
_READERS = {
    "episode": episode_from_row,
    "message": message_from_row,
    "tool_call": tool_call_from_row,
    "summary": summary_from_row,
    "model_call": model_call_from_row,
    "memory": memory_from_row,
}


def checked(kind: str, row: dict[str, Any], where: str) -> ImportedRecord:
    """The row read as the domain reads it: refused here if it cannot be."""
    reader = _READERS.get(kind)
    try:
        value = reader(cast(RowMapping, {"tenant_id": "", **row})) if reader else None
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise InvalidArgument.of("records", f"{where}: not a valid {kind} ({type(exc).__name__})") from exc
    return ImportedRecord(where, kind, value, row)


class Keys:
    """The keys a part's rows must hold once each: their table's primary key and unique
    indexes (less the tenant), so a repeated record is refused by position, not by the
    database's IntegrityError."""

    def __init__(self) -> None:
        self._seen: set[tuple[object, ...]] = set()

    def add(self, kind: str, row: Mapping[str, Any], where: str) -> None:
        for columns in _unique_columns(TABLES[kind]):
            key = (kind, columns, *(row[c] for c in columns))
            if None in key:
                continue
            if key in self._seen:
                raise InvalidArgument.of(
                    "records", f"{where}: repeats the {kind} {', '.join(columns)} of an earlier record"
                )
            self._seen.add(key)


def _unique_columns(table: Table) -> list[tuple[str, ...]]:
    keys = [tuple(c.name for c in table.primary_key.columns)]
    keys += [tuple(c.name for c in i.columns) for i in table.indexes if i.unique]
    return [tuple(c for c in key if c != "tenant_id") for key in keys]


def retarget(kind: str, row: dict[str, Any], user_id: str) -> dict[str, Any]:
    column = _USER_COLUMNS.get(kind)
    return {**row, column: user_id} if column else row


class SqlTransfer:
    def __init__(self, db: Database, writer: GroupCommitWriter) -> None:
        self._db = db
        self._writer = writer

    # --- export ----------------------------------------------------------------------------

    async def export(
        self, tenant_id: str, user_id: str, agent_ids: Sequence[str] | None
    ) -> AsyncIterator[tuple[str, dict[str, object]]]:
        """(kind, record) of the user's episodes, each followed by what it owns, then the
        memories; all as of one snapshot. `agent_ids` None: every agent."""
        async with self._db.engine.connect() as conn:
            if not self._db.is_sqlite:
                conn = await conn.execution_options(isolation_level="REPEATABLE READ")
            async with conn.begin():
                mine = (E.c.tenant_id == tenant_id, E.c.user_id == user_id, E.c.deleted_at.is_(None))
                episodes = select(E).where(*mine).order_by(E.c.started_at, E.c.episode_id)
                if agent_ids is not None:
                    episodes = episodes.where(E.c.agent_id.in_(list(agent_ids)))
                ids = [r.episode_id for r in (await conn.execute(episodes.with_only_columns(E.c.episode_id)))]
                for episode_id in ids:
                    async for item in _episode_records(conn, tenant_id, episode_id):
                        yield item
                memories = select(MEM).where(MEM.c.tenant_id == tenant_id, MEM.c.user_id == user_id)
                if agent_ids is not None:
                    memories = memories.where(MEM.c.agent_id.in_(list(agent_ids)))
                async for row in _rows(conn, memories.order_by(MEM.c.created_at, MEM.c.memory_id)):
                    yield "memory", record_of("memory", row)

    # --- import ----------------------------------------------------------------------------

    def episode_rows(self, part: str, records: Sequence[Mapping[str, object]], user_id: str) -> EpisodeRows:
        """An episode part's records as rows (the episode first, then what it owns), every
        record checked: its type, columns, that it belongs to this episode and that the
        messages are numbered 1..n as the episode counts them."""
        if not records or records[0].get("type") != "episode":
            raise InvalidArgument.of("records", f"{part} must begin with its episode record")
        first = retarget("episode", row_of("episode", records[0], f"{part} record 1"), user_id)
        found, keys = EpisodeRows(first, records=[checked("episode", first, f"{part} record 1")]), Keys()
        for line, record in enumerate(records[1:], start=2):
            kind, where = str(record["type"]), f"{part} record {line}"
            if kind not in EPISODE_TYPES[1:]:
                raise InvalidArgument.of(
                    "records", f"{where}: a {kind!r} record cannot be in an episode's part"
                )
            row = retarget(kind, row_of(kind, record, where), user_id)
            if row.get("episode_id") != found.episode_id:
                raise InvalidArgument.of("records", f"{where}: belongs to another episode than {part}'s")
            read = checked(kind, row, where)
            keys.add(kind, row, where)
            if kind != "digest":  # made again by the server
                found.records.append(read)
                found.rows.setdefault(kind, []).append(row)
        seqs = [r["seq"] for r in found.of("message")]
        if seqs != list(range(1, len(seqs) + 1)) or len(seqs) != first["message_count"]:
            raise InvalidArgument.of(
                "records", f"{part}: messages must be numbered 1..message_count ({first['message_count']})"
            )
        return found

    def memories(
        self, part: str, records: Sequence[Mapping[str, object]], tenant_id: str, user_id: str
    ) -> list[Memory]:
        rows, keys = [], Keys()
        for line, record in enumerate(records, start=1):
            where = f"{part} record {line}"
            if record.get("type") != "memory":
                raise InvalidArgument.of("records", f"{where}: only memory records belong in {part}")
            row = retarget("memory", row_of("memory", record, where), user_id)
            checked("memory", row, where)
            keys.add("memory", row, where)
            rows.append(row)
        return memories_of(rows, tenant_id)

    async def missing_agents(self, tenant_id: str, agent_ids: Iterable[str]) -> list[str]:
        wanted = sorted(set(agent_ids))
        if not wanted:
            return []
        stmt = select(s.agents.c.agent_id).where(
            s.agents.c.tenant_id == tenant_id, s.agents.c.agent_id.in_(wanted)
        )
        found = await self._db.read(lambda conn: {r.agent_id for r in conn.execute(stmt)})
        return [a for a in wanted if a not in found]

    async def erasures_of(self, tenant_id: str, user_hash: str) -> frozenset[str]:
        """Outside any export snapshot: it must see the newest state."""
        return (await self._db.read(lambda conn: erasures_known(conn, tenant_id, user_hash))).known

    async def import_episode(
        self,
        tenant_id: str,
        rows: EpisodeRows,
        now: datetime,
        watch: ErasureWatch,
        declared: Declared[EpisodeImported],
    ) -> Recorded[EpisodeImported]:
        def op(conn: Connection) -> EpisodeImported:
            refuse_if_erased(conn, tenant_id, watch, [rows.agent_id])
            episode = episode_from_row(cast(RowMapping, {"tenant_id": tenant_id, **rows.episode}))
            held = conn.execute(
                select(E).where(E.c.tenant_id == tenant_id, E.c.episode_id == rows.episode_id)
            )
            existing = held.mappings().first()
            if existing is not None:
                return EpisodeImported(_same(episode_from_row(existing), episode), created=False)
            _insert(conn, E, [{**rows.episode, "tenant_id": tenant_id, "deleted_at": None}])
            for kind in ("message", "tool_call", "summary", "session_data"):
                _insert(conn, TABLES[kind], [{**r, "tenant_id": tenant_id} for r in rows.of(kind)])
            calls = _new_model_calls(conn, tenant_id, rows.of("model_call"))
            _insert(conn, MC, [{**r, "tenant_id": tenant_id} for r in calls])
            closed = episode.state is EpisodeState.CLOSED
            if closed:  # the server makes the digest (and its vectors) again
                conn.execute(D.insert(), digest_values(pending_digest(episode, now)))
            return EpisodeImported(episode, True, len(rows.of("message")), len(calls), closed)

        return await self._writer.run(op, declared)


def _same(held: Episode, imported: Episode) -> Episode:
    """An episode already held is the import's own earlier run (nothing to do) only if it is
    the same conversation; anything else is a collision the importer must resolve."""
    if (held.agent_id, held.user_id, held.message_count) == (
        imported.agent_id, imported.user_id, imported.message_count,
    ):  # fmt: skip
        return held
    raise AlreadyExists(
        f"episode {imported.episode_id!r} already exists with other content (another agent, user "
        "or message count): erase it first, or import under another user id",
        reason="EPISODE_EXISTS",
    )


def _new_model_calls(conn: Connection, tenant_id: str, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if not calls:
        return []
    ids = [c["model_call_id"] for c in calls]
    stmt = select(MC.c.model_call_id, MC.c.episode_id).where(
        MC.c.tenant_id == tenant_id, MC.c.model_call_id.in_(ids)
    )
    for held in conn.execute(stmt):
        raise FailedPrecondition(
            f"model call {held.model_call_id!r} already exists in this tenant (episode {held.episode_id!r})",
            reason="MODEL_CALL_EXISTS",
        )
    return calls


def _insert(conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    for start in range(0, len(rows), _BATCH):
        conn.execute(table.insert(), list(rows[start : start + _BATCH]))


async def _episode_records(
    conn: AsyncConnection, tenant_id: str, episode_id: str
) -> AsyncIterator[tuple[str, dict[str, object]]]:
    def of(table: Table, *order: Any) -> Select[Any]:
        return (
            select(table)
            .where(table.c.tenant_id == tenant_id, table.c.episode_id == episode_id)
            .order_by(*order)
        )

    reads: tuple[tuple[str, Select[Any]], ...] = (
        ("episode", of(E, E.c.episode_id)),
        ("message", of(M, M.c.seq)),
        ("tool_call", of(TC, TC.c.call_seq, TC.c.tool_call_id)),
        ("summary", of(SM, SM.c.to_seq)),
        ("digest", of(D, D.c.episode_id)),
        ("session_data", of(SD, SD.c.episode_id)),
        ("model_call", of(MC, MC.c.created_at, MC.c.model_call_id)),
    )
    for kind, stmt in reads:
        async for row in _rows(conn, stmt):
            yield kind, record_of(kind, row)


async def _rows(conn: AsyncConnection, stmt: Select[Any]) -> AsyncIterator[Mapping[str, Any]]:
    result = await conn.stream(stmt.execution_options(yield_per=_BATCH))
    async for row in result.mappings():
        yield row


def memories_of(rows: Sequence[dict[str, Any]], tenant_id: str) -> list[Memory]:
    return [memory_from_row(cast(RowMapping, {**r, "tenant_id": tenant_id})) for r in rows]
