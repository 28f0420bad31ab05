"""Waiting for something that happens asynchronously (another replica, a background loop),
with a generous deadline: tests poll instead of sleeping, and never time the wait."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 60.0) -> bool:
    """Polls `check` every 50 ms until it is true (True) or `timeout` seconds pass (False)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if await check():
            return True
        await asyncio.sleep(0.05)
    return False
