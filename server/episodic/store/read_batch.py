"""Reads issued together by one request share one trip to the database.

A BuildContext turn searches past episodes, long-term memories and the agent's knowledge at
once; each search ends in a read. `together()` gives the turn a `ReadBatch`, and the reads it
is handed to (an explicit argument, `batch=`, of each store read that takes part) submitted in
the same turn of the event loop are run by one call on one connection: one hop to a reader
thread (SQLite) or one connection checkout (PostgreSQL) instead of one each. Each read still
runs in its own transaction, so one that fails fails alone. A read not handed the batch is its
own trip, whoever runs it; reads of different requests are never batched together, so no
tenant's slow read delays another's."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import Connection

T = TypeVar("T")
Read = Callable[[Connection], Any]
Outcome = tuple[bool, Any]  # (succeeded, result or exception)
# Runs reads on one connection, each in its own transaction: how depends on the database.
RunMany = Callable[[Sequence[Read]], Awaitable[list[Outcome]]]


def run_each(conn: Connection, reads: Sequence[Read]) -> list[Outcome]:
    outcomes: list[Outcome] = []
    for read in reads:
        try:
            with conn.begin():
                outcomes.append((True, read(conn)))
        except Exception as exc:  # this read's alone: the others still run
            outcomes.append((False, exc))
    return outcomes


@dataclass(slots=True)
class ReadBatch:
    """The `ReadBatch` port: one request's reads, run together by `run_many`."""

    run_many: RunMany
    _pending: list[tuple[Read, asyncio.Future[Any]]] = field(default_factory=list)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def submit(self, read: Callable[[Connection], T]) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._flush)  # after every read this turn of the loop submits
        self._pending.append((read, future))
        return future

    def _flush(self) -> None:
        taken, self._pending = self._pending, []
        task = asyncio.get_running_loop().create_task(self._run(taken))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, taken: list[tuple[Read, asyncio.Future[Any]]]) -> None:
        try:
            outcomes = await self.run_many([read for read, _ in taken])
        except Exception as exc:  # the trip itself failed: every read of it did
            outcomes = [(False, exc)] * len(taken)
        for (_, future), (ok, value) in zip(taken, outcomes, strict=True):
            if future.done():  # its caller was cancelled
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)


@contextmanager
def together(run_many: RunMany) -> Iterator[ReadBatch]:
    """A batch for the block's reads: only those handed it join it."""
    yield ReadBatch(run_many)
