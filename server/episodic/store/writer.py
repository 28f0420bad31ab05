"""Group commit: concurrent write operations share one transaction and one fsync.
Each operation runs in its own SAVEPOINT, so one failing operation rolls back only its
own writes; its caller gets the error, the others are committed together. A caller is
answered only after COMMIT returns: acknowledged means durable."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

T = TypeVar("T")
WriteOp = Callable[[AsyncConnection], Awaitable[T]]
log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Pending(Generic[T]):
    op: WriteOp[T]
    future: asyncio.Future[T]


class GroupCommitWriter:
    """Runs write operations in batches of at most `max_batch`, with `workers` batches in
    flight (1 for SQLite, several for PostgreSQL where row locks keep appends ordered)."""

    def __init__(self, engine: AsyncEngine, *, workers: int = 1, max_batch: int = 128) -> None:
        self._engine = engine
        self._workers = workers
        self._max_batch = max_batch
        self._queue: asyncio.Queue[_Pending[Any]] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._work()) for _ in range(self._workers)]

    async def stop(self) -> None:
        """Lets queued operations finish, then stops the workers."""
        await self._queue.join()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

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
        outcomes: list[tuple[bool, Any]] = []
        try:
            async with self._engine.connect() as conn, conn.begin():
                for pending in batch:
                    outcomes.append(await _attempt(conn, pending.op))
        except Exception as exc:  # the COMMIT itself failed: nothing in the batch is durable
            log.exception("group commit of %d operations failed", len(batch))
            outcomes = [(False, exc)] * len(batch)
        for pending, (ok, value) in zip(batch, outcomes, strict=True):
            _settle(pending.future, ok, value)


async def _attempt(conn: AsyncConnection, op: WriteOp[Any]) -> tuple[bool, Any]:
    try:
        async with conn.begin_nested():
            return True, await op(conn)
    except Exception as exc:  # handed to the operation's caller, not swallowed
        return False, exc


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
