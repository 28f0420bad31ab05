"""Engines for the two supported backends.

SQLite: a pool of async (aiosqlite) connections for reads and migrations, plus ONE
synchronous writer connection that is only ever used from the group-commit writer's
thread, so a whole batch of writes costs one thread hop instead of one per statement.
PostgreSQL: one asyncpg pool for everything; writes run the same synchronous operation
code through `AsyncConnection.run_sync`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, create_engine, event, make_url
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import AsyncAdaptedQueuePool, QueuePool

from episodic.errors import InvalidArgument

# Durable commits (synchronous=FULL even in WAL), integrity, and no erased text left in
# free pages.
SQLITE_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=FULL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=10000",
    "PRAGMA secure_delete=ON",
)
_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}


def normalize_url(raw: str) -> URL:
    """Accepts plain `sqlite:///file.db` / `postgresql://...` and picks the async driver."""
    try:
        url = make_url(raw)
    except Exception as exc:  # sqlalchemy raises ArgumentError with no stable base
        raise InvalidArgument.of("database_url", f"is not a database URL: {exc}") from exc
    backend = url.get_backend_name()
    if backend not in _DRIVERS:
        raise InvalidArgument.of("database_url", "must be a sqlite:// or postgresql:// URL")
    return url.set(drivername=_DRIVERS[backend])


@dataclass(frozen=True, slots=True)
class Database:
    """`engine` serves reads and migrations (and PostgreSQL writes); `sqlite_writer` is the
    single SQLite write connection, None on PostgreSQL."""

    url: URL
    engine: AsyncEngine
    sqlite_writer: Engine | None

    @property
    def is_sqlite(self) -> bool:
        return self.sqlite_writer is not None

    async def dispose(self) -> None:
        await self.engine.dispose()
        if self.sqlite_writer is not None:
            self.sqlite_writer.dispose()


def open_database(raw_url: str, *, pool_size: int = 8) -> Database:
    url = normalize_url(raw_url)
    if url.get_backend_name() != "sqlite":
        engine = create_async_engine(url, pool_size=pool_size, max_overflow=pool_size)
        return Database(url, engine, None)
    reader = create_async_engine(url, poolclass=AsyncAdaptedQueuePool, pool_size=pool_size, max_overflow=0)
    _take_over_sqlite_transactions(reader.sync_engine, "BEGIN")
    writer = create_engine(
        url.set(drivername="sqlite+pysqlite"),
        poolclass=QueuePool,
        pool_size=1,
        max_overflow=0,
        connect_args={"check_same_thread": False},  # created and used by the writer thread only
    )
    _take_over_sqlite_transactions(writer, "BEGIN IMMEDIATE")
    return Database(url, reader, writer)


def _take_over_sqlite_transactions(engine: Engine, begin: str) -> None:
    """The sqlite3 module's own transaction handling breaks SAVEPOINT and defers the write
    lock; SQLAlchemy's documented recipe is to switch it off and emit BEGIN ourselves."""

    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        for pragma in SQLITE_PRAGMAS:
            cursor.execute(pragma)
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(connection: Any) -> None:
        connection.exec_driver_sql(begin)
