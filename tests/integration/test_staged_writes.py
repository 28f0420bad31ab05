"""A staged write (a BuildContext turn's append) is answered once its statements ran, before
its batch's COMMIT, and told separately whether that COMMIT made it durable: the turn goes on
while the fsync runs, and nothing claims the write before it is durable."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, create_engine, text

from episodic.store.database import Database, open_database
from episodic.store.writer import GroupCommitWriter, Outcome, _Unit, commit_batch


def inserting(value: int) -> _Unit:
    def run(conn: Connection) -> list[Outcome]:
        conn.execute(text("INSERT INTO t (x) VALUES (:x)"), {"x": value})
        return [(True, value)]

    return _Unit(run, 1)


def failing(conn: Connection) -> list[Outcome]:
    raise ValueError("refused")


def two_connections(tmp_path: Path) -> tuple[Connection, Connection]:
    engine = create_engine(f"sqlite:///{tmp_path / 'staged.db'}")
    writer, reader = engine.connect(), engine.connect()
    writer.execute(text("CREATE TABLE t (x INTEGER)"))
    writer.commit()
    return writer, reader


def rows(conn: Connection) -> list[int]:
    found = sorted(conn.execute(text("SELECT x FROM t")).scalars())
    conn.rollback()
    return found


def test_a_batch_tells_its_outcomes_after_its_statements_ran_and_before_its_commit(tmp_path: Path) -> None:
    writer, reader = two_connections(tmp_path)
    told: list[tuple[list[Outcome], list[int]]] = []
    outcomes = commit_batch(
        writer, [inserting(1), inserting(2)], lambda found: told.append((found, rows(reader)))
    )
    assert told == [([(True, 1), (True, 2)], [])]  # told while nothing was committed yet
    assert outcomes == [(True, 1), (True, 2)] and rows(reader) == [1, 2]


def test_a_batch_with_a_refused_operation_tells_once_after_isolating_it(tmp_path: Path) -> None:
    writer, reader = two_connections(tmp_path)
    told: list[list[Outcome]] = []
    outcomes = commit_batch(writer, [inserting(1), _Unit(failing, 1), inserting(3)], told.append)
    assert len(told) == 1 and [ok for ok, _ in told[0]] == [True, False, True]
    assert [ok for ok, _ in outcomes] == [True, False, True] and rows(reader) == [1, 3]


class Inserts:
    """A bulk op of one kind: each item a value inserted (negative ones refused); a value
    of 0 inserts a row whose deferred foreign key fails only at COMMIT."""

    def run_all(self, conn: Connection, items: Sequence[Any]) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for value in items:
            if value < 0:
                outcomes.append((False, ValueError("negative")))
                continue
            conn.execute(text("INSERT INTO child (parent) VALUES (:p)"), {"p": value or 999})
            outcomes.append((True, value))
        return outcomes


def children(db: Database) -> list[int]:
    """The committed rows, read on a connection of their own (the writer's is its thread's)."""
    engine = create_engine(f"sqlite:///{db.url.database}")
    try:
        with engine.connect() as conn:
            return list(conn.execute(text("SELECT parent FROM child")).scalars())
    finally:
        engine.dispose()


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    db = open_database(f"sqlite:///{tmp_path / 'writer.db'}")
    assert db.sqlite_writer is not None
    with db.sqlite_writer.begin() as conn:
        conn.execute(text("CREATE TABLE parent (id INTEGER PRIMARY KEY)"))
        conn.execute(text("INSERT INTO parent (id) VALUES (1), (2)"))
        conn.execute(
            text("CREATE TABLE child (parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)")
        )
    yield db
    await db.engine.dispose()
    db.sqlite_writer.dispose()


async def test_a_staged_write_is_answered_and_then_made_durable(database: Database) -> None:
    writer = GroupCommitWriter(database)
    writer.start()
    try:
        staged = await writer.run_bulk_staged(Inserts(), 1)
        assert staged.value == 1
        await staged.durable
        assert children(database) == [1]
    finally:
        await writer.stop()


async def test_a_refused_staged_write_raises_as_a_plain_one(database: Database) -> None:
    writer = GroupCommitWriter(database)
    writer.start()
    try:
        with pytest.raises(ValueError, match="negative"):
            await writer.run_bulk_staged(Inserts(), -1)
    finally:
        await writer.stop()


async def test_a_staged_write_whose_commit_fails_is_answered_but_never_durable(database: Database) -> None:
    writer = GroupCommitWriter(database)
    writer.start()
    try:
        staged = await writer.run_bulk_staged(Inserts(), 0)  # its statements ran: answered
        assert staged.value == 0
        with pytest.raises(Exception, match="FOREIGN KEY"):
            await staged.durable
        assert children(database) == []
    finally:
        await writer.stop()
