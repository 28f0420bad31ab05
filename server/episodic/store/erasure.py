"""Erasing one user's rows in one transaction, with the audit row, then scrubbing freed
space so erased text does not survive in the database files."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, Table, and_, delete, func, select, text

from episodic.domain.changes import Declared, Recorded
from episodic.domain.erasure import Audit, Erased
from episodic.domain.memories import MemoryState
from episodic.domain.recall import Scope
from episodic.store import schema as s
from episodic.store.database import Database
from episodic.store.writer import GroupCommitWriter

log = logging.getLogger(__name__)
E, MEM = s.episodes, s.memories
# Rows owned by an episode, by receipt kind; the episode delete cascades to all of them.
OWNED: dict[str, Table] = {
    "messages": s.messages,
    "tool_calls": s.tool_calls,
    "summaries": s.summaries,
    "digests": s.digests,
    "digest_vectors": s.digest_vectors,
    "text_rows": s.digest_texts,
    "model_calls": s.model_calls,
    "session_data": s.session_data,
}
# The tables each receipt count deletes from; drafts and their pieces (replies in progress,
# not counted in a receipt) go in the episodes' cascade.
_TABLES_OF: dict[str, tuple[str, ...]] = {
    "episodes": (E.name, s.drafts.name, s.draft_pieces.name),
    "memories": (MEM.name,),
} | {kind: (table.name,) for kind, table in OWNED.items()}


class SqlEraser:
    def __init__(self, db: Database, writer: GroupCommitWriter) -> None:
        self._db = db
        self._writer = writer
        self._owed = False  # a scrub failed: the next erasure scrubs even if it deletes nothing

    async def erase(
        self, tenant_id: str, user_id: str, agent_id: str, audit: Audit, declared: Declared[Erased]
    ) -> Recorded[Erased]:
        """Counts, deletes and audits in one transaction."""

        def op(conn: Connection) -> Erased:
            mine = _episodes_of(tenant_id, user_id, agent_id)
            erased = conn.execute(select(E.c.agent_id, E.c.episode_id).where(*mine)).all()
            chosen = select(E.c.episode_id).where(*mine)
            counts = {"episodes": len(erased)} | {
                k: _count(conn, t, tenant_id, chosen) for k, t in OWNED.items()
            }
            memories, memory_vectors = _erase_memories(conn, tenant_id, user_id, agent_id)
            counts["memories"] = len(memories)
            conn.execute(delete(s.model_calls).where(*_owned(s.model_calls, tenant_id, chosen)))
            conn.execute(delete(E).where(*mine))
            conn.execute(s.erasures.insert().values(_audit_row(tenant_id, audit, counts)))
            return Erased(counts, [(a, e) for a, e in erased], memories, memory_vectors)

        return await self._writer.run(op, declared)

    async def scrub(self, counts: Mapping[str, int]) -> bool:
        """Leaves no erased text in free space, doing only what the erasure's deletions
        (`counts`, per receipt kind) need: an erasure that deleted nothing does nothing, so a
        loop of erasures of unknown users cannot slow other tenants down. SQLite deletes with
        secure_delete; deleted digest text is merged out of the full-text index (deleted
        terms otherwise linger in old segments); then the WAL is checkpointed and truncated.
        PostgreSQL vacuums the tables rows were deleted from."""
        tables = touched_tables(counts)
        if not tables and not self._owed:
            return True
        try:
            scrubbed = await self._scrub(counts, tables if not self._owed else _ALL_TABLES)
        except Exception:  # the erasure itself is committed; say the scrub did not complete
            log.exception("scrubbing after an erasure failed")
            scrubbed = False
        self._owed = not scrubbed
        return scrubbed

    async def _scrub(self, counts: Mapping[str, int], tables: tuple[str, ...]) -> bool:
        if not self._db.is_sqlite:
            await self._vacuum_postgres(tables)
            return True
        if counts.get("text_rows", 0) or self._owed:
            await self._writer.run(_merge_fts)
        return await asyncio.to_thread(self._checkpoint_sqlite)

    def _checkpoint_sqlite(self) -> bool:
        """On a connection of its own: the writer's is busy with its batches."""
        conn = sqlite3.connect(self._db.url.database or "", timeout=10.0, isolation_level=None)
        try:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            return bool(busy == 0)
        finally:
            conn.close()

    async def _vacuum_postgres(self, tables: tuple[str, ...]) -> None:
        """On the maintenance engine: a VACUUM may outlast the request path's statement timeout."""
        async with self._db.maintenance.connect() as conn:
            autocommit = await conn.execution_options(isolation_level="AUTOCOMMIT")
            for table in tables:
                await autocommit.execute(text(f'VACUUM "{table}"'))


def touched_tables(counts: Mapping[str, int]) -> tuple[str, ...]:
    """The tables an erasure deleted rows from, by its receipt counts."""
    return tuple(dict.fromkeys(t for kind, n in counts.items() if n for t in _TABLES_OF.get(kind, ())))


_ALL_TABLES = tuple(dict.fromkeys(t for tables in _TABLES_OF.values() for t in tables))


def _episodes_of(tenant_id: str, user_id: str, agent_id: str) -> list[Any]:
    where = [E.c.tenant_id == tenant_id, E.c.user_id == user_id]
    return [*where, E.c.agent_id == agent_id] if agent_id else where


def _erase_memories(
    conn: Connection, tenant_id: str, user_id: str, agent_id: str
) -> tuple[list[tuple[Scope, str]], int]:
    """The user's memories (they outlive episodes, so are not in the cascade), any state, and
    how many of them had a vector in the memory index."""
    where = [MEM.c.tenant_id == tenant_id, MEM.c.user_id == user_id]
    if agent_id:
        where.append(MEM.c.agent_id == agent_id)
    indexed = and_(MEM.c.state == MemoryState.PROMOTED.value, MEM.c.vector.is_not(None))
    rows = conn.execute(select(MEM.c.agent_id, MEM.c.memory_id, indexed.label("indexed")).where(*where)).all()
    conn.execute(delete(MEM).where(*where))
    return [(Scope(tenant_id, a, user_id), m) for a, m, _ in rows], sum(1 for *_, i in rows if i)


def _owned(table: Table, tenant_id: str, chosen: Any) -> list[Any]:
    return [table.c.tenant_id == tenant_id, table.c.episode_id.in_(chosen)]


def _count(conn: Connection, table: Table, tenant_id: str, chosen: Any) -> int:
    return int(conn.execute(select(func.count()).where(*_owned(table, tenant_id, chosen))).scalar_one())


def _merge_fts(conn: Connection) -> None:
    for name in (s.DIGEST_FTS,):  # knowledge is an agent's, never a user's: nothing to merge there
        conn.exec_driver_sql(f"INSERT INTO {name}({name}) VALUES('optimize')")


def _audit_row(tenant_id: str, audit: Audit, counts: dict[str, int]) -> dict[str, Any]:
    return {
        "tenant_id": tenant_id,
        "erasure_id": audit.erasure_id,
        "user_hash": audit.user_hash,
        "agent_id": audit.agent_id or None,
        "erased_at": audit.erased_at,
        "counts": counts,
    }
