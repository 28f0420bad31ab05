"""Each episode's session data in SQL: one versioned JSON object per episode, read and
rewritten under a row lock so concurrent updates apply one after the other."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, RowMapping, bindparam, select, update

from episodic.domain.memories import SessionData
from episodic.domain.ports.clock import Clock
from episodic.domain.ports.episodes import ReadBatch
from episodic.errors import NotFound
from episodic.store import schema as s
from episodic.store.database import Database
from episodic.store.writer import GroupCommitWriter

SD, E = s.session_data, s.episodes
# A turn reads its episode's data: built once, each call binds only its key.
_DATA_OF = select(SD).where(
    SD.c.tenant_id == bindparam("b_tenant"), SD.c.episode_id == bindparam("b_episode")
)


class SqlSessionDataStore:
    def __init__(self, db: Database, writer: GroupCommitWriter, clock: Clock) -> None:
        self._db = db
        self._writer = writer
        self._clock = clock

    async def get(self, tenant_id: str, episode_id: str, batch: ReadBatch | None = None) -> SessionData:
        params = {"b_tenant": tenant_id, "b_episode": episode_id}
        row = await self._db.read(lambda conn: conn.execute(_DATA_OF, params).mappings().first(), batch)
        return _current(row, tenant_id, episode_id, self._clock())

    async def update(
        self, tenant_id: str, episode_id: str, change: Callable[[SessionData], SessionData]
    ) -> SessionData:
        """`change` runs before anything is written: if it raises, nothing is."""

        def op(conn: Connection) -> SessionData:
            key = (SD.c.tenant_id == tenant_id, SD.c.episode_id == episode_id)
            row = conn.execute(select(SD).where(*key).with_for_update()).mappings().first()
            if row is None:
                lock_episode(conn, tenant_id, episode_id)
            now = self._clock()
            changed = change(_current(row, tenant_id, episode_id, now))
            values = _values(tenant_id, episode_id, changed, now)
            if row is None:
                conn.execute(SD.insert().values(values))
            else:
                conn.execute(update(SD).where(*key).values(values))
            return changed

        return await self._writer.run(op)


def lock_episode(conn: Connection, tenant_id: str, episode_id: str) -> None:
    """The first write of an episode's data: its episode must exist and may not be erased
    before this commits (FOR KEY SHARE on PostgreSQL; SQLite has one writer anyway)."""
    stmt = select(E.c.episode_id).where(E.c.tenant_id == tenant_id, E.c.episode_id == episode_id)
    if conn.execute(stmt.with_for_update(read=True, key_share=True)).first() is None:
        raise NotFound("episode", episode_id)


def _current(row: RowMapping | None, tenant_id: str, episode_id: str, now: datetime) -> SessionData:
    """The stored data, or the empty version 0 when there is none or it has expired."""
    expires_at = row["expires_at"] if row is not None else None
    if row is None or (expires_at is not None and expires_at <= now):
        return SessionData(tenant_id, episode_id)
    return SessionData(
        tenant_id=tenant_id,
        episode_id=episode_id,
        data=row["data"] or {},
        version=row["version"],
        updated_at=row["updated_at"],
        expires_at=expires_at,
    )


def _values(tenant_id: str, episode_id: str, d: SessionData, now: datetime) -> dict[str, Any]:
    return {
        "tenant_id": tenant_id,
        "episode_id": episode_id,
        "data": dict(d.data),
        "version": d.version,
        "updated_at": d.updated_at or now,
        "expires_at": d.expires_at,
    }
