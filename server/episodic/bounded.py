"""Shutdown steps that must end: a stop that waits on the database or on a task that will
not finish (a connection lost mid-query, a driver that swallows a cancel) is abandoned after
its bound, with one log line, instead of holding the process forever."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable

log = logging.getLogger("episodic.server")


async def within(seconds: float, step: Awaitable[object], what: str) -> bool:
    """Awaits `step` for at most `seconds`; True if it finished. Unlike `asyncio.wait_for`, an
    overrun is not awaited again while it is being cancelled."""
    task = asyncio.ensure_future(step)
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if task in done:
        task.result()  # its own error, if any, is the caller's
        return True
    task.cancel()
    log.warning("shutdown step did not finish in time; going on without it", extra={"step": what})
    return False
