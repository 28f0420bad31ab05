"""Group commit: concurrent write operations share one transaction and one fsync.

Operations are synchronous functions of a SQLAlchemy `Connection` that decide from what
they read and raise before writing when they refuse. A batch first runs them all in one
transaction with no savepoints (the fast path). If any operation raises, that
transaction is rolled back and the batch is re-run with one SAVEPOINT per operation, so
a failing operation rolls back only its own writes and its caller alone gets the error.
A caller is answered only after COMMIT returns: acknowledged means durable. A staged write
(`run_bulk_staged`) is answered twice: with its result once its statements have run, just
before COMMIT, and with its durability after: a BuildContext turn goes on with its appended
message while the fsync runs, and sends nothing that claims it before it is durable.

Requests of one kind that arrive together can also be handled by one call (a
`BulkOp`), e.g. many appends: one read of all their episodes, one INSERT of all their
messages. A bulk op reports refusals per item and raises only on unexpected failures.
Runs of consecutive requests are merged, so queue order is kept.

A write that changes what recall or BuildContext can see is a unit of work: with its
operation (or its bulk item) comes the changes it declares (`Declared`). Whatever path runs
it, the piece that runs the operation then inserts the change-feed rows of its result on the
same connection (store/feed.py `record`): in the same transaction, or the same savepoint on
the slow path, so rows and write commit or roll back together. A refused bulk item wrote
nothing and records nothing. The caller gets a `Recorded` back: the result and its changes.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, Protocol, TypeVar, overload

from sqlalchemy import Connection

from episodic.bounded import within
from episodic.domain.changes import Declared, Recorded
from episodic.errors import Aborted
from episodic.store import feed
from episodic.store.database import Database
from episodic.store.faults import classify, is_lock_conflict
from episodic.store.loop_answers import settle, tell

T = TypeVar("T")
WriteOp = Callable[[Connection], T]
Outcome = tuple[bool, Any]
Executed = Callable[[list[Outcome]], Any]  # told a batch's outcomes before its COMMIT
log = logging.getLogger(__name__)


class BulkOp(Protocol):
    """Handles many items of one kind in one call; one outcome per item, in order."""

    def run_all(self, conn: Connection, items: Sequence[Any]) -> list[Outcome]: ...


@dataclass(slots=True)
class _Pending(Generic[T]):
    op: WriteOp[T] | None
    future: asyncio.Future[T]
    bulk: BulkOp | None = None
    item: Any = None
    declared: Declared[Any] | None = None  # a unit of work: its feed rows go with the write
    executed: asyncio.Future[T] | None = None  # staged: its result before COMMIT


@dataclass(frozen=True, slots=True)
class Staged(Generic[T]):
    """A staged write's result (its statements ran; not yet committed) and its commit: the
    caller awaits `durable` before it tells anyone the write happened."""

    value: T
    durable: asyncio.Future[None]


class GroupCommitWriter:
    """Runs write operations in batches of at most `max_batch`. SQLite: one batch at a time
    on a dedicated thread, which takes the writes straight from a thread-safe queue and
    answers each batch's callers with one wake-up of the loop (an asyncio worker task and an
    executor between them cost the loop two more wake-ups, a task switch and an executor
    submit per write). PostgreSQL: `workers` batches in flight (row locks keep appends to one
    episode ordered, also across replicas)."""

    def __init__(
        self,
        database: Database,
        *,
        workers: int = 1,
        max_batch: int = 128,
        on_batch: Callable[[int], None] | None = None,
    ) -> None:
        self._database = database
        self._on_batch = on_batch  # told each batch's size (metrics)
        self._workers = 1 if database.is_sqlite else workers
        self._max_batch = max_batch
        self._queue: asyncio.Queue[_Pending[Any]] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._sqlite: _SqliteThread | None = None

    def start(self) -> None:
        if self._database.is_sqlite:
            self._sqlite = _SqliteThread(self._database, self._max_batch, self._on_batch)
            self._sqlite.start(asyncio.get_running_loop())
            return
        self._tasks = [asyncio.create_task(self._work()) for _ in range(self._workers)]

    async def stop(self, *, drain_seconds: float = 30.0) -> None:
        """Lets queued operations finish (for at most `drain_seconds`: a database that stopped
        answering must not hold the process), then stops the workers."""
        if self._sqlite is not None:
            sqlite, self._sqlite = self._sqlite, None
            await within(drain_seconds, sqlite.stop(), "commit queued writes")
            return
        await within(drain_seconds, self._queue.join(), "commit queued writes")
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    @overload
    async def run(self, op: WriteOp[T]) -> T: ...

    @overload
    async def run(self, op: WriteOp[T], declared: Declared[T]) -> Recorded[T]: ...

    async def run(self, op: WriteOp[Any], declared: Declared[Any] | None = None) -> Any:
        """Runs `op`; with `declared`, also inserts the feed rows of the changes it declares,
        in its transaction, and returns them with its result."""
        return await self._submit(lambda future: _Pending(op, future, declared=declared))

    @overload
    async def run_bulk(self, bulk: BulkOp, item: object) -> Any: ...

    @overload
    async def run_bulk(self, bulk: BulkOp, item: object, declared: Declared[T]) -> Recorded[T]: ...

    async def run_bulk(self, bulk: BulkOp, item: object, declared: Declared[Any] | None = None) -> Any:
        """Queues one item for `bulk`; returns its outcome's value or raises its error. With
        `declared`, as `run`: an accepted item's feed rows are inserted in its transaction."""
        return await self._submit(lambda future: _Pending(None, future, bulk, item, declared))

    async def run_bulk_staged(self, bulk: BulkOp, item: object) -> Staged[Any]:
        """As `run_bulk`, answered as soon as the item's statements have run in its batch's
        transaction: `durable` completes when that transaction commits, or fails as
        `run_bulk` would (nothing of the batch is then in the log)."""
        loop = asyncio.get_running_loop()
        executed: asyncio.Future[Any] = loop.create_future()
        durable = asyncio.ensure_future(
            self._submit(lambda future: _Pending(None, future, bulk, item, executed=executed))
        )
        try:
            await asyncio.wait({executed, durable}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            durable.cancel()  # as run_bulk's caller cancelled: left out unless already running
            raise
        if not executed.done():  # refused or failed (raises as run_bulk does)
            return Staged(await durable, _resolved(loop))
        # its statements ran: answered so, even when its commit is known already (both
        # answers can reach the loop in one of its turns); `durable` tells how the commit went
        landed: asyncio.Future[None] = loop.create_future()
        durable.add_done_callback(partial(_landed, landed))
        return Staged(executed.result(), landed)

    async def _submit(self, make: Callable[[asyncio.Future[Any]], _Pending[Any]]) -> Any:
        if not self._tasks and self._sqlite is None:
            raise RuntimeError("GroupCommitWriter used before start()")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        started = time.monotonic()
        if self._sqlite is not None:
            self._sqlite.put(make(future))
        else:
            self._queue.put_nowait(make(future))
        try:
            result = await future
        except Exception as exc:
            if is_lock_conflict(exc):  # still losing after the reruns: the client may retry
                raise Aborted("the write met a concurrent one (a deadlock); retry it") from exc
            raise self._database.fault_of(exc, started) from exc
        self._database.health.succeeded(wrote=True)
        return result

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
        if self._on_batch is not None:
            self._on_batch(len(batch))
        try:
            outcomes = await self._run_batch(batch)
        except Exception as exc:  # COMMIT itself failed: nothing in the batch is durable
            outcomes = _all_failed(exc, len(batch))
        _settler(batch)(outcomes)

    async def _run_batch(self, batch: list[_Pending[Any]]) -> list[Outcome]:
        async with self._database.engine.connect() as conn:
            return await conn.run_sync(commit_batch, _units(batch), _announcer(batch))


_STOP = object()  # put after the last write: the thread commits what came before it and ends


class _SqliteThread:
    """SQLite's one writer: a thread of its own that takes the writes queued since its last
    batch (at most `max_batch`), runs them in one transaction (`commit_batch`) on one
    connection kept open (no pool checkout and reset per batch), and answers the batch's
    callers on the loop in one call, as soon as COMMIT returns. A staged write's first answer
    (before COMMIT) is scheduled on the loop before that call, so it is always seen first."""

    def __init__(self, database: Database, max_batch: int, on_batch: Callable[[int], None] | None) -> None:
        self._database = database
        self._max_batch = max_batch
        self._on_batch = on_batch
        self._inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._conn: Connection | None = None
        self._thread = threading.Thread(target=self._serve, name="episodic-sqlite-writer", daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ended: asyncio.Future[None] | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop, self._ended = loop, loop.create_future()
        self._thread.start()

    def put(self, pending: _Pending[Any]) -> None:
        self._inbox.put(pending)

    async def stop(self) -> None:
        """Returns once every write queued before it has been answered and the connection is
        closed."""
        assert self._ended is not None
        self._inbox.put(_STOP)
        await asyncio.shield(self._ended)

    def _serve(self) -> None:
        loop, ended = self._loop, self._ended
        assert loop is not None and ended is not None
        try:
            while (batch := self._next_batch()) is not None:
                if batch:
                    self._commit(loop, batch)
        finally:
            self._close()
            tell(loop, settle, ended, True, None)

    def _next_batch(self) -> list[_Pending[Any]] | None:
        """The writes queued since the last batch, waiting for the first; None once stopped
        (after the writes queued before the stop: they come first)."""
        first = self._inbox.get()
        if first is _STOP:
            return None
        batch = [first]
        while len(batch) < self._max_batch:
            try:
                pending = self._inbox.get_nowait()
            except queue.Empty:
                break
            if pending is _STOP:
                self._inbox.put(_STOP)  # ends the thread after this batch
                break
            batch.append(pending)
        # a caller cancelled before its write ran is left out (one cancelled while it is
        # running finds the write done or not, as any cancelled caller of a write does)
        return [p for p in batch if not p.future.cancelled()]

    def _commit(self, loop: asyncio.AbstractEventLoop, batch: list[_Pending[Any]]) -> None:
        try:
            outcomes = self._commit_batch(_units(batch), _on_loop(loop, _announcer(batch)))
        except Exception as exc:  # COMMIT itself failed: nothing in the batch is durable
            outcomes = _all_failed(exc, len(batch))
        # one wake-up of the loop per batch: the batch's size is counted with its answers
        tell(loop, self._answer, batch, outcomes)

    def _answer(self, batch: list[_Pending[Any]], outcomes: list[Outcome]) -> None:
        if self._on_batch is not None:
            self._on_batch(len(batch))
        _settler(batch)(outcomes)

    def _commit_batch(self, units: Sequence[_Unit], executed: Executed | None) -> list[Outcome]:
        if self._conn is None or self._conn.closed:
            assert self._database.sqlite_writer is not None
            self._conn = self._database.sqlite_writer.connect()
        try:
            return commit_batch(self._conn, units, executed)
        except Exception:
            self._close()  # a broken connection is replaced on the next batch
            raise

    def _close(self) -> None:
        if self._conn is not None:
            with suppress(Exception):  # closing a connection to a file that went away
                self._conn.close()
            self._conn = None


@dataclass(frozen=True, slots=True)
class _Unit:
    """What runs as one piece: a plain operation, or a run of items of one bulk op."""

    run: Callable[[Connection], list[Outcome]]
    size: int

    def failed(self, exc: Exception) -> list[Outcome]:
        return [(False, exc)] * self.size


def _units(batch: Sequence[_Pending[Any]]) -> list[_Unit]:
    """One unit per plain operation; one per run of consecutive items of the same bulk op."""
    units: list[_Unit] = []
    run: list[_Pending[Any]] = []
    for pending in batch:
        if run and pending.bulk is not run[0].bulk:
            units.append(_bulk_unit(run))
            run = []
        if pending.bulk is None:
            units.append(_single_unit(pending))
        else:
            run.append(pending)
    if run:
        units.append(_bulk_unit(run))
    return units


def _single_unit(pending: _Pending[Any]) -> _Unit:
    op, declared = pending.op, pending.declared
    assert op is not None
    return _Unit(lambda conn: [(True, _recorded(conn, op(conn), declared))], 1)


def _bulk_unit(run: list[_Pending[Any]]) -> _Unit:
    bulk, items, declared = run[0].bulk, [p.item for p in run], [p.declared for p in run]
    assert bulk is not None

    def run_all(conn: Connection) -> list[Outcome]:
        outcomes = bulk.run_all(conn, items)
        return [
            (True, _recorded(conn, value, d)) if ok else (False, value)
            for (ok, value), d in zip(outcomes, declared, strict=True)
        ]

    return _Unit(run_all, len(items))


def _recorded(conn: Connection, result: Any, declared: Declared[Any] | None) -> Any:
    """A unit of work's feed rows, on the connection (so in the transaction or savepoint)
    its operation just ran in: if either fails, both roll back."""
    return result if declared is None else feed.record(conn, result, declared)


# A batch chosen as a deadlock's victim is run again this many times in all: the other
# transaction has committed by then (operations decide from what they read, so a rerun is safe).
LOCK_CONFLICT_TRIES = 3


def commit_batch(conn: Connection, units: Sequence[_Unit], executed: Executed | None = None) -> list[Outcome]:
    """`executed`, when given, is told the outcomes once every statement has run, before
    COMMIT (staged writes are answered then)."""
    for tries_left in range(LOCK_CONFLICT_TRIES - 1, -1, -1):
        try:
            with conn.begin():
                return _told(executed, [outcome for unit in units for outcome in unit.run(conn)])
        except Exception as exc:  # some operation failed: isolate it (slow path)
            if is_lock_conflict(exc) and tries_left:
                continue
            if len(units) == 1:
                return units[0].failed(exc)
            break
    with conn.begin():
        return _told(executed, [outcome for unit in units for outcome in _attempt(conn, unit)])


def _all_failed(exc: Exception, size: int) -> list[Outcome]:
    """A batch whose COMMIT failed: every caller gets the error (an outage is logged once, by
    the store's health; anything else here)."""
    if classify(exc) is None:
        log.exception("group commit of %d operations failed", size)
    return [(False, exc)] * size


def _told(executed: Executed | None, outcomes: list[Outcome]) -> list[Outcome]:
    if executed is not None:
        executed(outcomes)
    return outcomes


def _announcer(batch: Sequence[_Pending[Any]]) -> Executed | None:
    """What tells the batch's staged writes their results before COMMIT (on the loop's
    thread); None when the batch holds none."""
    staged = [(i, p.executed) for i, p in enumerate(batch) if p.executed is not None]
    if not staged:
        return None

    def announce(outcomes: list[Outcome]) -> None:
        for i, executed in staged:
            ok, value = outcomes[i]
            if ok:  # a refusal is answered with the batch, as any write's
                settle(executed, True, value)

    return announce


def _settler(batch: Sequence[_Pending[Any]]) -> Executed:
    """What answers the batch's callers with their outcomes (on the loop's thread)."""

    def answer(outcomes: list[Outcome]) -> None:
        for pending, (ok, value) in zip(batch, outcomes, strict=True):
            settle(pending.future, ok, value)

    return answer


def _on_loop(loop: asyncio.AbstractEventLoop, executed: Executed | None) -> Executed | None:
    """`executed`, called from the writer thread: run on the loop's thread."""
    if executed is None:
        return None
    told = executed

    def threadsafe(outcomes: list[Outcome]) -> None:
        loop.call_soon_threadsafe(told, outcomes)

    return threadsafe


def _resolved(loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
    done: asyncio.Future[None] = loop.create_future()
    done.set_result(None)
    return done


def _landed(landed: asyncio.Future[None], durable: asyncio.Future[Any]) -> None:
    """A staged write's commit, as its caller sees it (errors mapped as `_submit` maps them)."""
    if landed.done():
        return
    if durable.cancelled():
        landed.cancel()
    elif (exc := durable.exception()) is not None:
        landed.set_exception(exc)
    else:
        landed.set_result(None)


def _attempt(conn: Connection, unit: _Unit) -> list[Outcome]:
    for tries_left in range(LOCK_CONFLICT_TRIES - 1, -1, -1):
        try:
            with conn.begin_nested():
                return unit.run(conn)
        except Exception as exc:  # handed to the operation's caller(s), not swallowed
            if is_lock_conflict(exc) and tries_left:
                continue
            return unit.failed(exc)
    raise AssertionError("unreachable")
