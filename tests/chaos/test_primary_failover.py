"""Losing the database primary (issue 43, finding 10): two `episodic serve` replicas on a
primary + synchronous standby pair named by the libpq multi-host URL
`postgresql://u@h1:p1,h2:p2/db?target_session_attrs=read-write`; the primary SIGKILLed
under load, the standby promoted. No acknowledged write is lost, the calls caught in the
switch answer UNAVAILABLE only, writes succeed again on the new primary, health comes back
to SERVING, a change made through one replica after the promotion reaches the other's RAM
(its feed tail and LISTEN connection came back) and the cluster jobs are led again.

Two clusters of its own (tests/chaos/pg_pair.py), never the shared one; about 20 s."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.chaos.failover import measure_failover
from tests.chaos.pg_pair import pg_bin

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
