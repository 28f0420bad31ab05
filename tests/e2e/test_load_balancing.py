"""Client-side load balancing over replicas: the Python client, given one multi-address
target, spreads calls over three servers on one database (counted by each server's own
access log), and keeps succeeding while one of them stops (round_robin drops it; a call
that meets it is retried on UNAVAILABLE)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest

from episodic.bootstrap.containers import Replacements
from episodic.bootstrap.lifecycle import open_app, serve_app
from episodic_client import AsyncEpisodicClient, EpisodicClient
from tests.conftest import unique
from tests.server_harness import KEY_A, settings_for
from tests.throwaway_postgres import throwaway_postgres

pytestmark = pytest.mark.postgres
REPLICAS = 3
CALLS = 60
GET_AGENT = "/episodic.v1.AgentService/GetAgent"


class CountingAccessLog:
    """One server's access log, counting the RPCs it answered by method."""

    def __init__(self) -> None:
        self.served: Counter[str] = Counter()

    def record(self, method: str, code: str, duration_ms: float, peer: str, trace_id: str = "") -> None:
        self.served[method] += 1

    def close(self) -> None:
        return None


@dataclasses.dataclass
class Cluster:
    ports: list[int]
    logs: list[CountingAccessLog]
    servers: list[AsyncExitStack]

    @property
    def target(self) -> str:
        return "ipv4:" + ",".join(f"127.0.0.1:{port}" for port in self.ports)

    def served(self, method: str) -> list[int]:
        return [log.served[method] for log in self.logs]

    async def logged(self, method: str, calls: int, timeout: float = 30.0) -> list[int]:
        """Calls of `method` per server once `calls` are logged (a call is logged when gRPC
        has finished it, which may be just after the client got its answer)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while sum(self.served(method)) < calls and asyncio.get_running_loop().time() < deadline:  # noqa: ASYNC110 - the servers' logs
            await asyncio.sleep(0.02)
        return self.served(method)


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    async with throwaway_postgres() as url, AsyncExitStack() as outer:
        found = Cluster([], [], [])
        for _ in range(REPLICAS):
            app = await outer.enter_async_context(
                open_app(settings_for(url), replace=Replacements(background=False))
            )
            log = CountingAccessLog()
            server = AsyncExitStack()
            outer.push_async_callback(server.aclose)
            grpc_server = await server.enter_async_context(
                serve_app(dataclasses.replace(app, access_log=log), grace_seconds=1)
            )
            found.ports.append(grpc_server.port)
            found.logs.append(log)
            found.servers.append(server)
        yield found


async def test_calls_are_spread_over_every_replica_of_a_multi_address_target(cluster: Cluster) -> None:
    async with AsyncEpisodicClient(cluster.target, api_key=KEY_A, timeout=30.0) as client:
        agent_id = unique("agent")
        await client.create_agent(agent_id, model="gpt-4o")
        for _ in range(CALLS):
            await client.get_agent(agent_id)
    served = await cluster.logged(GET_AGENT, CALLS)
    assert sum(served) == CALLS
    assert all(count > 0 for count in served), served


async def test_the_blocking_client_spreads_calls_too(cluster: Cluster) -> None:
    def echoes() -> None:  # off the event loop, which serves the three servers
        with EpisodicClient(cluster.target, api_key=KEY_A, timeout=30.0) as client:
            for _ in range(CALLS):
                client.echo(b"ping")

    await asyncio.to_thread(echoes)
    served = await cluster.logged("/episodic.v1.DiagnosticsService/Echo", CALLS)
    assert all(count > 0 for count in served), served


async def test_idempotent_calls_keep_succeeding_while_a_replica_stops(cluster: Cluster) -> None:
    async with AsyncEpisodicClient(cluster.target, api_key=KEY_A, timeout=30.0) as client:
        agent_id = unique("agent")
        await client.create_agent(agent_id, model="gpt-4o")
        for _ in range(CALLS):  # all three connected before one goes
            await client.get_agent(agent_id)
        stopping = asyncio.create_task(cluster.servers[0].aclose())
        results = await asyncio.gather(*(_calls(client, agent_id, CALLS) for _ in range(4)))
        await stopping
        at_stop = await cluster.logged(GET_AGENT, 5 * CALLS)
        after = [await client.get_agent(agent_id) for _ in range(CALLS)]
    assert sum(results) == 4 * CALLS and len(after) == CALLS
    served = await cluster.logged(GET_AGENT, 6 * CALLS)
    assert served[0] == at_stop[0]  # the stopped replica got none of the later calls
    assert all(now > then for now, then in zip(served[1:], at_stop[1:], strict=True)), (served, at_stop)


async def _calls(client: AsyncEpisodicClient, agent_id: str, n: int) -> int:
    """Sequential GetAgent calls; any failure fails the test."""
    for _ in range(n):
        await client.get_agent(agent_id)
    return n
