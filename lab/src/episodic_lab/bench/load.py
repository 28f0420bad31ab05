"""Closed-loop load: N workers, each issuing its next call as soon as the previous one
returns, so exactly N calls are in flight. Throughput is completed calls over the wall
time until the last worker finished; a call started before the deadline is awaited."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

# One call of a worker; the argument is the worker's index (0..N-1).
Call = Callable[[int], Awaitable[None]]


@dataclass(slots=True)
class LoadResult:
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)  # seconds, successful calls only
    errors: int = 0
    first_error: str = ""

    @property
    def calls(self) -> int:
        return len(self.latencies)

    @property
    def rps(self) -> float:
        return self.calls / self.seconds if self.seconds > 0 else 0.0


async def closed_loop(call: Call, workers: int, seconds: float) -> LoadResult:
    result = LoadResult()
    started = time.perf_counter()
    deadline = started + seconds
    await asyncio.gather(*(_worker(call, index, deadline, result) for index in range(workers)))
    result.seconds = time.perf_counter() - started
    return result


async def _worker(call: Call, index: int, deadline: float, result: LoadResult) -> None:
    now = time.perf_counter()
    while now < deadline:
        try:
            await call(index)
        except Exception as exc:  # counted and shown in the report; the load goes on
            result.errors += 1
            result.first_error = result.first_error or f"{type(exc).__name__}: {exc}"
        else:
            result.latencies.append(time.perf_counter() - now)
        now = time.perf_counter()
