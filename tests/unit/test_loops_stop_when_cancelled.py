"""A background loop ends when its task is cancelled, even when the cancellation comes out of
the round as the store's error (a database driver interrupted mid-query raises its own
error; the store turns it into UNAVAILABLE): caught as a failed round, the loop would sleep
until its next round and hold up the server's shutdown."""

from __future__ import annotations

import asyncio
import logging

import pytest

from episodic.errors import Unavailable
from episodic.workers.loops import every

log = logging.getLogger(__name__)


async def test_a_loop_cancelled_mid_round_ends_though_the_round_failed_otherwise() -> None:
    under_way = asyncio.Event()

    async def interrupted_query() -> None:
        """A round whose query, interrupted by the cancellation, fails with the store's error."""
        under_way.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            raise Unavailable("the connection was closed in the middle of an operation") from None

    task = asyncio.create_task(every(3600, interrupted_query, log))
    await asyncio.wait_for(under_way.wait(), timeout=30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, timeout=30)  # not the hour until the next round


async def test_a_round_that_fails_without_a_cancellation_waits_for_the_next_round() -> None:
    rounds = 0
    third = asyncio.Event()

    async def failing() -> None:
        nonlocal rounds
        rounds += 1
        if rounds == 3:
            third.set()
        raise Unavailable("the database is out")

    task = asyncio.create_task(every(0.01, failing, log))
    await asyncio.wait_for(third.wait(), timeout=30)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
