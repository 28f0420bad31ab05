"""Clients that never read: BuildContext streams from a client advertising a zero HTTP/2
window, against a real `episodic serve` process. The caps of docs/operations.md ("Slow and
stalled clients") hold: no more streams start than a connection, or all of them, may hold,
the rest are refused, aged connections are told to go and their streams cancelled, and
other clients are still served. The memory those held streams take is a measurement, not
a test: scripts/measure_stalled_clients.py (RSS against the docs' bound)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from episodic.v1 import context_service_pb2
from episodic_lab.bench_fairness.stalling import StallingClient
from tests.e2e.context_helpers import create_agent
from tests.e2e.helpers import Client, user_message
from tests.e2e.test_server_process import ServerProcess, dev_flags, serving, sqlite_url

pytestmark = pytest.mark.slow  # hundreds of stalled connections held until they age out

BUILD_CONTEXT = "/episodic.v1.ContextService/BuildContext"
MIB = 1024 * 1024
# A guard against a hang, never a measurement: every wait below ends on an event.
SETTLE_TIMEOUT = 120.0
WORDS = "the quick brown fox jumps over lazy dogs while seven wizards hex bold jugglers".split()  # noqa: SIM905


@dataclass(frozen=True)
class Stage:
    server: ServerProcess
    client: Client
    request: context_service_pb2.BuildContextRequest
    response_bytes: int

    async def build(self) -> int:
        """One ordinary BuildContext, read to the end; its response size."""
        size = 0
        async for frame in self.client.context.BuildContext(self.request, timeout=SETTLE_TIMEOUT):
            size += frame.ByteSize()
        return size

    async def stalling_clients(self, connections: int) -> list[StallingClient]:
        return [await StallingClient.connect("127.0.0.1", self.server.port) for _ in range(connections)]


def _prose(chars: int, seed: int) -> str:
    """Text that tokenizes like text (one repeated letter would collapse into few tokens)."""
    pick = random.Random(seed)
    return " ".join(f"{pick.choice(WORDS)}{pick.randint(0, 999)}" for _ in range(chars // 8))


@asynccontextmanager
async def stage(tmp_path: Path, *flags: str) -> AsyncIterator[Stage]:
    """A server whose episode renders a context of about 300 KiB."""
    server_flags = (*dev_flags(sqlite_url(tmp_path)), "--embedder", "hashing", "--no-access-log", *flags)
    async with serving(*server_flags, cwd=tmp_path) as server, server.channel() as channel:
        client = Client.of(channel, None)
        agent_id = await create_agent(
            client, max_working_memory_tokens=130_000, context_window_tokens=200_000
        )
        episode_id = await client.open_episode(agent_id)
        for seed in range(4):
            await client.add(episode_id, user_message(_prose(75_000, seed)))
        request = context_service_pb2.BuildContextRequest(episode_id=episode_id)
        ready = Stage(server, client, request, 0)
        yield Stage(server, client, request, await ready.build())


async def settled(clients: list[StallingClient], done: Callable[[StallingClient], bool]) -> None:
    waits = [_until(client, done) for client in clients]
    await asyncio.wait_for(asyncio.gather(*waits), SETTLE_TIMEOUT)


def _until(client: StallingClient, done: Callable[[StallingClient], bool]) -> Awaitable[None]:
    return client.wait_until(lambda: done(client))


async def test_one_connection_holds_at_most_max_concurrent_streams_responses(tmp_path: Path) -> None:
    async with stage(tmp_path, "--max-concurrent-streams", "16") as s, AsyncExitStack() as stack:
        assert s.response_bytes > 256 * 1024
        (stalled,) = await s.stalling_clients(1)
        stack.push_async_callback(stalled.close)
        for _ in range(200):
            await stalled.call(BUILD_CONTEXT, s.request)
        await settled([stalled], lambda c: c.started + c.reset == 200)  # each rendered or refused
        assert stalled.started <= 16
        assert await s.build() == s.response_bytes  # other clients are still served


async def test_every_connection_together_holds_at_most_max_concurrent_rpcs_until_they_age_out(
    tmp_path: Path,
) -> None:
    flags = ("--max-concurrent-streams", "16", "--max-concurrent-rpcs", "24")
    age = ("--max-connection-age-seconds", "5", "--max-connection-age-grace-seconds", "1")
    async with stage(tmp_path, *flags, *age) as s, AsyncExitStack() as stack:
        clients = await s.stalling_clients(4)
        for client in clients:
            stack.push_async_callback(client.close)
            for _ in range(16):
                await client.call(BUILD_CONTEXT, s.request)
        await settled(clients, lambda c: c.started + c.refused + c.reset >= 16)
        assert sum(c.started for c in clients) <= 24
        assert sum(c.refused for c in clients) >= 64 - 24  # RESOURCE_EXHAUSTED at once
        # Past their age and grace the connections are told to go and their streams are
        # cancelled: the slots come back and ordinary clients are served again.
        await settled(clients, lambda c: c.goaway and c.reset >= c.started)
        assert await s.build() == s.response_bytes
