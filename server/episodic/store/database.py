"""Engines for the two supported backends.

Reads and writes are synchronous functions of a SQLAlchemy `Connection`, so a whole
read or a whole batch of writes costs one hop, not one per statement:
SQLite: reads run on a small thread pool of sync (pysqlite) connections; writes on ONE
sync connection used only from the group-commit writer's thread; the async (aiosqlite)
engine serves migrations and streaming.
PostgreSQL: one asyncpg pool for everything; the same sync code runs through
`AsyncConnection.run_sync`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import asyncpg
from sqlalchemy import Connection, Engine, create_engine, event, make_url
from sqlalchemy.dialects.postgresql import asyncpg as asyncpg_dialect
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import AsyncAdaptedQueuePool, NullPool, QueuePool

from episodic.bounded import within
from episodic.domain.ports.episodes import ReadBatch
from episodic.errors import CONFIGURATION, InvalidArgument
from episodic.store import pg_url, read_batch
from episodic.store.direct import sqlite_driver
from episodic.store.faults import Fault, StoreHealth, answered_in_time, as_error, classify, is_wrong_role
from episodic.store.reader_threads import ReaderThreads

# What a dedicated asyncpg connection (LISTEN, advisory locks) raises on a database fault: the
# server gone, a dropped connection, a wrong-role server (InternalClientError's
# TargetServerAttributeNotMatched between a primary's loss and a standby's promotion; NOTIFY
# refused during recovery) - a fault, not a bug.
DRIVER_FAULTS = (
    OSError,
    TimeoutError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
)

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
T = TypeVar("T")


# What SQLAlchemy's asyncpg dialect adds to the connect arguments for its own adapter.
_DIALECT_ONLY_ARGS = ("prepared_statement_cache_size", "prepared_statement_name_func", "async_fallback")


def asyncpg_connect_args(url: URL) -> dict[str, Any]:
    """`asyncpg.connect`'s arguments for a dedicated connection outside the pool (LISTEN,
    advisory locks): made by the dialect from the same URL as the pool's, so every
    connection tries the same hosts, in the same order, with the same target_session_attrs."""
    asyncpg_url = url.set(drivername="postgresql+asyncpg")
    dialect = asyncpg_dialect.dialect()  # type: ignore[no-untyped-call]
    _args, kwargs = dialect.create_connect_args(asyncpg_url)  # type: ignore[no-untyped-call]
    return {key: value for key, value in kwargs.items() if key not in _DIALECT_ONLY_ARGS}


def normalize_url(raw: str) -> URL:
    """Accepts plain `sqlite:///file.db` / `postgresql://...` (every multi-host form libpq
    accepts, `store/pg_url.py`) and picks the async driver."""
    if pg_url.is_postgres(raw):
        return pg_url.to_sqlalchemy(pg_url.parse(raw))
    try:
        url = make_url(raw)
    except Exception as exc:  # sqlalchemy raises ArgumentError with no stable base
        raise InvalidArgument.of(
            "database_url", f"is not a database URL: {exc}", subject=CONFIGURATION
        ) from exc
    backend = url.get_backend_name()
    if backend not in _DRIVERS:
        raise InvalidArgument.of(
            "database_url", "must be a sqlite:// or postgresql:// URL", subject=CONFIGURATION
        )
    return url.set(drivername=_DRIVERS[backend])


@dataclass(slots=True)
class SqliteReaders:
    """Sync read connections and the threads that use them (one hop per read), plus one
    connection kept open on the event loop's thread for quick reads. That one runs in
    autocommit (each statement its own snapshot): checking out a pooled connection and
    wrapping a read in BEGIN/COMMIT cost ~140 us, several times the read itself."""

    engine: Engine
    threads: ReaderThreads  # each holds one of `engine`'s connections
    inline: Engine
    _inline_conn: Connection | None = None

    def run_inline(self, read: Callable[[Connection], T]) -> T:
        if self._inline_conn is None:
            self._inline_conn = self.inline.connect()
        try:
            return read(self._inline_conn)
        finally:
            self._inline_conn.rollback()  # ends SQLAlchemy's transaction; SQLite has none open

    def close_inline(self) -> None:
        if self._inline_conn is not None:
            self._inline_conn.close()
            self._inline_conn = None

    async def run(self, read: Callable[[Connection], T]) -> T:
        """`read` in one transaction, on a reader thread."""
        return await self.threads.run(partial(_in_transaction, read))

    async def run_each(self, reads: Sequence[read_batch.Read]) -> list[read_batch.Outcome]:
        """Each read in a transaction of its own, all on one trip to a reader thread."""
        return await self.threads.run(partial(read_batch.run_each, reads=reads))


def _in_transaction(read: Callable[[Connection], T], conn: Connection) -> T:
    with conn.begin():
        return read(conn)


@dataclass(frozen=True, slots=True)
class Timeouts:
    """PostgreSQL's bounds. `statement_seconds` None leaves statements unbounded (the CLI's
    migrate and reindex); the server bounds every statement of its pool: a SIGSTOPped or
    black-holed database answers nothing, so only a client-side timeout can notice."""

    statement_seconds: float | None = None
    connect_seconds: float = 5.0


# The server-side statement_timeout fires first on a slow but living database (an answer
# that does not flip health); the client-side one, this much later, means no answer at all.
HUNG_GRACE_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class Database:
    """`engine` serves migrations and streaming (and everything on PostgreSQL);
    `sqlite_writer` / `sqlite_readers` are the SQLite sync connections, None on PostgreSQL.
    `maintenance` runs what may legitimately take long (migrations, VACUUM): on PostgreSQL
    with bounded statements it is an unpooled engine without those bounds, else `engine`."""

    url: URL
    engine: AsyncEngine
    sqlite_writer: Engine | None
    sqlite_readers: SqliteReaders | None = None
    health: StoreHealth = field(default_factory=StoreHealth)
    maintenance_engine: AsyncEngine | None = None

    @property
    def maintenance(self) -> AsyncEngine:
        return self.maintenance_engine or self.engine

    @property
    def is_sqlite(self) -> bool:
        return self.sqlite_writer is not None

    async def read(self, read: Callable[[Connection], T], batch: ReadBatch | None = None) -> T:
        """Runs a read-only function of a connection, in one transaction (given a `batch` of
        `together`, on the trip it shares with the request's other reads)."""
        started = time.monotonic()
        try:
            shared = batch if isinstance(batch, read_batch.ReadBatch) else None
            result = await (shared.submit(read) if shared is not None else self._read(read))
        except Exception as exc:
            raise self.fault_of(exc, started) from exc
        self.health.succeeded(wrote=False)
        return result

    async def _read(self, read: Callable[[Connection], T]) -> T:
        readers = self.sqlite_readers
        if readers is not None:
            return await readers.run(read)
        async with self.engine.connect() as conn:
            return await conn.run_sync(read)

    def together(self) -> AbstractContextManager[ReadBatch]:
        """A batch: the reads handed it in one turn of the event loop share one trip to the
        database (store/read_batch.py)."""
        return read_batch.together(self._run_many)

    async def _run_many(self, reads: Sequence[read_batch.Read]) -> list[read_batch.Outcome]:
        readers = self.sqlite_readers
        if readers is not None:
            return await readers.run_each(reads)
        async with self.engine.connect() as conn:
            return await conn.run_sync(read_batch.run_each, reads)

    async def quick_read(self, read: Callable[[Connection], T], batch: ReadBatch | None = None) -> T:
        """A read of a few rows by index. SQLite runs it on the calling thread: a hop to a
        reader thread costs ~0.4 ms, the read itself tens of microseconds (WAL readers
        never wait for the writer)."""
        readers = self.sqlite_readers
        if readers is None:
            return await self.read(read, batch)
        started = time.monotonic()
        try:
            result = readers.run_inline(read)
        except Exception as exc:
            readers.close_inline()  # a broken connection is replaced on the next read
            raise self.fault_of(exc, started) from exc
        self.health.succeeded(wrote=False)
        return result

    def pool_use(self) -> dict[str, tuple[int, int]]:
        """Connections of each pool, (in use, idle): "main" serves everything on PostgreSQL
        (migrations and streaming on SQLite), "readers" and "writer" are SQLite's own."""
        pools = {"main": self.engine.pool}
        if self.sqlite_readers is not None:
            pools["readers"] = self.sqlite_readers.engine.pool
        if self.sqlite_writer is not None:
            pools["writer"] = self.sqlite_writer.pool
        return {
            name: (pool.checkedout(), pool.checkedin())
            for name, pool in pools.items()
            if isinstance(pool, QueuePool)
        }

    def fault_of(self, exc: Exception, started: float | None = None) -> Exception:
        """What to raise for a failed database call (begun at `started`, time.monotonic()): an
        outage becomes UNAVAILABLE / RESOURCE_EXHAUSTED (and is reported to `health`);
        anything else is `exc` itself."""
        fault = classify(exc)
        if fault is None:
            return exc
        if not answered_in_time(exc):  # a statement timeout is an answer: the database lives
            self.health.failed(fault, exc, started=started)
        return as_error(fault)

    async def probe(self, fault: Fault) -> None:
        """Raises while the database still has `fault`: an outage needs a round trip (on
        PostgreSQL, to a server that takes writes: a standby answers reads), full storage
        a committed write (one that changes nothing)."""
        if fault is Fault.STORAGE_FULL:
            await self._probe_write()
        elif self.is_sqlite:
            await self._read(lambda conn: conn.exec_driver_sql("SELECT 1").scalar())
        elif await self._read(lambda conn: conn.exec_driver_sql("SELECT pg_is_in_recovery()").scalar()):
            raise WrongRole("the database reached is a standby: it takes no writes")

    async def _probe_write(self) -> None:
        writer = self.sqlite_writer
        if writer is None:  # a transaction with an id writes a commit record to the WAL
            async with self.engine.begin() as conn:
                await conn.exec_driver_sql("SELECT txid_current()")
            return

        def rewrite_header(engine: Engine) -> None:
            with engine.connect() as conn, conn.begin():
                version = conn.exec_driver_sql("PRAGMA user_version").scalar()
                conn.exec_driver_sql(f"PRAGMA user_version = {int(version or 0)}")

        await asyncio.to_thread(rewrite_header, writer)

    async def dispose(self) -> None:
        await self.health.close()
        await within(DISPOSE_SECONDS, self.engine.dispose(), "close database connections")
        if self.maintenance_engine is not None:
            await within(DISPOSE_SECONDS, self.maintenance_engine.dispose(), "close database connections")
        if self.sqlite_writer is not None:
            self.sqlite_writer.dispose()
        if self.sqlite_readers is not None:
            await asyncio.to_thread(self.sqlite_readers.threads.shutdown)
            self.sqlite_readers.engine.dispose()
            self.sqlite_readers.close_inline()
            self.sqlite_readers.inline.dispose()


def open_database(raw_url: str, *, pool_size: int = 8, timeouts: Timeouts | None = None) -> Database:
    database = _open(raw_url, pool_size, timeouts or Timeouts())
    database.health.set_probe(database.probe)
    return database


DISPOSE_SECONDS = 10.0  # closing connections waits on the server; a lost one must not hang exit
# An unreachable server must fail a call within seconds, not after the pool's 30 s wait:
# the caller gets UNAVAILABLE and retries.
PG_POOL_TIMEOUT_SECONDS = 10.0


def _open(raw_url: str, pool_size: int, timeouts: Timeouts) -> Database:
    url = normalize_url(raw_url)
    if url.get_backend_name() != "sqlite":
        return _open_postgres(url, pool_size, timeouts)
    reader = create_async_engine(
        url, poolclass=AsyncAdaptedQueuePool, pool_size=pool_size, max_overflow=0, hide_parameters=True
    )
    _take_over_sqlite_transactions(reader.sync_engine, "BEGIN")
    writer = _sqlite_sync_engine(url, "BEGIN IMMEDIATE", 1)
    reads = _sqlite_sync_engine(url, "BEGIN", pool_size)
    readers = SqliteReaders(reads, ReaderThreads(reads, pool_size), _sqlite_sync_engine(url, None, 1))
    return Database(url, reader, writer, readers)


def _open_postgres(url: URL, pool_size: int, timeouts: Timeouts) -> Database:
    engine = create_async_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_timeout=PG_POOL_TIMEOUT_SECONDS,
        connect_args=_pg_connect_args(timeouts),
        hide_parameters=True,
    )
    _discard_standby_connections(engine)
    if timeouts.statement_seconds is None:
        return Database(url, engine, None)
    unbounded = _pg_connect_args(Timeouts(None, timeouts.connect_seconds))
    maintenance = create_async_engine(url, poolclass=NullPool, connect_args=unbounded, hide_parameters=True)
    return Database(url, engine, None, maintenance_engine=maintenance)


class WrongRole(Exception):
    """The server answered, but as a standby (health's probe: still down)."""


def _discard_standby_connections(engine: AsyncEngine) -> None:
    """A pooled connection whose server refused a write as a standby (read_only_sql_transaction)
    is dropped, not reused: the next one is chosen again by the URL's hosts and
    target_session_attrs, and finds the primary once one is promoted."""

    @event.listens_for(engine.sync_engine, "handle_error")
    def on_error(context: Any) -> None:
        if is_wrong_role(context.original_exception):
            context.is_disconnect = True


def _pg_connect_args(timeouts: Timeouts) -> dict[str, Any]:
    """asyncpg's `timeout` bounds the connect, `command_timeout` every statement on the client
    side; statement_timeout and lock_timeout make the server give up first and free its
    backend."""
    args: dict[str, Any] = {"timeout": timeouts.connect_seconds}
    if timeouts.statement_seconds is None:
        return args
    millis = str(max(1, round(timeouts.statement_seconds * 1000)))
    args["command_timeout"] = timeouts.statement_seconds + HUNG_GRACE_SECONDS
    args["server_settings"] = {"statement_timeout": millis, "lock_timeout": millis}
    return args


def _sqlite_sync_engine(url: URL, begin: str | None, pool_size: int) -> Engine:
    engine = create_engine(
        url.set(drivername="sqlite+pysqlite"),
        poolclass=QueuePool,
        pool_size=pool_size,
        max_overflow=0,
        connect_args={"check_same_thread": False},  # pooled across the pool's own threads
        hide_parameters=True,  # SQL parameters are user data: never in an exception message
    )
    _take_over_sqlite_transactions(engine, begin)
    return engine


def _take_over_sqlite_transactions(engine: Engine, begin: str | None) -> None:
    """The sqlite3 module's own transaction handling breaks SAVEPOINT and defers the write
    lock; SQLAlchemy's documented recipe is to switch it off and emit BEGIN ourselves."""

    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        for pragma in SQLITE_PRAGMAS:
            cursor.execute(pragma)
        cursor.close()

    if begin is None:  # autocommit: every statement is its own transaction
        return

    @event.listens_for(engine, "begin")
    def on_begin(connection: Any) -> None:
        driver = sqlite_driver(connection)
        if driver is not None:  # through exec_driver_sql: ~25 us more
            driver.execute(begin)
        else:  # aiosqlite's, under the async engine
            connection.exec_driver_sql(begin)
