"""An erasure wins over an import of the same user already running: EraseUser lands while
an import of 150 episodes is part-way through, and once both have finished nothing of the
user remains, whichever episodes the import had written before, during or after it. The
import that lost is ABORTED (reason USER_ERASED); one that finished first was erased whole."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from episodic.v1 import episode_service_pb2
from tests.conftest import unique
from tests.e2e.helpers import Client, error_reason, user_message
from tests.server_harness import KEY_A, RunningServer

pb = episode_service_pb2
EPISODES = 150


@pytest.fixture
async def client(server: RunningServer) -> AsyncIterator[Client]:
    async with server.channel() as channel:
        yield Client.of(channel, KEY_A)


async def exported_history(client: Client, user: str) -> list[pb.ExportUserResponse]:
    agent_id = await client.create_agent()
    for n in range(EPISODES):
        episode = await client.open_episode(agent_id, user_id=user)
        await client.add(episode, user_message(f"Note {n}: the tram leaves at {n % 24}:00."))
    stream = client.episodes.ExportUser(pb.ExportUserRequest(user_id=user), metadata=client.auth)
    responses = [r async for r in stream]
    await client.episodes.EraseUser(pb.EraseUserRequest(user_id=user), metadata=client.auth)
    return responses


def import_requests(responses: list[pb.ExportUserResponse]) -> list[pb.ImportUserRequest]:
    """One request per part, so the import writes its episodes one transaction at a time."""
    manifest = next(r.manifest for r in responses if r.HasField("manifest"))
    return [pb.ImportUserRequest(manifest=manifest)] + [
        pb.ImportUserRequest(part=r.part, records=r.records) for r in responses if r.records
    ]


async def held_episodes(client: Client, user: str) -> int:
    listed = await client.episodes.ListEpisodes(
        pb.ListEpisodesRequest(user_id=user, page_size=1000), metadata=client.auth
    )
    return len(listed.episodes)


async def test_an_erasure_during_an_import_leaves_nothing_of_the_user(client: Client) -> None:
    user = unique("mary")
    requests = import_requests(await exported_history(client, user))

    async def stream() -> AsyncIterator[pb.ImportUserRequest]:
        for request in requests:
            yield request

    importing = asyncio.ensure_future(client.episodes.ImportUser(stream(), metadata=client.auth, timeout=120))
    while await held_episodes(client, user) == 0 and not importing.done():  # noqa: ASYNC110 - the server's state
        await asyncio.sleep(0)  # the import has begun writing: erase now
    await client.episodes.EraseUser(pb.EraseUserRequest(user_id=user), metadata=client.auth)
    try:
        await importing
    except grpc.aio.AioRpcError as err:
        assert err.code() == grpc.StatusCode.ABORTED and error_reason(err) == "USER_ERASED", err  # noqa: PT017 - the import may also finish first
    assert await held_episodes(client, user) == 0, "episodes of the erased user remained"
