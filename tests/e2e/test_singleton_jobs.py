"""Once-per-cluster jobs (idle reaper, retention) on two replicas of one PostgreSQL
database: exactly one replica runs each, and when it leaves the other takes over within
a few ticks. (Killed processes: tests/e2e/test_replicas.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from episodic.domain.model import CloseReason, EpisodeState
from tests.e2e.cluster_helpers import CALLER, JOBS, Replica, leaders, open_episode, replicas
from tests.polling import eventually
from tests.server_harness import settings_for
from tests.throwaway_postgres import throwaway_postgres

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # slow: throwaway clusters, jobs taken over
TICK = 0.2  # seconds between sweeps of both jobs


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with throwaway_postgres() as url:
        yield url


async def closed_idle(replica: Replica, episode_id: str) -> bool:
    episode = await replica.app.services.episodes.get_episode(CALLER, episode_id)
    return episode.state is EpisodeState.CLOSED and episode.close_reason is CloseReason.IDLE_TIMEOUT


async def one_leader_each(group: list[Replica], samples: int = 10) -> None:
    """Each job has exactly one leader, sampled over several ticks (once one has led)."""
    for job in JOBS:
        assert await eventually(lambda job=job: _has_leader(group, job)), f"nobody leads {job}"  # type: ignore[misc]
    for _ in range(samples):
        for job in JOBS:
            assert len(leaders(group, job)) == 1, job
        await asyncio.sleep(TICK / 2)


async def _has_leader(group: list[Replica], job: str) -> bool:
    return bool(leaders(group, job))


async def test_one_replica_runs_the_jobs_and_the_other_takes_over_when_it_leaves(url: str) -> None:
    settings = settings_for(url, idle_sweep_seconds=TICK, retention_sweep_seconds=TICK)
    async with replicas() as start:
        group = [await start(settings), await start(settings)]
        await one_leader_each(group)
        leader = leaders(group, "idle-reaper")[0]
        follower = next(r for r in group if r is not leader)
        first = await open_episode(follower.app, idle_timeout=timedelta(seconds=1))
        assert await eventually(lambda: closed_idle(follower, first)), "the leader did not reap"

        await leader.close()
        assert await eventually(lambda: _leads_all(follower)), "the follower did not take over"
        second = await open_episode(follower.app, idle_timeout=timedelta(seconds=1))
        assert await eventually(lambda: closed_idle(follower, second)), "the new leader did not reap"


async def test_a_replica_started_later_does_not_take_the_jobs_from_a_live_leader(url: str) -> None:
    settings = settings_for(url, idle_sweep_seconds=TICK, retention_sweep_seconds=TICK)
    async with replicas() as start:
        first = await start(settings)
        assert await eventually(lambda: _leads_all(first))
        group = [first, await start(settings), await start(settings)]
        await one_leader_each(group)
        assert all(leaders(group, job) == [first] for job in JOBS)


async def _leads_all(replica: Replica) -> bool:
    return frozenset(JOBS) <= replica.leads
