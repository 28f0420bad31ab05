"""Latency at one call in flight: warm-up calls, then measured calls back to back, each
timed on its own, until the wanted count or the time budget is reached (a call that takes
a second must not hold a whole run up for 20 minutes; the figures say how many calls
they rest on). Also counts the garbage collector's full collections in the measured
window: with a million index keys alive, one of those is a visible pause."""

from __future__ import annotations

import gc
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from episodic_lab.bench.report import percentile

# One call; the argument numbers the call (warm-up calls first), to pick its request.
AsyncCall = Callable[[int], Awaitable[object]]
SyncCall = Callable[[int], object]
WARMUP_SHARE = 0.2  # of the time budget, at most


@dataclass(frozen=True, slots=True)
class Budget:
    """Calls wanted, warm-up calls, and the seconds warm-up and measurement may take."""

    calls: int
    warmup: int
    seconds: float

    @classmethod
    def of(cls, calls: int, seconds: float) -> Budget:
        return cls(calls, max(10, calls // 5), seconds)


@dataclass(frozen=True, slots=True)
class Figures:
    calls: int
    seconds: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    full_gcs: int  # generation-2 collections during the measured calls
    full_gc_max_ms: float

    @property
    def rps(self) -> float:
        return self.calls / self.seconds if self.seconds > 0 else 0.0

    @classmethod
    def of(cls, latencies: list[float], seconds: float, gcs: GcPauses) -> Figures:
        ordered = sorted(latencies)
        p50, p90, p99, top = (percentile(ordered, q) * 1000 for q in (50, 90, 99, 100))
        return cls(len(ordered), seconds, p50, p90, p99, top, gcs.count, gcs.longest * 1000)


@dataclass(slots=True)
class GcPauses:
    count: int = 0
    longest: float = 0.0  # seconds
    _began: float = field(default=0.0, repr=False)

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.count += 1
            self.longest = max(self.longest, time.perf_counter() - self._began)


@contextmanager
def watching_gc() -> Iterator[GcPauses]:
    pauses = GcPauses()
    gc.callbacks.append(pauses)
    try:
        yield pauses
    finally:
        gc.callbacks.remove(pauses)


async def timed(call: AsyncCall, budget: Budget) -> Figures:
    first = await warm_up(call, budget)
    block = await time_calls(call, first, budget.calls, budget.seconds)
    return Figures.of(block.latencies, block.seconds, block.gcs)


async def warm_up(call: AsyncCall, budget: Budget) -> int:
    """The budget's warm-up calls (at least one; no more once its share of the time has
    passed); returns how many were made."""
    number, deadline = 0, time.perf_counter() + budget.seconds * WARMUP_SHARE
    while number < budget.warmup and (number == 0 or time.perf_counter() < deadline):
        await call(number)
        number += 1
    return number


@dataclass(slots=True)
class Timed:
    latencies: list[float]
    seconds: float
    gcs: GcPauses


async def time_calls(call: AsyncCall, first: int, calls: int, seconds: float) -> Timed:
    """Up to `calls` calls, numbered from `first`, each timed (at least one; no more once
    `seconds` have passed), and the full collections meanwhile."""
    latencies: list[float] = []
    with watching_gc() as gcs:
        started = time.perf_counter()
        deadline = started + seconds
        while len(latencies) < calls and (not latencies or time.perf_counter() < deadline):
            began = time.perf_counter()
            await call(first + len(latencies))
            latencies.append(time.perf_counter() - began)
        taken = time.perf_counter() - started
    return Timed(latencies, taken, gcs)


async def timed_sync(call: SyncCall, budget: Budget) -> Figures:
    """`timed` for a plain function (the coroutine around it adds about a microsecond)."""

    async def as_async(number: int) -> object:
        return call(number)

    return await timed(as_async, budget)
