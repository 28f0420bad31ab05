"""Engines for the two supported backends. SQLite gets one writer connection (it has
one writer anyway) that opens transactions with BEGIN IMMEDIATE, plus a pool of readers;
PostgreSQL shares one pool for both."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import event, make_url
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import AsyncAdaptedQueuePool

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
    """The engines of one database: `writer` for writes, `reader` for reads."""

    url: URL
    writer: AsyncEngine
    reader: AsyncEngine

    @property
    def is_sqlite(self) -> bool:
        return self.url.get_backend_name() == "sqlite"

    async def dispose(self) -> None:
        await self.writer.dispose()
        if self.reader is not self.writer:
            await self.reader.dispose()


def open_database(raw_url: str, *, pool_size: int = 8) -> Database:
    url = normalize_url(raw_url)
    if url.get_backend_name() != "sqlite":
        engine = create_async_engine(url, pool_size=pool_size, max_overflow=pool_size)
        return Database(url, engine, engine)
    writer = _sqlite_engine(url, begin="BEGIN IMMEDIATE", pool_size=1)
    reader = _sqlite_engine(url, begin="BEGIN", pool_size=pool_size)
    return Database(url, writer, reader)


def _sqlite_engine(url: URL, *, begin: str, pool_size: int) -> AsyncEngine:
    engine = create_async_engine(url, poolclass=AsyncAdaptedQueuePool, pool_size=pool_size, max_overflow=0)
    _take_over_sqlite_transactions(engine, begin)
    return engine


def _take_over_sqlite_transactions(engine: AsyncEngine, begin: str) -> None:
    """The sqlite3 module's own transaction handling breaks SAVEPOINT and defers the write
    lock; SQLAlchemy's documented recipe is to switch it off and emit BEGIN ourselves."""

    @event.listens_for(engine.sync_engine, "connect")
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        for pragma in SQLITE_PRAGMAS:
            cursor.execute(pragma)
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def on_begin(connection: Any) -> None:
        connection.exec_driver_sql(begin)
