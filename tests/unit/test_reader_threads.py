"""SQLite's reader threads (store/reader_threads.py): reads answered on the loop, errors the
caller's, one connection held per thread and replaced when it breaks, closed at shutdown."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import Connection

from episodic.store.reader_threads import ReaderThreads


@pytest.fixture
def engine(tmp_path: Path) -> sa.Engine:
    made = sa.create_engine(f"sqlite:///{tmp_path / 'r.db'}", pool_size=2, max_overflow=0)
    with made.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
        conn.exec_driver_sql("INSERT INTO t VALUES (1), (2)")
    return made


def _total(conn: Connection) -> int:
    return int(conn.exec_driver_sql("SELECT sum(x) FROM t").scalar() or 0)


async def test_a_read_runs_on_a_reader_thread_and_is_answered_on_the_loop(engine: sa.Engine) -> None:
    threads = ReaderThreads(engine, 2)
    names: list[str] = []

    def read(conn: Connection) -> int:
        names.append(threading.current_thread().name)
        return _total(conn)

    try:
        assert await asyncio.gather(*[threads.run(read) for _ in range(6)]) == [3] * 6
    finally:
        threads.shutdown()
    assert all(name.startswith("episodic-sqlite-reader_") for name in names)


async def test_a_read_that_raises_raises_for_its_caller_alone(engine: sa.Engine) -> None:
    threads = ReaderThreads(engine, 1)

    def broken(conn: Connection) -> int:
        conn.exec_driver_sql("SELECT * FROM no_such_table")
        return 0

    try:
        with pytest.raises(sa.exc.OperationalError, match="no_such_table"):
            await threads.run(broken)
        assert await threads.run(_total) == 3  # the thread goes on
    finally:
        threads.shutdown()


async def test_each_thread_keeps_its_connection_and_replaces_one_that_was_closed(engine: sa.Engine) -> None:
    threads = ReaderThreads(engine, 1)
    seen: list[object] = []

    def remember(conn: Connection) -> int:
        seen.append(conn)
        return _total(conn)

    def close_it(conn: Connection) -> int:
        conn.close()
        raise RuntimeError("the connection went away")

    try:
        await threads.run(remember)
        await threads.run(remember)
        assert seen[0] is seen[1]
        with pytest.raises(RuntimeError, match="went away"):
            await threads.run(close_it)
        assert await threads.run(remember) == 3
        assert seen[2] is not seen[0]
    finally:
        threads.shutdown()


async def test_shutdown_answers_what_was_queued_and_gives_every_connection_back(engine: sa.Engine) -> None:
    threads = ReaderThreads(engine, 2)
    reads = [asyncio.ensure_future(threads.run(_total)) for _ in range(4)]
    await asyncio.gather(*reads)
    await asyncio.to_thread(threads.shutdown)
    assert [r.result() for r in reads] == [3] * 4
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]


async def test_a_cancelled_caller_leaves_the_thread_serving_the_next(engine: sa.Engine) -> None:
    threads = ReaderThreads(engine, 1)
    started, release = threading.Event(), threading.Event()

    def slow(conn: Connection) -> int:
        started.set()
        release.wait(5)
        return _total(conn)

    try:
        waiting = asyncio.ensure_future(threads.run(slow))
        await asyncio.to_thread(started.wait, 5)
        waiting.cancel()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert await threads.run(_total) == 3
    finally:
        threads.shutdown()
