"""Losing the database primary (issue 43, finding 10): two `episodic serve` replicas on a
primary + synchronous standby pair named by the libpq multi-host URL
`postgresql://u@h1:p1,h2:p2/db?target_session_attrs=read-write`; the primary SIGKILLed
under load, the standby promoted. No acknowledged write is lost, the calls caught in the
switch answer UNAVAILABLE only, writes succeed again on the new primary, health comes back
to SERVING, a change made through one replica after the promotion reaches the other's RAM
(its feed tail and LISTEN connection came back) and the cluster jobs are led again.

Two clusters of its own (tests/chaos/pg_pair.py), never the shared one; about 20 s."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from sqlalchemy import Connection

from episodic.errors import Unavailable
from episodic.store.database import Database, WrongRole, open_database
from episodic.store.faults import Fault
from tests.chaos.failover import measure_failover
from tests.chaos.pg_pair import DATABASE, pg_bin, primary_and_standby
from tests.polling import eventually

pytestmark = pytest.mark.slow


def _have_postgres_binaries() -> bool:
    try:
        pg_bin("initdb")
    except FileNotFoundError:
        return False
    return shutil.which("runuser") is not None


@pytest.mark.skipif(not _have_postgres_binaries(), reason="needs the PostgreSQL server binaries")
async def test_losing_the_primary_loses_no_acknowledged_write_and_the_service_recovers_by_itself(
    tmp_path: Path,
) -> None:
    figures = await measure_failover(tmp_path)
    print("\n" + "\n".join(figures.lines()))

    assert figures.acknowledged > 0 and figures.lost == 0
    assert figures.codes <= {"UNAVAILABLE"}, figures.failed
    assert figures.first_write_after_kill is not None  # writes succeed on the new primary
    assert figures.health == [] or figures.health[-1][1] == "SERVING", figures.health
    assert {status for _, status in figures.health} <= {"NOT_SERVING", "SERVING"}, figures.health
    assert figures.feed_seconds is not None and figures.leading_again
    assert figures.problems == []


@pytest.mark.skipif(not _have_postgres_binaries(), reason="needs the PostgreSQL server binaries")
async def test_a_standby_refusing_writes_is_unavailable_and_health_waits_for_its_promotion() -> None:
    """Reached without target_session_attrs (its URL names the standby alone), a standby
    answers reads: health's probe asks for a server that takes writes, and the pool drops a
    connection the standby refused instead of reusing it."""
    with primary_and_standby() as pair:
        database = open_database(f"postgresql://postgres@127.0.0.1:{pair.standby.port}/{DATABASE}")
        try:
            before = await _backend(database)
            assert await _backend(database) == before  # one pooled connection, reused
            with pytest.raises(Unavailable):
                await _write(database)
            assert not database.health.healthy
            assert await _backend(database) != before  # the refused connection was not kept
            assert not database.health.healthy  # the standby answers reads: that clears nothing
            with pytest.raises(WrongRole):
                await database.probe(Fault.UNAVAILABLE)  # SELECT 1 would answer: still down

            await asyncio.to_thread(pair.standby.promote)
            await database.probe(Fault.UNAVAILABLE)
            assert await eventually(_healthy(database))  # health's own probe, every second
            await _write(database)
        finally:
            await database.dispose()


async def _write(database: Database) -> None:
    started = time.monotonic()
    try:
        async with database.engine.begin() as conn:
            await conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS written (x int)")
    except Exception as exc:
        raise database.fault_of(exc, started) from exc


def _healthy(database: Database) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return database.health.healthy

    return check


async def _backend(database: Database) -> int:
    """The server process of the pooled connection a read gets."""

    def pid(conn: Connection) -> int:
        return int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())

    return await database.read(pid)
