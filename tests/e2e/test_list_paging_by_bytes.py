"""Listings and reads under the server's max_send_message_bytes: a page stops early when
the next item would push the response over the limit (its next_page_token continues from
there), and an item too large for the limit alone is FAILED_PRECONDITION
RESPONSE_TOO_LARGE, never grpc's bare RESOURCE_EXHAUSTED."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
from google.protobuf import struct_pb2

from episodic.v1 import episode_service_pb2
from tests.conftest import unique
from tests.e2e.helpers import Client, error_reason, expect_code, user_message
from tests.server_harness import KEY_A, running_server, settings_for

KIB = 1024
BIG = "x" * (256 * KIB)  # the largest message content the server accepts by default
SEND_LIMIT = 1024 * KIB  # room for three such messages per page, not four


@asynccontextmanager
async def client_of(database_url: str, **overrides: object) -> AsyncIterator[Client]:
    async with running_server(settings_for(database_url, **overrides)) as server, server.channel() as channel:
        yield Client.of(channel, KEY_A)


async def _scroll(client: Client, episode_id: str) -> list[episode_service_pb2.ListMessagesResponse]:
    pages, token = [], ""
    while True:
        request = episode_service_pb2.ListMessagesRequest(episode_id=episode_id, page_token=token)
        page = await client.episodes.ListMessages(request, metadata=client.auth)
        pages.append(page)
        if not (token := page.next_page_token):
            return pages


async def _list_episodes(client: Client, agent_id: str) -> list[episode_service_pb2.ListEpisodesResponse]:
    pages, token = [], ""
    while True:
        request = episode_service_pb2.ListEpisodesRequest(agent_id=agent_id, page_token=token)
        page = await client.episodes.ListEpisodes(request, metadata=client.auth)
        pages.append(page)
        if not (token := page.next_page_token):
            return pages


async def _episode_with_metadata(client: Client, agent_id: str, size: int) -> str:
    metadata = struct_pb2.Struct()
    metadata.update({"notes": "m" * size})
    request = episode_service_pb2.OpenEpisodeRequest(agent_id=agent_id, user_id="mary", metadata=metadata)
    return (await client.episodes.OpenEpisode(request, metadata=client.auth)).episode.episode_id


async def test_list_messages_pages_stop_at_the_send_limit_and_continue_where_they_stopped(
    database_url: str,
) -> None:
    async with client_of(database_url, max_send_message_bytes=SEND_LIMIT) as client:
        episode_id = await client.open_episode()
        for i in range(10):
            await client.add(episode_id, user_message(f"{i:02d}{BIG[2:]}"))
        pages = await _scroll(client, episode_id)
    assert all(page.ByteSize() <= SEND_LIMIT for page in pages)
    assert [len(page.messages) for page in pages] == [3, 3, 3, 1]
    assert [m.seq for page in pages for m in page.messages] == list(range(10, 0, -1))


async def test_a_message_too_large_for_the_send_limit_alone_is_response_too_large(
    database_url: str,
) -> None:
    async with client_of(database_url) as writer:  # written under the default limit
        episode_id = await writer.open_episode()
        await writer.add(episode_id, user_message(BIG))
    async with client_of(database_url, max_send_message_bytes=128 * KIB) as client:
        request = episode_service_pb2.ListMessagesRequest(episode_id=episode_id)
        call = client.episodes.ListMessages(request, metadata=client.auth)
        err = await expect_code(call, grpc.StatusCode.FAILED_PRECONDITION)
    assert error_reason(err) == "RESPONSE_TOO_LARGE"
    assert "max_send_message_bytes" in (err.details() or "")


async def test_list_episodes_pages_stop_at_the_send_limit(database_url: str) -> None:
    async with client_of(database_url, max_send_message_bytes=200 * KIB) as client:
        agent_id = await client.create_agent(unique("agent"))
        opened = {await _episode_with_metadata(client, agent_id, 60 * KIB) for _ in range(7)}
        pages = await _list_episodes(client, agent_id)
    assert all(page.ByteSize() <= 200 * KIB for page in pages)
    assert [len(page.episodes) for page in pages] == [3, 3, 1]
    assert {e.episode_id for page in pages for e in page.episodes} == opened


async def test_an_episode_too_large_for_the_send_limit_is_response_too_large(database_url: str) -> None:
    async with client_of(database_url) as writer:
        episode_id = await _episode_with_metadata(writer, await writer.create_agent(), 60 * KIB)
    async with client_of(database_url, max_send_message_bytes=32 * KIB) as client:
        err = await expect_code(client.get_episode(episode_id), grpc.StatusCode.FAILED_PRECONDITION)
    assert error_reason(err) == "RESPONSE_TOO_LARGE"
