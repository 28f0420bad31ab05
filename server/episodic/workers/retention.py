"""Retention: closed episodes past their agent's TTL are soft-deleted (invisible to every
read and search, their vectors taken out of the index), then purged after a grace period;
memories and agents' documents past their expiry are deleted.
Each sweep works in batches until nothing is due, logging what it did; state lives in SQL,
so a restarted server resumes where it stopped. Once per cluster: only the replica leading
"retention" sweeps."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta

from episodic.domain.changes import EpisodesRemoved
from episodic.domain.ports.changes import ChangeOwner, Leadership
from episodic.domain.ports.clock import Clock
from episodic.domain.ports.episodes import RetentionStore
from episodic.domain.recall import Scope
from episodic.domain.retention import SoftDeleted
from episodic.workers.loops import SoleReplica, cancel_and_wait, every, when_leading

log = logging.getLogger(__name__)
JOB = "retention"


@dataclass(frozen=True, slots=True)
class SweepCounts:
    soft_deleted: int
    vectors_removed: int
    purged: int


@dataclass(kw_only=True)
class RetentionJob:
    store: RetentionStore
    changes: ChangeOwner
    clock: Clock
    grace: timedelta = timedelta(days=7)
    interval_seconds: float = 3600.0
    batch: int = 500
    expire_memories: Callable[[int], Awaitable[int]] | None = None  # memories past expiry or retention
    expire_documents: Callable[[int], Awaitable[int]] | None = None  # agents' documents past expiry
    leadership: Leadership = field(default_factory=SoleReplica)
    _task: asyncio.Task[None] | None = field(default=None, repr=False)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="episodic-retention")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)

    async def sweep(self) -> SweepCounts:
        """Soft-deletes, then purges, batch after batch, until nothing is due."""
        deleted = removed = purged = 0
        while batch := await self._soft_delete_batch():
            deleted, removed = deleted + batch[0], removed + batch[1]
        while count := await self.store.purge_due(self.clock() - self.grace, self.batch):
            purged += count
        while self.expire_memories is not None and (count := await self.expire_memories(self.batch)):
            removed += count
        while self.expire_documents is not None and (count := await self.expire_documents(self.batch)):
            removed += count
        counts = SweepCounts(deleted, removed, purged)
        if deleted or purged:
            log.info(
                "retention sweep",
                extra={"soft_deleted": deleted, "vectors_removed": removed, "purged": purged},
            )
        return counts

    async def _soft_delete_batch(self) -> tuple[int, int] | None:
        """As in erasure: SQL and index change as one, so no digest lands in between."""
        committed = await self.changes.commit(
            lambda declared: self.store.soft_delete_due(self.clock(), self.batch, declared),
            lambda due: [EpisodesRemoved([(_scope(d), d.episode_id) for d in due])],
        )
        due = committed.result
        return (len(due), committed.vectors_removed) if due else None

    async def _run(self) -> None:
        await every(self.interval_seconds, when_leading(self.leadership, JOB, self.sweep), log)


def _scope(d: SoftDeleted) -> Scope:
    return Scope(d.tenant_id, d.agent_id, d.user_id)
