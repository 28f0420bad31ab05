"""The tenant comes from the credential; dev mode only covers calls with no key at all."""

from __future__ import annotations

import grpc
import pytest

from episodic.v1 import agent_pb2, agent_service_pb2
from episodic.v1.agent_service_pb2_grpc import AgentServiceStub
from tests.server_harness import KEY_A, KEY_B, bearer, running_server, settings_for

LIST = agent_service_pb2.ListAgentsRequest()


async def test_dev_mode_serves_keyless_calls_but_refuses_a_wrong_key(sqlite_url: str) -> None:
    settings = settings_for(sqlite_url, insecure_dev=True)
    async with running_server(settings) as server, server.channel() as channel:
        stub = AgentServiceStub(channel)
        await stub.ListAgents(LIST)
        await stub.ListAgents(LIST, metadata=bearer(KEY_A))
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.ListAgents(LIST, metadata=bearer("epk_typo"))
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_tenants_see_only_their_own_agents(sqlite_url: str) -> None:
    async with running_server(settings_for(sqlite_url)) as server, server.channel() as channel:
        stub = AgentServiceStub(channel)
        create = agent_service_pb2.CreateAgentRequest(agent=agent_pb2.Agent(agent_id="shared-name"))
        await stub.CreateAgent(create, metadata=bearer(KEY_A))
        await stub.CreateAgent(create, metadata=bearer(KEY_B))  # same id, other tenant: no clash
        seen_by_b = await stub.ListAgents(LIST, metadata=bearer(KEY_B))
    assert [a.agent_id for a in seen_by_b.agents] == ["shared-name"]
