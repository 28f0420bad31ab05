"""The `AgentStore` port: create, get, update, list (by id, paged, restricted), per tenant."""

from __future__ import annotations

import dataclasses

import pytest

from episodic.domain.changes import NO_CHANGES
from episodic.domain.model import Agent, RecallMode
from episodic.errors import AlreadyExists, InvalidArgument, NotFound
from tests.conftest import unique
from tests.contracts.conftest import World


async def test_an_agent_round_trips_whole(world: World) -> None:
    agent = await world.agent(recall_mode=RecallMode.SEMANTIC, recall_top_k=7, retention_days=30)
    assert await world.agents.get_agent(world.tenant, agent.agent_id) == agent


async def test_creating_an_existing_agent_is_refused_and_keeps_the_first(world: World) -> None:
    agent = await world.agent()
    again = dataclasses.replace(agent, display_name="Other")
    with pytest.raises(AlreadyExists) as refused:
        await world.agents.create_agent(again)
    assert refused.value.reason == "AGENT_EXISTS"
    assert (await world.agents.get_agent(world.tenant, agent.agent_id)).display_name == "Agent"


async def test_an_unknown_agent_is_not_found(world: World) -> None:
    with pytest.raises(NotFound):
        await world.agents.get_agent(world.tenant, "nobody")


async def test_agents_are_per_tenant(world: World) -> None:
    agent = await world.agent()
    other_tenant = unique("tenant")
    with pytest.raises(NotFound):
        await world.agents.get_agent(other_tenant, agent.agent_id)
    assert await world.agents.list_agents(other_tenant, None, 10) == []
    twin = await world.agents.create_agent(dataclasses.replace(agent, tenant_id=other_tenant))  # same id
    assert await world.agents.get_agent(other_tenant, agent.agent_id) == twin


async def test_an_update_applies_the_change_and_returns_it(world: World) -> None:
    agent = await world.agent()

    def rename(a: Agent) -> Agent:
        return dataclasses.replace(a, display_name="Renamed", updated_at=world.clock())

    world.later()
    recorded = await world.agents.update_agent(world.tenant, agent.agent_id, rename, NO_CHANGES)
    assert recorded.result.display_name == "Renamed"
    assert await world.agents.get_agent(world.tenant, agent.agent_id) == recorded.result


async def test_an_update_that_raises_changes_nothing(world: World) -> None:
    agent = await world.agent()

    def refuse(_: Agent) -> Agent:
        raise InvalidArgument.of("display_name", "no")

    with pytest.raises(InvalidArgument):
        await world.agents.update_agent(world.tenant, agent.agent_id, refuse, NO_CHANGES)
    assert await world.agents.get_agent(world.tenant, agent.agent_id) == agent


async def test_updating_an_unknown_agent_is_not_found(world: World) -> None:
    with pytest.raises(NotFound):
        await world.agents.update_agent(world.tenant, "nobody", lambda a: a, NO_CHANGES)


async def test_the_listing_pages_by_agent_id(world: World) -> None:
    made = sorted([(await world.agent()).agent_id for _ in range(5)])
    first = await world.agents.list_agents(world.tenant, None, 2)
    assert [a.agent_id for a in first] == made[:2]
    rest = await world.agents.list_agents(world.tenant, first[-1].agent_id, 10)
    assert [a.agent_id for a in rest] == made[2:]
    assert await world.agents.list_agents(world.tenant, made[-1], 10) == []


async def test_the_listing_can_be_restricted_to_some_agents(world: World) -> None:
    made = sorted([(await world.agent()).agent_id for _ in range(4)])
    only = frozenset({made[0], made[2], "not-an-agent"})
    listed = await world.agents.list_agents(world.tenant, None, 10, only=only)
    assert [a.agent_id for a in listed] == [made[0], made[2]]
    assert await world.agents.list_agents(world.tenant, made[0], 10, only=only) == [listed[1]]
    assert await world.agents.list_agents(world.tenant, None, 10, only=frozenset()) == []
