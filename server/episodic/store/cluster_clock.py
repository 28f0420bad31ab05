"""The cluster's clock: the database's. Replicas' wall clocks may disagree, so the times
that decide between replicas (digest leases and when a digest is due, the one reaper's
idle cut-off) are read from PostgreSQL. SQLite serves one process, whose clock is the
cluster's."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, func, select

from episodic.domain.ports.clock import Clock
from episodic.store.database import Database
from episodic.store.schema import UtcDateTime

# clock_timestamp(), not now(): now() is frozen at the start of the transaction, and a
# group-commit transaction may be old by the time a claim in it runs.
_NOW = select(func.clock_timestamp(type_=UtcDateTime()))


def database_now(conn: Connection, fallback: datetime) -> datetime:
    """The database's time on PostgreSQL; `fallback` (this process's) on SQLite."""
    if conn.dialect.name != "postgresql":
        return fallback
    now = conn.scalar(_NOW)
    assert now is not None  # clock_timestamp() is never NULL
    return now


class DatabaseClock:
    """`now()` as every replica sees it: one cheap round trip on PostgreSQL."""

    def __init__(self, database: Database, fallback: Clock) -> None:
        self._database = database
        self._fallback = fallback

    async def now(self) -> datetime:
        if self._database.is_sqlite:
            return self._fallback()
        return await self._database.quick_read(lambda conn: database_now(conn, self._fallback()))
