"""The `AgentStore` port: create, get, update, list (by id, paged, restricted), per tenant; what an
agent holds, its users, and its deletion (refused while episodes or memories are left)."""

from __future__ import annotations

import dataclasses

import pytest

from episodic.domain.agent_deletion import AgentHoldings, AgentRemoved
from episodic.domain.changes import NO_CHANGES
from episodic.domain.episodes import OpenRequest
from episodic.domain.model import Agent, RecallMode
from episodic.domain.recall import Scope
from episodic.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from tests.conftest import unique
from tests.contracts.conftest import ENCODING, World


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


async def test_what_an_agent_holds_counts_users_of_episodes_and_memories_and_its_documents(
    world: World,
) -> None:
    agent, other = await world.agent(), await world.agent()
    empty = await world.agents.holdings(world.tenant, agent.agent_id)
    assert empty == AgentHoldings(0, 0, 0, 0) and empty.empty
    await world.episode(agent, "u1")
    await world.episode(agent, "u1")
    await world.episode(agent, "u2")
    await world.episode(other, "u9")
    await world.remember(world.memory(Scope(world.tenant, agent.agent_id, "u3")))
    await world.remember(world.memory(Scope(world.tenant, agent.agent_id, "u1")))
    await world.learn(world.document(agent.agent_id, "# Care\n\nBasil likes sun."))
    held = await world.agents.holdings(world.tenant, agent.agent_id)
    assert held == AgentHoldings(users=3, episodes=3, memories=2, documents=1)
    assert "3 user(s)" in held.described()
    assert await world.agents.user_ids(world.tenant, agent.agent_id, None, 2) == ["u1", "u2"]
    assert await world.agents.user_ids(world.tenant, agent.agent_id, "u2", 10) == ["u3"]
    assert (await world.agents.holdings(unique("tenant"), agent.agent_id)).empty


async def test_deleting_an_agent_takes_its_documents_and_leaves_the_others(world: World) -> None:
    agent, other = await world.agent(), await world.agent()
    [doc] = await world.learn(world.document(agent.agent_id, "# Care\n\nBasil likes sun."))
    [kept] = await world.learn(world.document(other.agent_id, "# Care\n\nMint likes shade."))
    removed = await world.agents.delete_agent(world.tenant, agent.agent_id, NO_CHANGES)
    assert removed.result == AgentRemoved(agent, [doc.document_id])
    with pytest.raises(NotFound):
        await world.agents.get_agent(world.tenant, agent.agent_id)
    assert (await world.agents.holdings(world.tenant, agent.agent_id)).empty
    assert await world.knowledge.get(world.tenant, other.agent_id, kept.document_id, world.clock()) == kept
    assert [a.agent_id for a in await world.agents.list_agents(world.tenant, None, 10)] == [other.agent_id]
    again = await world.agents.create_agent(agent)  # the id is free again, with nothing of the old one
    assert (await world.agents.holdings(world.tenant, again.agent_id)).empty


async def test_an_agent_with_episodes_or_memories_left_is_not_deleted(world: World) -> None:
    with_episode, with_memory = await world.agent(), await world.agent()
    await world.episode(with_episode, "u1")
    await world.remember(world.memory(Scope(world.tenant, with_memory.agent_id, "u2")))
    for agent in (with_episode, with_memory):
        with pytest.raises(FailedPrecondition) as refused:
            await world.agents.delete_agent(world.tenant, agent.agent_id, NO_CHANGES)
        assert refused.value.reason == "AGENT_HOLDS_DATA"
        assert await world.agents.get_agent(world.tenant, agent.agent_id) == agent


async def test_deleting_a_missing_agent_is_not_found(world: World) -> None:
    agent = await world.agent()
    with pytest.raises(NotFound):
        await world.agents.delete_agent(unique("tenant"), agent.agent_id, NO_CHANGES)
    with pytest.raises(NotFound):
        await world.agents.delete_agent(world.tenant, "nobody", NO_CHANGES)


async def test_an_episode_of_a_deleted_agent_is_not_opened(world: World) -> None:
    agent = await world.agent()
    await world.agents.delete_agent(world.tenant, agent.agent_id, NO_CHANGES)
    request = OpenRequest(agent.agent_id, "u1", unique("ep"), {}, world.clock())
    with pytest.raises(NotFound) as refused:
        await world.episodes.open_episode(world.tenant, request, ENCODING)
    assert refused.value.reason == "AGENT_NOT_FOUND"
