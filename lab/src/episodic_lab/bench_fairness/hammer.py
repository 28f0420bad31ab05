"""Tenant A's call floods: N calls in flight over separate connections, each worker calling
again as soon as its call ends, refusals included (a hostile client), unless told to honour
the refusal's RetryInfo. flood (AddMessage + BuildContext), bulk-memories, erase-loop."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from typing import cast

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from episodic_client.v1 import (
    context_service_pb2,
    episode_pb2,
    episode_service_pb2,
    memory_pb2,
    memory_service_pb2,
)
from episodic_client.v1.context_service_pb2_grpc import ContextServiceStub
from episodic_client.v1.episode_service_pb2_grpc import EpisodeServiceStub
from episodic_client.v1.memory_service_pb2_grpc import MemoryServiceStub
from episodic_lab.bench_fairness.plan import Plan, Tally
from episodic_lab.bench_fairness.texts import prose

CALL_TIMEOUT_SECONDS = 30.0
STOP_GRACE_SECONDS = 5.0  # calls still running this long after the phase are cancelled
SEPARATE = [("grpc.use_local_subchannel_pool", 1)]  # a channel of its own, not a shared subchannel
FLOOD_IN_FLIGHT, FLOOD_CONNECTIONS = 48, 4
BULK_IN_FLIGHT, BULK_ITEMS = 16, 100
ERASE_IN_FLIGHT = 8

# One call of worker `i` over channel `channel`.
Call = Callable[[grpc.aio.Channel, int], Awaitable[object]]


async def flood(plan: Plan, started: Callable[[], None]) -> Tally:
    auth = _auth(plan)
    turns = itertools.count()

    async def call(channel: grpc.aio.Channel, worker: int) -> None:
        episode_id = plan.episodes[worker % len(plan.episodes)]
        turn = next(turns)
        if turn % 2:
            request = context_service_pb2.BuildContextRequest(
                episode_id=episode_id, user_message=f"turn {turn}?"
            )
            stream = ContextServiceStub(channel).BuildContext(
                request, metadata=auth, timeout=CALL_TIMEOUT_SECONDS
            )
            async for _frame in stream:
                pass
        else:
            message = episode_pb2.MessageInput(role=episode_pb2.ROLE_USER, content=f"flood turn {turn}")
            await EpisodeServiceStub(channel).AddMessage(
                episode_service_pb2.AddMessageRequest(episode_id=episode_id, message=message),
                metadata=auth,
                timeout=CALL_TIMEOUT_SECONDS,
            )

    return await hammer(plan, call, FLOOD_IN_FLIGHT, FLOOD_CONNECTIONS, started)


async def bulk_memories(plan: Plan, started: Callable[[], None]) -> Tally:
    auth, requests = _auth(plan), _memory_requests(plan)

    async def call(channel: grpc.aio.Channel, worker: int) -> None:
        request = requests[worker % len(requests)]
        await MemoryServiceStub(channel).CreateMemories(request, metadata=auth, timeout=CALL_TIMEOUT_SECONDS)

    return await hammer(plan, call, BULK_IN_FLIGHT, FLOOD_CONNECTIONS, started)


def _memory_requests(plan: Plan) -> list[memory_service_pb2.CreateMemoriesRequest]:
    """Built once: a retry loop that wrote 100 texts per attempt would spend the attacker's
    CPU, on the server's machine, rather than the server's."""
    rng = random.Random(3)
    return [
        memory_service_pb2.CreateMemoriesRequest(
            agent_id=plan.agent_id,
            user_id=plan.user_id,
            memories=[
                memory_service_pb2.MemoryInput(text=prose(rng, 120), kind=memory_pb2.MEMORY_KIND_FACT)
                for _ in range(BULK_ITEMS)
            ],
        )
        for _ in range(BULK_IN_FLIGHT)
    ]


async def erase_loop(plan: Plan, started: Callable[[], None]) -> Tally:
    auth, ghosts = _auth(plan), itertools.count()

    async def call(channel: grpc.aio.Channel, _worker: int) -> None:
        request = episode_service_pb2.EraseUserRequest(
            user_id=f"ghost-{next(ghosts)}", agent_id=plan.agent_id
        )
        await EpisodeServiceStub(channel).EraseUser(request, metadata=auth, timeout=CALL_TIMEOUT_SECONDS)

    return await hammer(plan, call, ERASE_IN_FLIGHT, FLOOD_CONNECTIONS, started)


async def hammer(
    plan: Plan, call: Call, in_flight: int, connections: int, started: Callable[[], None]
) -> Tally:
    tally = Tally()
    async with AsyncExitStack() as stack:
        channels = [
            await stack.enter_async_context(grpc.aio.insecure_channel(plan.target, options=SEPARATE))
            for _ in range(connections)
        ]
        await asyncio.gather(*(channel.channel_ready() for channel in channels))
        started()
        deadline = time.monotonic() + plan.seconds
        workers = [
            asyncio.create_task(_worker(call, channels[i % connections], i, deadline, plan, tally))
            for i in range(in_flight)
        ]
        await _until(workers, plan.seconds + STOP_GRACE_SECONDS)
    return tally


async def _worker(
    call: Call, channel: grpc.aio.Channel, index: int, deadline: float, plan: Plan, tally: Tally
) -> None:
    while time.monotonic() < deadline:
        try:
            await call(channel, index)
        except grpc.aio.AioRpcError as exc:
            wait = count_error(exc, tally)
            if plan.honour_retry and wait > 0:
                await asyncio.sleep(min(wait, max(0.0, deadline - time.monotonic())))
        else:
            tally.done += 1


def count_error(exc: grpc.aio.AioRpcError, tally: Tally) -> float:
    """Counts a failed call; returns the wait its RetryInfo asks for (0 if none)."""
    if exc.code() is not grpc.StatusCode.RESOURCE_EXHAUSTED:
        tally.error(f"{exc.code().name}: {exc.details()}")
        return 0.0
    tally.refused += 1
    return retry_delay(exc)


def retry_delay(exc: grpc.aio.AioRpcError) -> float:
    """The RetryInfo detail of a refusal, in seconds; 0 without one."""
    # An AioRpcError has the grpc.Call methods from_call reads (code, details, trailing metadata).
    status = rpc_status.from_call(cast(grpc.Call, exc))
    for detail in status.details if status is not None else ():
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            return float(info.retry_delay.ToTimedelta().total_seconds())
    return 0.0


async def _until(tasks: Sequence[asyncio.Task[None]], seconds: float) -> None:
    """Waits for the tasks, cancelling whatever still runs after `seconds`."""
    _done, pending = await asyncio.wait(tasks, timeout=seconds)
    for task in pending:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _auth(plan: Plan) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {plan.api_key}"),)
