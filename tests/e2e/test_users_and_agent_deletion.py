"""ListUsers and DeleteAgent through a live server, on SQLite and PostgreSQL: the users of an
agent a page at a time with their counts and last activity, never another tenant's; keys
restricted to agents see only theirs; an agent holding data is refused deletion until asked
to erase it all, and then its users are gone from every read and the agent is NOT_FOUND."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from episodic.edges.keys import config_line
from episodic.v1 import (
    agent_service_pb2,
    episode_service_pb2,
    knowledge_service_pb2,
    memory_pb2,
    memory_service_pb2,
)
from tests.conftest import unique
from tests.e2e.helpers import Client, error_reason, expect_code, expect_invalid, user_message
from tests.server_harness import KEY_A, KEY_B, TENANT_A, RunningServer, running_server, settings_for

es, ms = episode_service_pb2, memory_service_pb2
KEY_OF_ALPHA = "epk_test_tenant_a_alpha_only_0123456789"


@pytest.fixture
async def clients(server: RunningServer) -> AsyncIterator[tuple[Client, Client]]:
    async with server.channel() as channel:
        yield Client.of(channel, KEY_A), Client.of(channel, KEY_B)


async def list_users(
    client: Client, agent_id: str, page_size: int = 0, token: str = ""
) -> es.ListUsersResponse:
    request = es.ListUsersRequest(agent_id=agent_id, page_size=page_size, page_token=token)
    return await client.episodes.ListUsers(request, metadata=client.auth)


async def every_user(client: Client, agent_id: str, page_size: int) -> tuple[list[es.UserSummary], int]:
    """All users, page by page, and how many pages it took."""
    found: list[es.UserSummary] = []
    token, pages = "", 0
    while True:
        page = await list_users(client, agent_id, page_size, token)
        found += page.users
        pages += 1
        if not (token := page.next_page_token):
            return found, pages


async def remember(client: Client, agent_id: str, user_id: str, text: str) -> None:
    memory = ms.MemoryInput(text=text, kind=memory_pb2.MEMORY_KIND_FACT)
    request = ms.CreateMemoriesRequest(agent_id=agent_id, user_id=user_id, memories=[memory])
    await client.memories.CreateMemories(request, metadata=client.auth, timeout=30)


async def delete_agent(
    client: Client, agent_id: str, erase_data: bool
) -> agent_service_pb2.DeleteAgentResponse:
    request = agent_service_pb2.DeleteAgentRequest(agent_id=agent_id, erase_data=erase_data)
    return await client.agents.DeleteAgent(request, metadata=client.auth, timeout=60)


async def test_users_are_listed_by_page_with_counts_and_last_activity_per_tenant(
    clients: tuple[Client, Client],
) -> None:
    a, b = clients
    agent = await a.create_agent()
    last: dict[str, float] = {}
    for user in ("u3", "u1", "u2", "u1", "u4"):
        episode_id = await a.open_episode(agent, user_id=user)
        await a.add(episode_id, user_message(f"hello from {user}"))
        if user != "u4":
            await a.episodes.CloseEpisode(es.CloseEpisodeRequest(episode_id=episode_id), metadata=a.auth)
        seen = (await a.get_episode(episode_id)).last_activity_time.ToDatetime().timestamp()
        last[user] = max(last.get(user, 0.0), seen)
    await remember(a, agent, "u0", "u0 prefers tea")  # a user with memories only
    await b.create_agent(agent)  # the same agent id in another tenant, with a user of its own
    await b.open_episode(agent, user_id="b-only")

    users, pages = await every_user(a, agent, page_size=2)
    assert pages == 3
    assert [(u.user_id, u.episode_count, u.open_episode_count, u.memory_count) for u in users] == [
        ("u0", 0, 0, 1),
        ("u1", 2, 0, 0),
        ("u2", 1, 0, 0),
        ("u3", 1, 0, 0),
        ("u4", 1, 1, 0),
    ]
    for u in users[1:]:
        assert u.last_activity_time.ToDatetime().timestamp() == pytest.approx(last[u.user_id], abs=1e-3)
    assert users[0].last_activity_time.seconds > 0
    assert [u.user_id for u in (await list_users(b, agent)).users] == ["b-only"]
    assert (await list_users(a, agent, 1000)).next_page_token == ""

    await expect_invalid(list_users(a, agent, -1), "page_size")
    await expect_invalid(list_users(a, ""), "agent_id")
    first = await list_users(a, agent, 2)
    other = await a.create_agent()  # a token is of one agent's listing
    await expect_invalid(list_users(a, other, 2, first.next_page_token), "page_token")
    await expect_invalid(list_users(a, agent, 2, "not-a-token"), "page_token")
    await expect_code(list_users(a, unique("nobody")), grpc.StatusCode.NOT_FOUND)


async def test_an_agent_holding_data_is_deleted_only_with_its_data_erased(
    clients: tuple[Client, Client],
) -> None:
    a, b = clients
    agent, other = await a.create_agent(), await a.create_agent()
    kept_episode = await a.open_episode(other, user_id="mary")
    for user in ("mary", "john"):
        episode_id = await a.open_episode(agent, user_id=user)
        await a.add(episode_id, user_message(f"{user} booked a ryokan in Kyoto"))
    await remember(a, agent, "zoe", "zoe keeps bees")
    document = knowledge_service_pb2.DocumentInput(document_id="care", text="# Care\n\nBasil likes sun.")
    await a.knowledge.CreateDocuments(
        knowledge_service_pb2.CreateDocumentsRequest(agent_id=agent, documents=[document]), metadata=a.auth
    )

    refused = await expect_code(delete_agent(a, agent, erase_data=False), grpc.StatusCode.FAILED_PRECONDITION)
    assert error_reason(refused) == "AGENT_HOLDS_DATA"
    assert "3 user(s)" in (refused.details() or "") and "erase_data=true" in (refused.details() or "")
    assert len((await list_users(a, agent)).users) == 3  # nothing went
    await expect_code(delete_agent(b, agent, erase_data=True), grpc.StatusCode.NOT_FOUND)  # not B's

    receipt = (await delete_agent(a, agent, erase_data=True)).receipt
    assert (receipt.agent_id, receipt.users, len(set(receipt.erasure_ids))) == (agent, 3, 3)
    assert (receipt.episodes, receipt.messages, receipt.memories, receipt.documents) == (2, 2, 1, 1)
    assert receipt.delete_time.seconds > 0

    get = a.agents.GetAgent(agent_service_pb2.GetAgentRequest(agent_id=agent), metadata=a.auth)
    await expect_code(get, grpc.StatusCode.NOT_FOUND)
    await expect_code(list_users(a, agent), grpc.StatusCode.NOT_FOUND)
    await expect_code(delete_agent(a, agent, erase_data=True), grpc.StatusCode.NOT_FOUND)
    listed = await a.episodes.ListEpisodes(es.ListEpisodesRequest(agent_id=agent), metadata=a.auth)
    assert list(listed.episodes) == []
    search = ms.SearchMemoriesRequest(agent_id=agent, user_id="zoe", mode=es.SEARCH_MODE_RECENCY)
    await expect_code(a.memories.SearchMemories(search, metadata=a.auth), grpc.StatusCode.NOT_FOUND)

    assert (await a.get_episode(kept_episode)).agent_id == other  # another agent's data stays
    await a.create_agent(agent)  # the id is free again, and holds nothing of the old agent
    assert list((await list_users(a, agent)).users) == []
    search_again = await a.memories.SearchMemories(search, metadata=a.auth)
    assert list(search_again.hits) == []
    empty = (await delete_agent(a, agent, erase_data=False)).receipt
    assert (empty.users, empty.episodes, list(empty.erasure_ids)) == (0, 0, [])


async def test_a_key_restricted_to_agents_lists_and_deletes_only_its_own(database_url: str) -> None:
    alpha, beta = unique("alpha"), unique("beta")
    settings = settings_for(database_url)
    restricted = config_line(TENANT_A, KEY_OF_ALPHA, [alpha])
    settings = settings_for(database_url, api_keys=f"{settings.api_keys},{restricted}")
    async with running_server(settings) as server, server.channel() as channel:
        mine, tenant = Client.of(channel, KEY_OF_ALPHA), Client.of(channel, KEY_A)
        await mine.create_agent(alpha)
        await tenant.create_agent(beta)
        await mine.open_episode(alpha, user_id="mary")
        await tenant.open_episode(beta, user_id="john")
        assert [u.user_id for u in (await list_users(mine, alpha)).users] == ["mary"]
        denied = await expect_code(list_users(mine, beta), grpc.StatusCode.PERMISSION_DENIED)
        assert error_reason(denied) == "AGENT_NOT_ALLOWED"
        await expect_code(delete_agent(mine, beta, erase_data=True), grpc.StatusCode.PERMISSION_DENIED)
        assert [u.user_id for u in (await list_users(tenant, beta)).users] == ["john"]
        assert (await delete_agent(mine, alpha, erase_data=True)).receipt.users == 1
