"""SQLite's reader threads: each holds one read connection for its life and takes reads from
one thread-safe queue, answering each on the event loop with one call.

A ThreadPoolExecutor hop (submit, a concurrent future, its chaining to an asyncio future)
took ~45 us a round trip where a queue and one `call_soon_threadsafe` take ~9, and checking a
pooled connection out and back in for each read cost ~26 us more (scripts/time_turn_reads.py
measures the reads themselves). A turn makes a few such trips, on its critical path.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from contextlib import suppress
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine

from episodic.store.loop_answers import settle, tell

T = TypeVar("T")
Job = tuple[Callable[[Connection], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]
log = logging.getLogger(__name__)

_STOP = None  # one per thread: each ends after the jobs queued before it


class ReaderThreads:
    """`count` threads reading through `engine` (a pool of at least `count` connections),
    started with the first read."""

    def __init__(self, engine: Engine, count: int, name: str = "episodic-sqlite-reader") -> None:
        if count < 1:
            raise ValueError(f"count must be positive, got {count}")
        self._engine = engine
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._serve, name=f"{name}_{i}", daemon=True) for i in range(count)
        ]
        self._lock = threading.Lock()
        self._started = False

    async def run(self, read: Callable[[Connection], T]) -> T:
        """`read(connection)` on one of the threads; a cancelled caller leaves it to finish
        (its answer is dropped), as a cancelled `run_in_executor` does."""
        if not self._started:
            self._start()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((read, loop, future))
        return await future

    def shutdown(self) -> None:
        """Ends the threads once the jobs queued so far are done; each closes its connection."""
        with self._lock:
            started, self._started = self._started, False
        if not started:
            return
        for _ in self._threads:
            self._jobs.put(_STOP)
        for thread in self._threads:
            thread.join()

    def _start(self) -> None:
        with self._lock:
            if not self._started:
                for thread in self._threads:
                    thread.start()
                self._started = True

    def _serve(self) -> None:
        held = _Held(self._engine)
        try:
            while (job := self._jobs.get()) is not _STOP:
                read, loop, future = job
                outcome = held.run(read)
                tell(loop, settle, future, *outcome)
        finally:
            held.close()


class _Held:
    """One thread's connection: opened at its first read, kept, replaced when broken."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._conn: Connection | None = None

    def run(self, read: Callable[[Connection], Any]) -> tuple[bool, Any]:
        try:
            if self._conn is None or self._conn.closed:
                self._conn = self._engine.connect()
            return True, read(self._conn)
        except BaseException as exc:  # the caller's, on the loop
            return False, exc
        finally:
            self._end_transaction()

    def _end_transaction(self) -> None:
        """Rolls back what SQLAlchemy began, if anything; a connection that cannot is closed
        (the next read opens another)."""
        if self._conn is None:
            return
        try:
            self._conn.rollback()
        except Exception:
            self.close()

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with suppress(Exception):
                conn.close()
