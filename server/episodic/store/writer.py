"""Group commit: concurrent write operations share one transaction and one fsync.

Operations are synchronous functions of a SQLAlchemy `Connection` that decide from what
they read and raise before writing when they refuse. A batch first runs them all in one
transaction with no savepoints (the fast path). If any operation raises, that
transaction is rolled back and the batch is re-run with one SAVEPOINT per operation, so
a failing operation rolls back only its own writes and its caller alone gets the error.
A caller is answered only after COMMIT returns: acknowledged means durable.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection

from episodic.store.database import Database

T = TypeVar("T")
WriteOp = Callable[[Connection], T]
Outcome = tuple[bool, Any]
log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Pending(Generic[T]):
    op: WriteOp[T]
    future: asyncio.Future[T]


class GroupCommitWriter:
    """Runs write operations in batches of at most `max_batch`. SQLite: one batch at a time
    on a dedicated thread. PostgreSQL: `workers` batches in flight (row locks keep appends
    to one episode ordered, also across replicas)."""

    def __init__(self, database: Database, *, workers: int = 1, max_batch: int = 128) -> None:
        self._database = database
        self._workers = 1 if database.is_sqlite else workers
        self._max_batch = max_batch
        self._queue: asyncio.Queue[_Pending[Any]] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._thread: ThreadPoolExecutor | None = None
        self._sqlite_conn: Connection | None = None  # opened and used on the writer thread only

    def start(self) -> None:
        if self._database.is_sqlite:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="episodic-sqlite-writer")
        self._tasks = [asyncio.create_task(self._work()) for _ in range(self._workers)]

    async def stop(self) -> None:
        """Lets queued operations finish, then stops the workers."""
        await self._queue.join()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self._thread is not None:
            await asyncio.get_running_loop().run_in_executor(self._thread, self._close_sqlite)
            self._thread.shutdown(wait=True)

    async def run(self, op: WriteOp[T]) -> T:
        if not self._tasks:
            raise RuntimeError("GroupCommitWriter.run before start()")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Pending(op, future))
        return await future

    async def _work(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < self._max_batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                await self._commit([p for p in batch if not p.future.cancelled()])
            finally:
                for _ in batch:
                    self._queue.task_done()

    async def _commit(self, batch: list[_Pending[Any]]) -> None:
        if not batch:
            return
        ops = [p.op for p in batch]
        try:
            outcomes = await self._run_batch(ops)
        except Exception as exc:  # COMMIT itself failed: nothing in the batch is durable
            log.exception("group commit of %d operations failed", len(batch))
            outcomes = [(False, exc)] * len(batch)
        for pending, (ok, value) in zip(batch, outcomes, strict=True):
            _settle(pending.future, ok, value)

    async def _run_batch(self, ops: list[WriteOp[Any]]) -> list[Outcome]:
        if self._thread is not None:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._thread, self._commit_on_sqlite, ops)
        async with self._database.engine.connect() as conn:
            return await conn.run_sync(commit_batch, ops)

    def _commit_on_sqlite(self, ops: Sequence[WriteOp[Any]]) -> list[Outcome]:
        """Runs on the writer thread. One connection kept open: no pool checkout and
        reset per batch."""
        if self._sqlite_conn is None or self._sqlite_conn.closed:
            assert self._database.sqlite_writer is not None
            self._sqlite_conn = self._database.sqlite_writer.connect()
        try:
            return commit_batch(self._sqlite_conn, ops)
        except Exception:
            self._close_sqlite()  # a broken connection is replaced on the next batch
            raise

    def _close_sqlite(self) -> None:
        if self._sqlite_conn is not None:
            self._sqlite_conn.close()
            self._sqlite_conn = None


def commit_batch(conn: Connection, ops: Sequence[WriteOp[Any]]) -> list[Outcome]:
    try:
        with conn.begin():
            return [(True, op(conn)) for op in ops]
    except Exception as exc:  # some operation refused or failed: isolate it (slow path)
        if len(ops) == 1:
            return [(False, exc)]
        with conn.begin():
            return [_attempt(conn, op) for op in ops]


def _attempt(conn: Connection, op: WriteOp[Any]) -> Outcome:
    try:
        with conn.begin_nested():
            return True, op(conn)
    except Exception as exc:  # handed to the operation's caller, not swallowed
        return False, exc


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
