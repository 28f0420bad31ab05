"""Erasing one user's rows in one transaction, with the audit row, then scrubbing freed
space so erased text does not survive in the database files; and what the erasure ledger's
replay asks of the audit table and of a tenant's users (`ErasureRecords`)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Table, and_, delete, func, or_, select, text, tuple_

from episodic.domain.changes import Declared, Recorded
from episodic.domain.erasure import KINDS, Audit, Erased
from episodic.domain.erasure_ledger import LedgerEntry
from episodic.domain.memories import MemoryState
from episodic.domain.recall import Scope
from episodic.domain.transfer import ErasureWatch
from episodic.errors import Aborted
from episodic.store import schema as s
from episodic.store.database import Database
from episodic.store.dialect import InsertIgnoringConflicts
from episodic.store.writer import GroupCommitWriter

log = logging.getLogger(__name__)
E, MEM, AUDIT = s.episodes, s.memories, s.erasures
# The audit row of a replayed erasure may be written by two replicas replaying at once: the
# second finds it there (and, the first having committed, nothing left to delete).
_INSERT_AUDIT = InsertIgnoringConflicts(AUDIT)
# Where a tenant's users are found, walked in the order of an index that starts (tenant,
# agent, user): a page is a range scan, however many users the tenant has.
_USER_SOURCES = (E, MEM)
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
    """The `Eraser` port, and `ErasureRecords` (the ledger's replay reads the audit table
    this store writes)."""

    def __init__(self, db: Database, writer: GroupCommitWriter) -> None:
        self._db = db
        self._writer = writer
        self._owed = False  # a scrub failed: the next erasure scrubs even if it deletes nothing

    async def erase(
        self, tenant_id: str, user_id: str, agent_id: str, audit: Audit, declared: Declared[Erased]
    ) -> Recorded[Erased]:
        """Counts, deletes and audits in one transaction."""

        def op(conn: Connection) -> Erased:
            hold_user(conn, tenant_id, audit.user_hash, shared=False)
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
            _INSERT_AUDIT.inserted(conn, _audit_row(tenant_id, audit, counts))
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

    async def recorded(self, keys: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """One indexed query per tenant (the primary key starts with the tenant)."""
        by_tenant: dict[str, list[str]] = {}
        for tenant_id, erasure_id in keys:
            by_tenant.setdefault(tenant_id, []).append(erasure_id)

        def read(conn: Connection) -> set[tuple[str, str]]:
            found: set[tuple[str, str]] = set()
            for tenant_id, ids in by_tenant.items():
                mine = select(AUDIT.c.erasure_id).where(
                    AUDIT.c.tenant_id == tenant_id, AUDIT.c.erasure_id.in_(ids)
                )
                found.update((tenant_id, erasure_id) for erasure_id in conn.execute(mine).scalars())
            return found

        return await self._db.read(read) if by_tenant else set()

    async def audits(self, after: tuple[str, str] | None, limit: int) -> list[LedgerEntry]:
        a = AUDIT.c
        stmt = select(a.tenant_id, a.erasure_id, a.user_hash, a.agent_id, a.erased_at)
        if after is not None:
            stmt = stmt.where(tuple_(a.tenant_id, a.erasure_id) > tuple_(*after))
        stmt = stmt.order_by(a.tenant_id, a.erasure_id).limit(limit)
        rows = await self._db.read(lambda conn: conn.execute(stmt).all())
        return [LedgerEntry(e, t, h, a or "", at) for t, e, h, a, at in rows]

    async def user_page(self, tenant_id: str, cursor: str, limit: int) -> tuple[list[str], str]:
        """The cursor is [source, agent id, user id]: episodes' (agent, user) pairs, then
        memories'; each page continues one source's walk from its last pair."""
        source, agent_id, user_id = _walk_position(cursor)
        table = _USER_SOURCES[source]
        stmt = select(table.c.agent_id, table.c.user_id).where(table.c.tenant_id == tenant_id).distinct()
        if agent_id is not None:
            stmt = stmt.where(tuple_(table.c.agent_id, table.c.user_id) > tuple_(agent_id, user_id))
        stmt = stmt.order_by(table.c.agent_id, table.c.user_id).limit(limit)
        pairs = await self._db.read(lambda conn: conn.execute(stmt).all())
        if len(pairs) == limit:
            last_agent, last_user = pairs[-1]
            return [u for _, u in pairs], json.dumps([source, last_agent, last_user])
        following = "" if source + 1 == len(_USER_SOURCES) else json.dumps([source + 1, None, None])
        return [u for _, u in pairs], following

    async def record(self, tenant_id: str, audit: Audit) -> bool:
        row = _audit_row(tenant_id, audit, dict.fromkeys(KINDS, 0))
        return bool(await self._writer.run(lambda conn: _INSERT_AUDIT.inserted(conn, row)))

    async def _vacuum_postgres(self, tables: tuple[str, ...]) -> None:
        """On the maintenance engine: a VACUUM may outlast the request path's statement timeout."""
        async with self._db.maintenance.connect() as conn:
            autocommit = await conn.execution_options(isolation_level="AUTOCOMMIT")
            for table in tables:
                await autocommit.execute(text(f'VACUUM "{table}"'))


def hold_user(conn: Connection, tenant_id: str, user_hash: str, *, shared: bool) -> None:
    """PostgreSQL: an erasure holds its user exclusively to COMMIT, a write of the user's rows
    (an import's, a memory's) shared, before its own row locks (a deadlock with another
    operation of the same group-commit batch is rerun by the writer).
    A write in flight when the erasure starts commits first, and the erasure's deletes see
    it; one that starts after waits, then sees the erasure's audit row. (SQLite: one writer
    orders them already.)"""
    if conn.dialect.name != "postgresql":
        return
    digest = hashlib.sha256(f"erasure:{tenant_id}:{user_hash}".encode()).digest()
    key = int.from_bytes(digest[:8], "big", signed=True)
    lock = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    conn.execute(text(f"SELECT {lock}(:key)"), {"key": key})


def erased_meanwhile(
    conn: Connection, tenant_id: str, user_hash: str, agent_id: str, known: frozenset[str]
) -> bool:
    """Whether an erasure of the user (of every agent, or of `agent_id`) other than `known`
    has committed."""
    stmt = select(AUDIT.c.erasure_id).where(
        AUDIT.c.tenant_id == tenant_id,
        AUDIT.c.user_hash == user_hash,
        or_(AUDIT.c.agent_id.is_(None), AUDIT.c.agent_id == "", AUDIT.c.agent_id == agent_id),
    )
    return any(row.erasure_id not in known for row in conn.execute(stmt))


def erasures_known(conn: Connection, tenant_id: str, user_hash: str) -> ErasureWatch:
    """The user's erasures committed so far: taken when a write's work begins (before it
    reads or receives anything it will write), for `refuse_if_erased` in its transaction."""
    stmt = select(AUDIT.c.erasure_id).where(AUDIT.c.tenant_id == tenant_id, AUDIT.c.user_hash == user_hash)
    return ErasureWatch(user_hash, frozenset(r.erasure_id for r in conn.execute(stmt)))


def refuse_if_erased(conn: Connection, tenant_id: str, watch: ErasureWatch, agent_ids: Iterable[str]) -> None:
    """The one check of every write of a user whose work began before it commits (an import,
    CreateMemories): inside the write's transaction, holding the user shared (PostgreSQL),
    ABORTED (USER_ERASED) if an erasure of the user (of every agent, or of one of
    `agent_ids`) not in `watch` has committed since the work began. So an erasure wins over
    a write in flight: the write either commits before it (and is erased) or is refused."""
    hold_user(conn, tenant_id, watch.user_hash, shared=True)
    if any(
        erased_meanwhile(conn, tenant_id, watch.user_hash, a, watch.known) for a in sorted(set(agent_ids))
    ):
        raise Aborted(
            "the user was erased while this write was in flight: nothing of it is written",
            reason="USER_ERASED",
        )


def _walk_position(cursor: str) -> tuple[int, str | None, str | None]:
    """(source, agent id, user id) of a user_page cursor; (0, None, None) to begin."""
    if not cursor:
        return 0, None, None
    source, agent_id, user_id = json.loads(cursor)
    return int(source), agent_id, user_id


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
