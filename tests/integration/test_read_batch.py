"""One request's concurrent reads share one trip to the database (store/read_batch.py), on
SQLite and PostgreSQL: reads handed the same batch run in one call, each in its own
transaction; a failing read fails alone; a read not handed it is its own trip, inside the
block or not (the batch is an argument, nothing implicit)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from sqlalchemy import Connection, text

from episodic.store import read_batch
from episodic.store.database import Database, open_database


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    db = open_database(database_url)
    try:
        yield db
    finally:
        await db.dispose()


class Trips:
    """Counts the calls that run batched reads."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = Database._run_many

        async def counted(db: Database, reads: Sequence[read_batch.Read]) -> list[read_batch.Outcome]:
            self.count += 1
            return await original(db, reads)

        monkeypatch.setattr(Database, "_run_many", counted)


def answer(n: int) -> Any:
    return lambda conn: conn.execute(text(f"SELECT {n}")).scalar_one()


def broken(conn: Connection) -> Any:
    return conn.execute(text("SELECT * FROM no_such_table")).all()


async def test_reads_submitted_together_make_one_trip_and_fail_alone(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    trips = Trips(monkeypatch)
    with database.together() as batch:
        results = await asyncio.gather(
            database.read(answer(1), batch),
            database.read(broken, batch),
            database.read(answer(3), batch),
            return_exceptions=True,
        )
    assert trips.count == 1
    assert results[0] == 1 and results[2] == 3
    assert isinstance(results[1], Exception)


async def test_outside_together_each_read_is_its_own(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    trips = Trips(monkeypatch)
    assert list(await asyncio.gather(database.read(answer(1)), database.read(answer(2)))) == [1, 2]
    assert trips.count == 0  # the plain path: no batch at all


async def test_inside_together_a_read_not_handed_the_batch_is_its_own(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    trips = Trips(monkeypatch)
    with database.together() as batch:
        found = await asyncio.gather(database.read(answer(1), batch), database.read(answer(2)))
    assert list(found) == [1, 2]
    assert trips.count == 1  # the batch's one read; the other went its own way


async def test_a_cancelled_caller_leaves_the_others_answered(database: Database) -> None:
    with database.together() as batch:
        first = asyncio.ensure_future(database.read(answer(1), batch))
        second = asyncio.ensure_future(database.read(answer(2), batch))
        await asyncio.sleep(0)
        first.cancel()
        assert await second == 2
    with pytest.raises(asyncio.CancelledError):
        await first
