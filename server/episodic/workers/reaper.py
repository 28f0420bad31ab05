"""The idle reaper: closes episodes idle longer than their agent's idle timeout, with
reason IDLE_TIMEOUT; they are then digested like any other. Once per cluster: only the
replica leading "idle-reaper" sweeps."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime

from episodic.domain.model import CloseReason
from episodic.domain.ports.changes import Leadership
from episodic.domain.ports.clock import Clock
from episodic.domain.ports.episodes import EpisodeStore
from episodic.service.episodes import EpisodeService
from episodic.workers.loops import SoleReplica, cancel_and_wait, every, when_leading

log = logging.getLogger(__name__)
JOB = "idle-reaper"


@dataclass(kw_only=True)
class IdleReaper:
    episodes: EpisodeStore
    service: EpisodeService
    clock: Clock
    on_closed: Callable[[], None]
    interval_seconds: float = 30.0
    batch: int = 500
    leadership: Leadership = field(default_factory=SoleReplica)
    # The cluster's clock (the database's) for idle cut-offs, so a leader whose clock runs
    # ahead does not close live conversations; None: `clock`.
    cluster_now: Callable[[], Awaitable[datetime]] | None = None
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="episodic-idle-reaper")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)

    async def sweep(self) -> int:
        """Closes one batch of idle episodes; returns how many. Each ends at its last
        activity, which is when the conversation really stopped."""
        now = self.clock() if self.cluster_now is None else await self.cluster_now()
        idle = await self.episodes.idle_episodes(now, self.batch)
        for episode in idle:
            await self.service.close_as(
                episode.tenant_id, episode.episode_id, CloseReason.IDLE_TIMEOUT, "", episode.last_activity_at
            )
        if idle:
            log.info("closed idle episodes", extra={"count": len(idle)})
            self.on_closed()
        return len(idle)

    async def _run(self) -> None:
        await every(self.interval_seconds, when_leading(self.leadership, JOB, self.sweep), log)
