"""Stopping the background loops that run beside the RPCs (digester, idle reaper)."""

from __future__ import annotations

import asyncio
import contextlib


async def cancel_and_wait(task: asyncio.Task[None] | None) -> None:
    """Cancels a loop task and waits until it has unwound; no-op if never started."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
