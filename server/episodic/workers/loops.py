"""Running and stopping the background loops that run beside the RPCs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from episodic.domain.ports.changes import Leadership
from episodic.errors import EpisodicError

T = TypeVar("T")


class SoleReplica:
    """Leadership of a deployment of one process (SQLite): it leads every job."""

    async def holds(self, job: str) -> bool:
        return True

    async def close(self) -> None:
        return None  # nothing held


def when_leading(
    leadership: Leadership, job: str, sweep: Callable[[], Awaitable[T]]
) -> Callable[[], Awaitable[T | None]]:
    """`sweep` for a once-per-cluster job: a tick runs it only on the replica that leads
    `job` (or has just taken the lead from a dead one); elsewhere the tick does nothing."""

    async def tick() -> T | None:
        if not await leadership.holds(job):
            return None
        return await sweep()

    return tick


async def cancel_and_wait(task: asyncio.Task[None] | None) -> None:
    """Cancels a loop task and waits until it has unwound; no-op if never started."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def every(interval_seconds: float, sweep: Callable[[], Awaitable[object]], log: logging.Logger) -> None:
    """Runs `sweep` forever, `interval_seconds` apart. A failed round is retried at the next
    interval: an outage quietly (the store's health logged it once), anything else with its
    type and frames."""
    while True:
        try:
            await sweep()
        except EpisodicError:
            pass
        except Exception:
            log.exception("background sweep failed", extra={"loop": log.name})
        stop_if_cancelled()
        await asyncio.sleep(interval_seconds)


def stop_if_cancelled() -> None:
    """Ends a loop whose task was cancelled during a round that then failed otherwise. A
    database driver interrupted mid-query may raise its own error instead of the
    cancellation (the store turns it into UNAVAILABLE); caught as a failed round, the loop
    would sleep until its next round and hold up shutdown. Seen as `stop feed pruner`
    running out its 10 s at a server's stop on PostgreSQL."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
