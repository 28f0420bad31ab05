"""The `RecentlyActive` port over SQL: open episodes by their last activity, newest first
(the episodes' (state, last_activity_at) index, read backwards), for the warm start."""

from __future__ import annotations

from sqlalchemy import Connection, bindparam, select

from episodic.domain.model import EpisodeState
from episodic.store import schema as s
from episodic.store.database import Database

E = s.episodes

_RECENT = (
    select(E.c.tenant_id, E.c.episode_id)
    .where(E.c.state == EpisodeState.OPEN.value, E.c.deleted_at.is_(None))
    .order_by(E.c.last_activity_at.desc())
    .limit(bindparam("n"))
)


class SqlRecentlyActive:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def recently_active(self, limit: int) -> list[tuple[str, str]]:
        def read(conn: Connection) -> list[tuple[str, str]]:
            return [(t, e) for t, e in conn.execute(_RECENT, {"n": limit})]

        return await self._db.read(read)
