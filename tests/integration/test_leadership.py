"""Cluster-wide leadership of once-per-cluster jobs on PostgreSQL: one holder per job, a
dead or departed holder's jobs taken over by the next replica that asks."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy import make_url

from episodic.store.leadership import PgLeadership, lock_key
from tests.polling import eventually
from tests.ports import refusing_port
from tests.throwaway_postgres import throwaway_postgres

pytestmark = pytest.mark.postgres


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with throwaway_postgres(migrated=False) as url:
        yield url


def replica(url: str) -> PgLeadership:
    return PgLeadership(make_url(url))


async def test_only_one_replica_leads_a_job(url: str) -> None:
    a, b = replica(url), replica(url)
    try:
        assert await a.holds("idle-reaper")
        assert not await b.holds("idle-reaper")
        assert await a.holds("idle-reaper")  # kept, tick after tick
        assert a.held == {"idle-reaper"} and b.held == frozenset()
    finally:
        await a.close()
        await b.close()


async def test_jobs_are_led_independently(url: str) -> None:
    a, b = replica(url), replica(url)
    try:
        assert await a.holds("retention")
        assert await b.holds("feed-prune")
        assert not await a.holds("feed-prune") and not await b.holds("retention")
    finally:
        await a.close()
        await b.close()


async def test_a_closed_leader_is_replaced_at_the_next_ask(url: str) -> None:
    a, b = replica(url), replica(url)
    try:
        assert await a.holds("retention")
        await a.close()
        assert await b.holds("retention")
        assert not await a.holds("retention")  # a reconnects, but b leads now
    finally:
        await a.close()
        await b.close()


async def test_a_leader_whose_session_dies_stops_leading_and_another_takes_over(url: str) -> None:
    a, b = replica(url), replica(url)
    try:
        assert await a.holds("idle-reaper")
        await _terminate_sessions_holding(url, "idle-reaper")
        took_over = await eventually(lambda: b.holds("idle-reaper"))
        assert took_over
        assert not await a.holds("idle-reaper")  # its next check finds the session gone
        assert a.held == frozenset()
    finally:
        await a.close()
        await b.close()


async def test_an_unreachable_database_means_not_leading() -> None:
    with refusing_port() as port:
        nowhere = PgLeadership(make_url(f"postgresql://postgres@127.0.0.1:{port}/none"))
        try:
            assert not await nowhere.holds("retention")
        finally:
            await nowhere.close()


def test_lock_keys_are_stable_signed_64_bit_and_distinct() -> None:
    keys = {lock_key(job) for job in ("idle-reaper", "retention", "feed-prune")}
    assert len(keys) == 3
    assert all(-(2**63) <= k < 2**63 for k in keys)
    # Stable: every replica and release computes the same key (no salted hash()), so the
    # values are pinned; a change here splits the leadership of a rolling upgrade.
    assert lock_key("retention") == 1330542409661243415
    assert lock_key("idle-reaper") == 80811635271325867
    assert lock_key("feed-prune") == -796238833947465425


async def _terminate_sessions_holding(url: str, job: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        key = lock_key(job)
        classid, objid = (key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF
        killed = await conn.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_locks "
            "WHERE locktype = 'advisory' AND classid::bigint = $1 AND objid::bigint = $2 "
            # this test's database only: another run's replicas may lead the same job elsewhere
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            classid,
            objid,
        )
        assert killed == 1
    finally:
        await conn.close()
