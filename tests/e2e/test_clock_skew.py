"""Replicas whose wall clocks disagree (one runs an hour ahead) on one PostgreSQL
database: digest leases and due times, the idle cut-off and the leadership of
once-per-cluster jobs follow the database's clock, so the skewed replica can neither
steal work nor close live conversations, and the jobs still run on exactly one replica."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from episodic.bootstrap.system import utc_now
from episodic.domain import digests as rules
from episodic.domain.changes import NO_CHANGES
from episodic.domain.model import EpisodeState
from episodic.domain.recall import Digest, DigestState
from episodic.store import schema
from tests.e2e.cluster_helpers import (
    CALLER,
    JOBS,
    Replica,
    clock_ahead,
    leaders,
    open_episode,
    replicas,
)
from tests.polling import eventually
from tests.server_harness import settings_for
from tests.throwaway_postgres import throwaway_postgres

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # slow: throwaway clusters, skewed clocks
SKEW = timedelta(hours=1)
LEASE = timedelta(seconds=60)


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with throwaway_postgres() as url:
        yield url


async def closed(replica: Replica) -> str:
    episode_id = await open_episode(replica.app)
    await replica.app.services.episodes.close_episode(CALLER, episode_id)
    return episode_id


async def claim(replica: Replica, now_ahead: bool = False) -> list[Digest]:
    now = utc_now() + (SKEW if now_ahead else timedelta(0))
    return await replica.app.adapters.digests.claim_due(now, 10, LEASE)


async def test_a_replica_whose_clock_runs_ahead_cannot_take_a_leased_digest(url: str) -> None:
    async with replicas() as start:
        punctual = await start(settings_for(url), background=False)
        with clock_ahead(SKEW):
            ahead = await start(settings_for(url), background=False)
        episode_id = await closed(punctual)
        assert [d.episode_id for d in await claim(punctual)] == [episode_id]
        assert await claim(ahead, now_ahead=True) == []
        assert await ahead.app.workers.digester.run_once() == 0  # its own clock, through its digester
        digest = await ahead.app.adapters.digests.get(CALLER.tenant_id, episode_id)
        assert digest is not None and digest.state is DigestState.PENDING and digest.attempts == 0


async def test_a_digest_closed_by_a_replica_whose_clock_runs_ahead_is_due_at_once(url: str) -> None:
    async with replicas() as start:
        punctual = await start(settings_for(url), background=False)
        with clock_ahead(SKEW):
            ahead = await start(settings_for(url), background=False)
        episode_id = await closed(ahead)
        assert [d.episode_id for d in await claim(punctual)] == [episode_id]


async def test_a_failed_digest_backs_off_on_the_database_clock(url: str) -> None:
    async with replicas() as start:
        punctual = await start(settings_for(url), background=False)
        with clock_ahead(SKEW):
            ahead = await start(settings_for(url), background=False)
        episode_id = await closed(punctual)
        (claimed,) = await claim(ahead, now_ahead=True)
        failed = rules.failed(claimed, "embedding endpoint unreachable", utc_now() + SKEW)
        await ahead.app.adapters.digests.save_failed(failed, NO_CHANGES)
        backoff = failed.next_attempt_at - failed.updated_at
        assert await _due_in(punctual, episode_id) <= backoff  # not an hour later
        retried = await eventually(lambda: _claims(punctual, episode_id))
        assert retried, "the back-off never ended for the replica with the right clock"


async def test_an_idle_reaper_whose_clock_runs_ahead_does_not_close_live_conversations(url: str) -> None:
    async with replicas() as start:
        punctual = await start(settings_for(url), background=False)
        with clock_ahead(SKEW):
            ahead = await start(settings_for(url), background=False)
        episode_id = await open_episode(punctual.app, idle_timeout=timedelta(minutes=30))
        assert await ahead.app.workers.reaper.sweep() == 0
        episode = await punctual.app.services.episodes.get_episode(CALLER, episode_id)
        assert episode.state is EpisodeState.OPEN


async def test_once_per_cluster_jobs_run_on_one_replica_whatever_the_clocks(url: str) -> None:
    tick = 0.2
    settings = settings_for(url, idle_sweep_seconds=tick, retention_sweep_seconds=tick)
    async with replicas() as start:
        with clock_ahead(SKEW):
            ahead = await start(settings)
        with clock_ahead(-SKEW):
            behind = await start(settings)
        punctual = await start(settings)
        group = [ahead, behind, punctual]
        for job in JOBS:
            assert await eventually(lambda job=job: _led(group, job)), job  # type: ignore[misc]
        for _ in range(10):
            assert all(len(leaders(group, job)) == 1 for job in JOBS)
            await asyncio.sleep(tick / 2)
        leader = leaders(group, "idle-reaper")[0]
        await leader.close()
        rest = [r for r in group if r is not leader]
        assert await eventually(lambda: _led(rest, "idle-reaper"))
        assert len(leaders(rest, "idle-reaper")) == 1


async def _led(group: list[Replica], job: str) -> bool:
    return bool(leaders(group, job))


async def _claims(replica: Replica, episode_id: str) -> bool:
    return episode_id in {d.episode_id for d in await claim(replica)}


async def _due_in(replica: Replica, episode_id: str) -> timedelta:
    """How long until the digest is due, by the database's clock."""
    d = schema.digests
    now = func.clock_timestamp(type_=schema.UtcDateTime())
    stmt = select(d.c.next_attempt_at, now).where(d.c.episode_id == episode_id)
    due, at = await replica.app.database.read(lambda conn: conn.execute(stmt).one())
    left: timedelta = due - at
    return left
