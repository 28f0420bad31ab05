"""What is measured during a phase, from the orchestrator: tenant B's calls at a steady
rate (open loop: a slow answer does not delay the next call, so waiting is not hidden),
Health/Check every half second, and the server's RSS."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from episodic_lab.bench_context.server import rss_mib

HEALTH_EVERY_SECONDS = 0.5
HEALTH_TIMEOUT_SECONDS = 2.0
RSS_EVERY_SECONDS = 0.25
SERVING = health_pb2.HealthCheckResponse.SERVING


@dataclass(slots=True)
class Latencies:
    seconds: dict[str, list[float]] = field(default_factory=dict)  # method -> successful calls
    errors: Counter[str] = field(default_factory=Counter)
    first_error: str = ""


async def steady(
    calls: Mapping[str, Callable[[], Awaitable[object]]], rotation: Sequence[str], rate: float, seconds: float
) -> Latencies:
    """Starts call i at i / rate seconds, cycling through `rotation`; waits for the last."""
    result = Latencies({name: [] for name in rotation})
    started = time.perf_counter()
    tasks = []
    for i, name in enumerate(itertools.cycle(rotation)):
        due = started + i / rate
        if due >= started + seconds:
            break
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        tasks.append(asyncio.create_task(_timed(name, calls[name], result)))
    await asyncio.gather(*tasks)
    return result


async def _timed(name: str, call: Callable[[], Awaitable[object]], result: Latencies) -> None:
    started = time.perf_counter()
    try:
        await call()
    except Exception as exc:  # counted and shown; B goes on as a real client would
        result.errors[name] += 1
        result.first_error = result.first_error or f"{name}: {type(exc).__name__}: {exc}"[:200]
    else:
        result.seconds[name].append(time.perf_counter() - started)


@dataclass(slots=True)
class Health:
    polls: int = 0
    serving: int = 0
    first_problem: str = ""

    @property
    def always_serving(self) -> bool:
        return self.polls > 0 and self.serving == self.polls


async def poll_health(target: str, seconds: float) -> Health:
    """Its own connection, as a load balancer's probe would have."""
    health = Health()
    deadline = time.monotonic() + seconds
    async with grpc.aio.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            health.polls += 1
            problem = await _check(stub)
            health.serving += not problem
            health.first_problem = health.first_problem or problem
            await asyncio.sleep(HEALTH_EVERY_SECONDS)
    return health


async def _check(stub: health_pb2_grpc.HealthStub) -> str:
    """ "" when SERVING, else what was wrong."""
    try:
        reply = await stub.Check(health_pb2.HealthCheckRequest(), timeout=HEALTH_TIMEOUT_SECONDS)
    except grpc.aio.AioRpcError as exc:
        return f"{exc.code().name}: {exc.details()}"
    return "" if reply.status == SERVING else health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


@dataclass(slots=True)
class Rss:
    start_mib: float = 0.0
    peak_mib: float = 0.0
    end_mib: float = 0.0

    @property
    def growth_mib(self) -> float:
        return self.peak_mib - self.start_mib


async def sample_rss(pid: int, seconds: float) -> Rss:
    rss = Rss(rss_mib(pid), rss_mib(pid))
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await asyncio.sleep(RSS_EVERY_SECONDS)
        rss.peak_mib = max(rss.peak_mib, rss_mib(pid))
    rss.end_mib = rss_mib(pid)
    return rss
