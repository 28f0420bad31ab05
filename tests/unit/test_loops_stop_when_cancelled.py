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


async def _interrupted_query() -> None:
    """A round whose query, interrupted by the cancellation, fails with the store's error."""
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        raise Unavailable("the connection was closed in the middle of an operation") from None


async def test_a_loop_cancelled_mid_round_ends_though_the_round_failed_otherwise() -> None:
    task = asyncio.create_task(every(3600, _interrupted_query, log))
    await asyncio.sleep(0.01)  # the first round is under way
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, timeout=2)  # not the hour until the next round


async def test_a_round_that_fails_without_a_cancellation_waits_for_the_next_round() -> None:
    rounds = 0

    async def failing() -> None:
        nonlocal rounds
        rounds += 1
        raise Unavailable("the database is out")

    task = asyncio.create_task(every(0.01, failing, log))
    await asyncio.sleep(0.2)
    assert not task.done() and rounds > 2
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
