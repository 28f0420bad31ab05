"""Each tenant's share of a live server: a tenant over a share is refused with
RESOURCE_EXHAUSTED, a QuotaFailure naming the share and a RetryInfo; the other tenant's
calls, health, reflection and Echo go on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from episodic.v1 import (
    context_service_pb2,
    episode_service_pb2,
    knowledge_service_pb2,
    memory_pb2,
    memory_service_pb2,
)
from episodic_client import AsyncEpisodicClient, ResourceExhaustedError
from tests.conftest import unique
from tests.e2e.helpers import Client, assert_serving, expect_code, user_message
from tests.polling import eventually
from tests.server_harness import KEY_A, KEY_B, running_server, settings_for

WATCH_SECONDS = 30


@asynccontextmanager
async def two_tenants(database_url: str, **shares: object) -> AsyncIterator[tuple[Client, Client]]:
    settings = settings_for(database_url, **shares)
    async with running_server(settings) as server, server.channel() as channel:
        yield Client.of(channel, KEY_A), Client.of(channel, KEY_B)


def quota_of(error: grpc.aio.AioRpcError) -> tuple[str, float]:
    """The share a refusal names and the retry delay it asks for, in seconds."""
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None
    share, delay = "", -1.0
    for detail in status.details:
        if detail.Is(error_details_pb2.QuotaFailure.DESCRIPTOR):
            failure = error_details_pb2.QuotaFailure()
            detail.Unpack(failure)
            share = failure.violations[0].quota_id
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            detail.Unpack(retry)
            delay = retry.retry_delay.ToTimedelta().total_seconds()
    return share, delay


async def refused(call: object) -> tuple[str, float]:
    error = await expect_code(call, grpc.StatusCode.RESOURCE_EXHAUSTED)  # type: ignore[arg-type]
    return quota_of(error)


Watch = grpc.aio.UnaryStreamCall[
    episode_service_pb2.WatchEpisodeRequest, episode_service_pb2.WatchEpisodeResponse
]


def watch(client: Client, episode_id: str) -> Watch:
    """Replays from the start: an episode with a message sends it once the watch has joined."""
    request = episode_service_pb2.WatchEpisodeRequest(episode_id=episode_id, after_seq=0)
    return client.episodes.WatchEpisode(request, metadata=client.auth, timeout=WATCH_SECONDS)


async def started(call: Watch) -> None:
    """The watch has joined (its episode has a message, replayed once it did)."""
    event = await call.read()
    assert isinstance(event, episode_service_pb2.WatchEpisodeResponse)
    assert event.HasField("message_appended")


async def watched_episode(client: Client) -> str:
    episode_id = await client.open_episode(await client.create_agent())
    await client.add(episode_id, user_message("to replay"))
    return episode_id


async def test_a_tenant_holding_every_rpc_of_the_server_leaves_health_and_echo_answering(
    database_url: str,
) -> None:
    async with two_tenants(database_url, tenant_max_rpcs=3, max_concurrent_rpcs=4) as (a, b):
        episode_a, episode_b = await watched_episode(a), await watched_episode(b)
        watches = [watch(a, episode_a) for _ in range(3)]
        for call in watches:
            await started(call)
        share, delay = await refused(a.episodes.GetEpisode(_get(episode_a), metadata=a.auth))
        assert share == "rpcs_in_flight" and delay > 0
        await b.add(episode_b, user_message("b is served"))  # b's share is untouched
        b_watch = watch(b, episode_b)
        await started(b_watch)  # now every slot of the server is held
        await assert_serving(a.channel, a.auth)  # health and Echo are never refused for capacity
        for call in [*watches, b_watch]:
            call.cancel()


async def test_a_tenant_over_its_rate_is_told_when_to_retry_and_the_other_is_not_slowed(
    database_url: str,
) -> None:
    # The fifth token is 20 s away: however slow the machine, the first four calls cannot
    # take long enough for it to come within the second a call may wait for its token.
    async with two_tenants(database_url, tenant_rate_per_second=0.05, tenant_rate_burst=4) as (a, b):
        agent = await a.create_agent()  # 1
        episode = await a.open_episode(agent)  # 2
        await a.add(episode, user_message("one"))  # 3
        await a.add(episode, user_message("two"))  # 4
        share, delay = await refused(a.add(episode, user_message("three")))
        # told to come back when the token is due: 20 s less the second waited, less the time the
        # first four calls took
        assert share == "requests_per_second" and 1.0 < delay <= 19.0
        assert [m.content for m in await b.log_of(await b.open_episode(await b.create_agent()))] == []


async def test_a_response_past_the_tenants_unsent_share_is_refused(database_url: str) -> None:
    async with two_tenants(database_url, tenant_max_unsent_bytes=150_000) as (a, b):
        for client in (a, b):
            episode = await client.open_episode(await client.create_agent())
            for _ in range(2):  # each reply echoes its 100 KB message: within the share
                await client.add(episode, user_message("x" * 100_000))
            request = episode_service_pb2.ListMessagesRequest(episode_id=episode, page_size=1)
            page = await client.episodes.ListMessages(request, metadata=client.auth)
            assert len(page.messages) == 1  # 100 KB: within the share
            whole = episode_service_pb2.ListMessagesRequest(episode_id=episode, page_size=10)
            share, _ = await refused(client.episodes.ListMessages(whole, metadata=client.auth))
            assert share == "unsent_response_bytes"


async def test_watchers_are_shared_out_per_tenant(database_url: str) -> None:
    async with two_tenants(database_url, tenant_max_watchers=2) as (a, b):
        episode_a, episode_b = await watched_episode(a), await watched_episode(b)
        held = [watch(a, episode_a) for _ in range(2)]
        for call in held:
            await started(call)
        extra = watch(a, episode_a)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await extra.read()
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert quota_of(caught.value)[0] == "watchers"
        b_watch = watch(b, episode_b)
        await started(b_watch)  # b's watch is served
        for call in [*held, b_watch]:
            call.cancel()


async def test_memory_writes_are_metered_per_tenant(database_url: str) -> None:
    shares = {"tenant_memory_writes_per_second": 0.1, "tenant_memory_writes_burst": 3}
    async with two_tenants(database_url, **shares) as (a, b):
        for client in (a, b):
            agent = await client.create_agent()
            await client.memories.CreateMemories(_memories(agent, 3), metadata=client.auth)
        share, delay = await refused(a.memories.CreateMemories(_memories(agent, 1), metadata=a.auth))
        assert share == "memory_writes_per_second" and delay > 5


async def test_document_chunks_are_metered_per_tenant_and_a_refused_batch_writes_nothing(
    database_url: str,
) -> None:
    shares = {"tenant_knowledge_chunks_per_second": 0.1, "tenant_knowledge_chunks_burst": 3}
    async with two_tenants(database_url, **shares) as (a, b):
        agents = {}
        for client in (a, b):
            agents[client.auth] = agent = await client.create_agent()
            await client.knowledge.CreateDocuments(_documents(agent, "first", 3), metadata=client.auth)
        share, delay = await refused(
            a.knowledge.CreateDocuments(_documents(agents[a.auth], "second", 2), metadata=a.auth)
        )
        assert share == "knowledge_chunks_per_second" and delay > 5
        listed = await a.knowledge.ListDocuments(
            knowledge_service_pb2.ListDocumentsRequest(agent_id=agents[a.auth]), metadata=a.auth
        )
        assert [d.document_id for d in listed.documents] == ["first-0", "first-1", "first-2"]


def _documents(agent_id: str, prefix: str, count: int) -> knowledge_service_pb2.CreateDocumentsRequest:
    """`count` documents of one chunk each."""
    documents = [
        knowledge_service_pb2.DocumentInput(document_id=f"{prefix}-{i}", text=f"Policy number {i} applies.")
        for i in range(count)
    ]
    return knowledge_service_pb2.CreateDocumentsRequest(agent_id=agent_id, documents=documents)


async def _export(client: Client, text: str) -> list[episode_service_pb2.ImportUserRequest]:
    """The requests of an import of a new user's export: one episode holding `text`."""
    user_id = unique("user")
    episode_id = await client.open_episode(user_id=user_id)
    await client.add(episode_id, user_message(text))
    request = episode_service_pb2.ExportUserRequest(user_id=user_id)
    responses = [r async for r in client.episodes.ExportUser(request, metadata=client.auth, timeout=30)]
    first = episode_service_pb2.ImportUserRequest(manifest=responses[-1].manifest)
    return [
        first,
        *(episode_service_pb2.ImportUserRequest(part=r.part, records=r.records) for r in responses[:-1]),
    ]


def _import(client: Client, requests: list[episode_service_pb2.ImportUserRequest]) -> object:
    async def stream() -> AsyncIterator[episode_service_pb2.ImportUserRequest]:
        for request in requests:
            yield request

    return client.episodes.ImportUser(stream(), metadata=client.auth, timeout=30)


async def test_import_bytes_are_metered_per_tenant(database_url: str) -> None:
    """15 KB a part, a burst of 20 KB: a's second import is ~10 KB short, 20 s away at 500 B/s
    (refill during the test cannot bring it within the second an import may wait)."""
    shares = {"tenant_import_bytes_per_second": 500, "tenant_import_bytes_burst": 20_000}
    async with two_tenants(database_url, **shares) as (a, b):
        exports = {client.auth: await _export(client, "w" * 15_000) for client in (a, b)}
        await _import(a, exports[a.auth])  # type: ignore[misc]
        share, delay = await refused(_import(a, exports[a.auth]))
        assert share == "import_bytes_per_second" and delay > 5
        done = await _import(b, exports[b.auth])  # type: ignore[misc]
        assert done.episodes_unchanged == 1  # b imports while a is refused


async def test_a_tenants_imports_running_at_once_hold_at_most_its_share(database_url: str) -> None:
    """a's first import holds its 7 KB part (the part is written once the next arrives or the
    stream ends: it is kept open), so a's second one, 7 KB more, is over the 10 KB share;
    b's share is its own."""
    async with two_tenants(database_url, tenant_import_held_bytes=10_000) as (a, b):
        first, second = await _export(a, "w" * 7_000), await _export(a, "v" * 7_000)
        let_go = asyncio.Event()

        async def held_open() -> AsyncIterator[episode_service_pb2.ImportUserRequest]:
            for request in first:
                yield request
            await let_go.wait()

        def hold() -> grpc.aio.StreamUnaryCall[
            episode_service_pb2.ImportUserRequest, episode_service_pb2.ImportUserResponse
        ]:
            return a.episodes.ImportUser(held_open(), metadata=a.auth, timeout=30)

        holding = hold()

        async def over_share() -> bool:
            nonlocal holding
            try:
                await _import(a, second)  # type: ignore[misc]
            except grpc.aio.AioRpcError as error:
                assert quota_of(error)[0] == "import_bytes_held"  # noqa: PT017 - it may also run (see below)
                return True
            # The first had not held its part yet: this one ran (it changes nothing). Had the
            # first's part come while this one held its own, the first was refused: again.
            if holding.done():
                holding = hold()
            return False

        assert await eventually(over_share, 10)
        done = await _import(b, await _export(b, "u" * 7_000))  # type: ignore[misc]
        assert done.episodes_unchanged == 1
        let_go.set()
        assert (await holding).episodes_unchanged == 1  # the held import ends as it would have


async def test_import_bytes_held_at_once_are_capped_per_tenant(database_url: str) -> None:
    async with two_tenants(database_url, tenant_import_held_bytes=10_000) as (a, b):
        share, _ = await refused(_import(a, await _export(a, "w" * 15_000)))
        assert share == "import_bytes_held"
        done = await _import(b, await _export(b, "a short conversation"))  # type: ignore[misc]
        assert done.episodes_unchanged == 1


async def test_a_context_never_exceeds_the_servers_limit_whatever_the_agent_asks(database_url: str) -> None:
    async with two_tenants(database_url, max_context_tokens=2_000) as (a, _):
        episode = await a.open_episode(await a.create_agent())  # the agent's window: 128k tokens
        request = context_service_pb2.BuildContextRequest(episode_id=episode, user_message="hello")
        frames = [f async for f in a.context.BuildContext(request, metadata=a.auth)]
        report = next(f.report for f in frames if f.HasField("report"))
        assert 0 < report.ceiling_tokens <= 2_000


async def test_the_python_client_raises_a_refusal_with_its_share_and_retry_delay(database_url: str) -> None:
    # the third token is 20 s away: no slowness of the machine brings it within the second waited
    settings = settings_for(database_url, tenant_rate_per_second=0.05, tenant_rate_burst=2)
    async with (
        running_server(settings) as server,
        AsyncEpisodicClient(server.address, api_key=KEY_A, timeout=10.0) as client,
    ):
        await client.echo(b"free")  # Echo is never counted
        began = time.monotonic()
        await client.create_agent(unique("agent"))
        await client.create_agent(unique("agent"))
        refilled = time.monotonic() - began  # seconds of the token's wait gone meanwhile
        with pytest.raises(ResourceExhaustedError) as caught:
            await client.create_agent(unique("agent"))
    assert caught.value.quota_id == "requests_per_second" and caught.value.reason == "OVER_SHARE"
    # the token is 20 s away, less what refilled while the burst was spent: 1 s of it was
    # waited, 1 s more the refusal was held
    delay = caught.value.retry_delay
    assert delay is not None and 18.0 - refilled - 0.1 < delay <= 18.0


def _get(episode_id: str) -> episode_service_pb2.GetEpisodeRequest:
    return episode_service_pb2.GetEpisodeRequest(episode_id=episode_id)


def _memories(agent_id: str, count: int) -> memory_service_pb2.CreateMemoriesRequest:
    notes = [
        memory_service_pb2.MemoryInput(text=f"fact number {n} about tea", kind=memory_pb2.MEMORY_KIND_FACT)
        for n in range(count)
    ]
    return memory_service_pb2.CreateMemoriesRequest(agent_id=agent_id, user_id="user-1", memories=notes)
