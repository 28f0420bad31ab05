"""A write batch PostgreSQL picked as a deadlock's victim (replicas whose batches mix
appends and model calls can meet so) is run again, not failed; one that keeps losing
answers ABORTED, which clients may retry, never INTERNAL."""

from __future__ import annotations

from sqlalchemy import Connection, create_engine, text

from episodic.store.faults import is_lock_conflict
from episodic.store.writer import LOCK_CONFLICT_TRIES, _Unit, commit_batch


class Deadlock(Exception):
    sqlstate = "40P01"


def flaky(losses: int, calls: list[int]) -> _Unit:
    """A unit that loses `losses` times, then writes."""

    def run(conn: Connection) -> list[tuple[bool, object]]:
        calls.append(1)
        if len(calls) <= losses:
            raise Deadlock("deadlock detected")
        conn.execute(text("INSERT INTO t VALUES (1)"))
        return [(True, "stored")]

    return _Unit(run, 1)


def steady(conn: Connection) -> list[tuple[bool, object]]:
    conn.execute(text("INSERT INTO t VALUES (2)"))
    return [(True, "kept")]


def fresh() -> Connection:
    conn = create_engine("sqlite://").connect()
    conn.execute(text("CREATE TABLE t (x INTEGER)"))
    conn.commit()
    return conn


def test_a_deadlocked_batch_is_run_again_and_commits_everything_once() -> None:
    conn, calls = fresh(), list[int]()
    outcomes = commit_batch(conn, [flaky(LOCK_CONFLICT_TRIES - 1, calls), _Unit(steady, 1)])
    assert outcomes == [(True, "stored"), (True, "kept")]
    assert sorted(conn.execute(text("SELECT x FROM t")).scalars()) == [1, 2]


def test_a_unit_that_keeps_losing_fails_alone_with_the_lock_conflict() -> None:
    conn, calls = fresh(), list[int]()
    outcomes = commit_batch(conn, [flaky(100, calls), _Unit(steady, 1)])
    (lost, error), kept = outcomes
    assert not lost and is_lock_conflict(error) and kept == (True, "kept")
    assert list(conn.execute(text("SELECT x FROM t")).scalars()) == [2]
    assert len(calls) == 2 * LOCK_CONFLICT_TRIES  # the batch's tries, then its own in a savepoint
