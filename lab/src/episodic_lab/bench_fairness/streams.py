"""Tenant A's held streams: 2,000 WatchEpisode streams kept open for the phase (watches),
and 200 BuildContext calls of ~1 MB whose responses are never read (unread-streams)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import AsyncExitStack

import grpc

from episodic_client.v1 import context_service_pb2, episode_service_pb2
from episodic_client.v1.episode_service_pb2_grpc import EpisodeServiceStub
from episodic_lab.bench_fairness.hammer import SEPARATE, STOP_GRACE_SECONDS, count_error
from episodic_lab.bench_fairness.plan import Plan, Tally
from episodic_lab.bench_fairness.stalling import StallingClient

WATCHES, WATCH_CONNECTIONS = 2_000, 8  # 250 a connection, well under its 1,000 streams
WATCH_BATCH = 50  # opened at once per connection: a burst past the stream limit is refused
OPEN_TIMEOUT_SECONDS = 10.0
UNREAD_CALLS, UNREAD_CONNECTIONS = 200, 8
BUILD_CONTEXT = "/episodic.v1.ContextService/BuildContext"


async def watches(plan: Plan, started: Callable[[], None]) -> Tally:
    tally = Tally()
    deadline = time.monotonic() + plan.seconds
    async with AsyncExitStack() as stack:
        channels = [
            await stack.enter_async_context(grpc.aio.insecure_channel(plan.target, options=SEPARATE))
            for _ in range(WATCH_CONNECTIONS)
        ]
        started()
        per_channel = WATCHES // WATCH_CONNECTIONS
        opened = await asyncio.gather(
            *(_open_watches(plan, c, i, per_channel, tally) for i, c in enumerate(channels))
        )
        tasks = [task for tasks in opened for task in tasks]
        await asyncio.sleep(max(0.0, deadline - time.monotonic()))
        tally.done = sum(not task.done() for task in tasks)  # still held at the end of the phase
        tally.notes["held_at_end"] = tally.done
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return tally


async def _open_watches(
    plan: Plan, channel: grpc.aio.Channel, index: int, count: int, tally: Tally
) -> list[asyncio.Task[None]]:
    stub, auth = EpisodeServiceStub(channel), (("authorization", f"Bearer {plan.api_key}"),)
    tasks: list[asyncio.Task[None]] = []
    for start in range(0, count, WATCH_BATCH):
        calls = []
        for number in range(start, min(count, start + WATCH_BATCH)):
            episode_id = plan.episodes[(index * count + number) % len(plan.episodes)]
            calls.append(
                stub.WatchEpisode(
                    episode_service_pb2.WatchEpisodeRequest(episode_id=episode_id), metadata=auth
                )
            )
        tasks += [asyncio.create_task(_hold(call, tally)) for call in calls]
        # The server sends a watch's headers at once: when they are in, the batch is served.
        await asyncio.wait_for(
            asyncio.gather(*(c.initial_metadata() for c in calls), return_exceptions=True),
            OPEN_TIMEOUT_SECONDS,
        )
    return tasks


async def _hold(
    call: grpc.aio.UnaryStreamCall[
        episode_service_pb2.WatchEpisodeRequest, episode_service_pb2.WatchEpisodeResponse
    ],
    tally: Tally,
) -> None:
    """Reads the watch's events (heartbeats) until it ends or is cancelled."""
    try:
        async for _event in call:
            pass
    except grpc.aio.AioRpcError as exc:
        if exc.code() is not grpc.StatusCode.CANCELLED:
            count_error(exc, tally)


async def unread_streams(plan: Plan, started: Callable[[], None]) -> Tally:
    host, port = plan.target.rsplit(":", 1)
    clients = [await StallingClient.connect(host, int(port)) for _ in range(UNREAD_CONNECTIONS)]
    started()
    deadline = time.monotonic() + plan.seconds
    auth = (("authorization", f"Bearer {plan.api_key}"),)
    try:
        for number in range(UNREAD_CALLS):
            request = context_service_pb2.BuildContextRequest(
                episode_id=plan.big_episode, user_message=f"and {number}?"
            )
            await clients[number % UNREAD_CONNECTIONS].call(BUILD_CONTEXT, request, auth)
        await asyncio.sleep(max(0.0, deadline - time.monotonic()))
    finally:
        tally = _stalled_tally(clients)
        await asyncio.wait_for(asyncio.gather(*(c.close() for c in clients)), STOP_GRACE_SECONDS)
    return tally


def _stalled_tally(clients: list[StallingClient]) -> Tally:
    """done: responses rendered and held unsent; refused: trailers-only answers (no body:
    RESOURCE_EXHAUSTED, as the shares answer); errors: streams reset."""
    tally = Tally(
        done=sum(c.started for c in clients),
        refused=sum(c.refused for c in clients),
        errors=sum(c.reset for c in clients),
    )
    tally.notes["connections_sent_goaway"] = sum(c.goaway for c in clients)
    return tally
