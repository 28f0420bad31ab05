"""The Python clients' list_users / iter_users and delete_agent against a live server, on
SQLite and PostgreSQL: every page walked, counts as stored, a refusal typed, a receipt."""

from __future__ import annotations

import asyncio

import pytest

from episodic_client import (
    AsyncEpisodicClient,
    EpisodicClient,
    FailedPreconditionError,
    NotFoundError,
    memory_input,
)
from tests.conftest import unique
from tests.server_harness import KEY_A, RunningServer


async def test_async_client_lists_users_by_page_and_deletes_an_agent_with_its_data(
    server: RunningServer,
) -> None:
    agent_id = unique("agent")
    async with AsyncEpisodicClient(server.address, api_key=KEY_A, timeout=30.0) as client:
        await client.create_agent(agent_id)
        for user in ("carol", "alice", "bob", "alice"):
            episode_id = (await client.open_episode(agent_id, user)).episode.episode_id
            await client.add_message(episode_id, "user", f"Hello, I am {user}.")
        await client.create_memories([memory_input("Keeps bees")], agent_id=agent_id, user_id="dave")

        users = [u async for u in client.iter_users(agent_id, page_size=2)]
        first = await client.list_users(agent_id, page_size=3)
        with pytest.raises(FailedPreconditionError) as refused:
            await client.delete_agent(agent_id)
        receipt = (await client.delete_agent(agent_id, erase_data=True)).receipt
        with pytest.raises(NotFoundError):
            await client.list_users(agent_id)
        with pytest.raises(NotFoundError):
            await client.get_agent(agent_id)
    assert [(u.user_id, u.episode_count, u.open_episode_count, u.memory_count) for u in users] == [
        ("alice", 2, 2, 0),
        ("bob", 1, 1, 0),
        ("carol", 1, 1, 0),
        ("dave", 0, 0, 1),
    ]
    assert all(u.last_activity_time.seconds > 0 for u in users)
    assert len(first.users) == 3 and first.next_page_token
    assert refused.value.reason == "AGENT_HOLDS_DATA"
    assert (receipt.users, receipt.episodes, receipt.messages, receipt.memories) == (4, 4, 4, 1)
    assert len(receipt.erasure_ids) == 4


def sync_round_trip(address: str, agent_id: str) -> tuple[list[str], int, int]:
    with EpisodicClient(address, api_key=KEY_A, timeout=30.0) as client:
        client.create_agent(agent_id)
        for user in ("u2", "u1", "u3"):
            client.open_episode(agent_id, user)
        users = [u.user_id for u in client.iter_users(agent_id, page_size=1)]
        erased = client.delete_agent(agent_id, erase_data=True).receipt.users
        client.create_agent(agent_id)
        empty = client.delete_agent(agent_id).receipt.users  # nothing held: deleted at once
        return users, erased, empty


async def test_sync_client_iterates_users_and_deletes_agents(server: RunningServer) -> None:
    users, erased, empty = await asyncio.to_thread(sync_round_trip, server.address, unique("agent"))
    assert users == ["u1", "u2", "u3"]
    assert (erased, empty) == (3, 0)
