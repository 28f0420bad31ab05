"""Shutdown waits for arrivals to go quiet (calls already sent are taken, not cancelled by
the stop), and no longer than its cap when callers keep sending. Time is faked: the clock
moves only when settle sleeps."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from episodic.edges.grpc.arrivals import Arrivals


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []
        self.during_sleep: Callable[[], None] = lambda: None

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.slept.append(seconds)
        self.during_sleep()


@pytest.fixture
def time() -> FakeTime:
    return FakeTime()


async def test_settling_waits_out_the_quiet_period_since_the_last_arrival(time: FakeTime) -> None:
    arrivals = Arrivals(time.clock, time.sleep)
    time.now = 0.03
    await arrivals.settle(quiet=0.1, cap=1.0)
    assert time.now == pytest.approx(0.1)


async def test_a_call_arriving_while_settling_restarts_the_quiet_period(time: FakeTime) -> None:
    arrivals = Arrivals(time.clock, time.sleep)
    notes = iter([True, False])
    time.during_sleep = lambda: arrivals.note() if next(notes) else None
    await arrivals.settle(quiet=0.1, cap=1.0)
    assert time.slept == pytest.approx([0.1, 0.1])


async def test_callers_that_keep_sending_hold_the_stop_no_longer_than_the_cap(time: FakeTime) -> None:
    arrivals = Arrivals(time.clock, time.sleep)
    time.during_sleep = arrivals.note
    await arrivals.settle(quiet=0.1, cap=0.45)
    assert time.now == pytest.approx(0.45)


async def test_settling_long_after_the_last_call_does_not_wait(time: FakeTime) -> None:
    arrivals = Arrivals(time.clock, time.sleep)
    time.now = 5.0
    await arrivals.settle(quiet=0.1, cap=1.0)
    assert time.slept == []
