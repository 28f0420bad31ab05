"""Once-per-cluster loops (idle reaper, retention) sweep only on the replica that leads
their job; a tick elsewhere asks, then does nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, cast

from episodic.domain.model import Episode
from episodic.service.episodes import EpisodeService
from episodic.workers.loops import SoleReplica, when_leading
from episodic.workers.reaper import IdleReaper
from episodic.workers.retention import RetentionJob
from tests.fakes import FakeLeadership, FakeRetentionStore, Tables

NOW = datetime(2024, 5, 1, tzinfo=UTC)


class CountingEpisodes:
    """Only what the reaper's sweep asks of the episode store."""

    def __init__(self) -> None:
        self.sweeps: list[datetime] = []

    async def idle_episodes(self, now: datetime, limit: int) -> list[Episode]:
        self.sweeps.append(now)
        return []


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition never held"
        await asyncio.sleep(0.01)


def reaper(episodes: CountingEpisodes, leadership: FakeLeadership, **options: Any) -> IdleReaper:
    return IdleReaper(
        episodes=cast(Any, episodes), service=cast(EpisodeService, None), clock=lambda: NOW,
        on_closed=lambda: None, interval_seconds=0.01, leadership=leadership, **options,
    )  # fmt: skip


async def test_a_tick_runs_the_sweep_only_while_leading() -> None:
    swept: list[int] = []

    async def sweep() -> int:
        swept.append(1)
        return 7

    leadership = FakeLeadership(leading={"feed-prune"})
    tick: Callable[[], Awaitable[int | None]] = when_leading(leadership, "feed-prune", sweep)
    assert await tick() == 7
    leadership.leading = set()
    assert await tick() is None
    assert swept == [1] and leadership.asked == ["feed-prune", "feed-prune"]


async def test_the_idle_reaper_of_a_follower_never_sweeps() -> None:
    episodes, leadership = CountingEpisodes(), FakeLeadership(leading=set())
    job = reaper(episodes, leadership)
    job.start()
    try:
        await until(lambda: len(leadership.asked) >= 3)
    finally:
        await job.stop()
    assert set(leadership.asked) == {"idle-reaper"} and episodes.sweeps == []


async def test_the_idle_reaper_sweeps_once_it_leads() -> None:
    episodes, leadership = CountingEpisodes(), FakeLeadership(leading=set())
    job = reaper(episodes, leadership)
    job.start()
    try:
        await until(lambda: len(leadership.asked) >= 2)
        leadership.leading = {"idle-reaper"}  # the old leader died
        await until(lambda: len(episodes.sweeps) >= 2)
    finally:
        await job.stop()


async def test_the_idle_cut_off_uses_the_cluster_clock_when_given() -> None:
    episodes = CountingEpisodes()
    later = datetime(2030, 1, 1, tzinfo=UTC)

    async def database_now() -> datetime:
        return later

    await reaper(episodes, FakeLeadership(), cluster_now=database_now).sweep()
    assert episodes.sweeps == [later]


async def test_the_retention_job_of_a_follower_never_sweeps() -> None:
    store, leadership = FakeRetentionStore(Tables()), FakeLeadership(leading=set())
    swept: list[int] = []

    async def expire(limit: int) -> int:
        swept.append(limit)
        return 0

    job = RetentionJob(
        store=store, changes=cast(Any, None), clock=lambda: NOW, interval_seconds=0.01,
        expire_memories=expire, leadership=leadership,
    )  # fmt: skip
    job.start()
    try:
        await until(lambda: len(leadership.asked) >= 3)
    finally:
        await job.stop()
    assert set(leadership.asked) == {"retention"} and swept == []


async def test_a_single_process_leads_every_job() -> None:
    assert await SoleReplica().holds("idle-reaper") and await SoleReplica().holds("anything")
