"""An import killed with SIGKILL halfway: after the restart every episode the server shows is
whole (its log holds message_count messages, numbered densely) and running the import again
completes it, changing nothing already there. The real `episodic serve`, on SQLite."""

from __future__ import annotations

import asyncio
import zipfile
from collections.abc import AsyncIterator
from contextlib import suppress
from pathlib import Path

import grpc

from episodic.edges.grpc.transfer_client import read_export, write_export
from episodic.v1 import episode_pb2
from episodic.v1 import episode_service_pb2 as pb
from tests.e2e.helpers import Client
from tests.e2e.test_crash_durability import ServerProcess, episodic_server

EPISODES = 8
MESSAGES = 1000  # per episode: the import takes long enough to be killed halfway
USER = "crash-import-user"


async def fill(client: Client) -> None:
    agent_id = await client.create_agent("crash-import")
    for _ in range(EPISODES):
        episode_id = await client.open_episode(agent_id, user_id=USER)
        for start in range(0, MESSAGES, 500):
            batch = [
                episode_pb2.MessageInput(
                    role=episode_pb2.ROLE_USER, content=f"message {start + i} about trams"
                )
                for i in range(500)
            ]
            await client.add(episode_id, *batch)


async def requests(path: Path) -> AsyncIterator[pb.ImportUserRequest]:
    with zipfile.ZipFile(path) as archive:
        for request in read_export(archive, ""):
            yield request


async def visible(client: Client) -> list[episode_pb2.Episode]:
    listed = await client.episodes.ListEpisodes(
        pb.ListEpisodesRequest(user_id=USER, page_size=100), metadata=()
    )
    return list(listed.episodes)


async def seqs(client: Client, episode_id: str) -> list[int]:
    found: list[int] = []
    token = ""
    while True:
        request = pb.ListMessagesRequest(episode_id=episode_id, page_size=1000, page_token=token)
        page = await client.episodes.ListMessages(request)
        found += [m.seq for m in page.messages]
        token = page.next_page_token
        if not token:
            return sorted(found)


async def import_and_kill(server: ServerProcess, path: Path) -> None:
    async with server.channel() as channel:
        client = Client.of(channel, None)
        call = asyncio.ensure_future(client.episodes.ImportUser(requests(path), timeout=60))
        while not await visible(client) and not call.done():  # noqa: ASYNC110 - polls the server
            await asyncio.sleep(0.005)
        await server.kill()
        with suppress(grpc.aio.AioRpcError):  # the server died under it
            await call


async def test_a_killed_import_leaves_only_whole_episodes_and_completes_when_run_again(
    sqlite_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "user.zip"
    async with episodic_server(sqlite_url, tmp_path / "first.log") as server, server.channel() as channel:
        client = Client.of(channel, None)
        await fill(client)
        stream = client.episodes.ExportUser(pb.ExportUserRequest(user_id=USER))
        await asyncio.to_thread(write_export, [r async for r in stream], path)
        await client.episodes.EraseUser(pb.EraseUserRequest(user_id=USER))
        await import_and_kill(server, path)

    async with episodic_server(sqlite_url, tmp_path / "second.log") as server, server.channel() as channel:
        client = Client.of(channel, None)
        halfway = await visible(client)
        for episode in halfway:
            assert episode.message_count == MESSAGES
            assert await seqs(client, episode.episode_id) == list(range(1, MESSAGES + 1))
        done = await client.episodes.ImportUser(requests(path), timeout=60)
        assert done.episodes_unchanged == len(halfway)
        assert done.episodes_imported == EPISODES - len(halfway)
        assert len(await visible(client)) == EPISODES
