"""API keys restricted to agents: a key may use its agents fully; naming another agent is
PERMISSION_DENIED, another agent's episodes and model calls are NOT_FOUND (as if they did not
exist), and listings show its agents only. A key of the whole tenant sees everything."""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import grpc
import pytest
from google.protobuf import field_mask_pb2

from episodic.edges.keys import config_line
from episodic.v1 import (
    agent_pb2,
    agent_service_pb2,
    context_service_pb2,
    episode_pb2,
    episode_service_pb2,
    memory_pb2,
    memory_service_pb2,
)
from tests.conftest import unique
from tests.e2e.context_helpers import build, get_call, list_calls
from tests.e2e.helpers import Client, error_reason, expect_code, user_message
from tests.server_harness import KEY_A, TENANT_A, running_server, settings_for

ms = memory_service_pb2
KEY_OF_ALPHA = "epk_test_tenant_a_alpha_only_0123456789"
Calls = dict[str, Callable[[], Awaitable[object]]]


@dataclass(frozen=True)
class World:
    """One tenant, agents alpha and beta, an episode with a model call in each. `alpha_key`
    may use alpha (and `spare`, which does not exist); `tenant_key` may use every agent."""

    alpha_key: Client
    tenant_key: Client
    alpha: str
    beta: str
    spare: str
    alpha_episode: str
    beta_episode: str
    beta_call: str


@pytest.fixture
def database_url(sqlite_url: str) -> str:
    """One backend: what these tests check is the same over either store (the stores are
    held to one behaviour on both by tests/contracts and tests/integration)."""
    return sqlite_url


async def _episode_with_a_call(client: Client, agent_id: str) -> tuple[str, str]:
    episode_id = await client.open_episode(agent_id)
    await client.add(episode_id, user_message("hello"))
    built = await build(client, episode_id, user_message="how are you?")
    return episode_id, built.report.model_call_id


@pytest.fixture
async def world(database_url: str) -> AsyncIterator[World]:
    alpha, beta, spare = unique("alpha"), unique("beta"), unique("spare")
    restricted = config_line(TENANT_A, KEY_OF_ALPHA, [alpha, spare])
    settings = settings_for(database_url)
    settings = settings_for(database_url, api_keys=f"{settings.api_keys},{restricted}")
    async with running_server(settings) as server, server.channel() as channel:
        alpha_key, tenant_key = Client.of(channel, KEY_OF_ALPHA), Client.of(channel, KEY_A)
        await alpha_key.create_agent(alpha)  # a restricted key may create its own agents
        await tenant_key.create_agent(beta)
        alpha_episode, _ = await _episode_with_a_call(alpha_key, alpha)
        beta_episode, beta_call = await _episode_with_a_call(tenant_key, beta)
        yield World(alpha_key, tenant_key, alpha, beta, spare, alpha_episode, beta_episode, beta_call)


async def test_a_key_restricted_to_an_agent_can_do_everything_with_that_agent(world: World) -> None:
    client, alpha = world.alpha_key, world.alpha
    await client.agents.GetAgent(_agent(alpha), metadata=client.auth)
    await client.agents.UpdateAgent(_rename(alpha), metadata=client.auth)
    episode_id = await client.open_episode(alpha)
    await client.add(episode_id, user_message("first"), user_message("second"))
    assert [m.content for m in await client.log_of(episode_id)] == ["first", "second"]
    call_id = (await build(client, episode_id)).report.model_call_id
    assert (await get_call(client, call_id)).episode_id == episode_id
    assert [c.model_call_id for c in await list_calls(client, episode_id)] == [call_id]
    await client.context.RecordModelReply(_reply(call_id), metadata=client.auth)
    await client.episodes.SearchEpisodes(_search(alpha), metadata=client.auth)
    closed = await client.episodes.CloseEpisode(_close(episode_id), metadata=client.auth)
    assert closed.episode.state == episode_pb2.Episode.STATE_CLOSED


async def test_a_restricted_key_is_denied_every_agent_it_names_but_may_not_use(world: World) -> None:
    client, beta, auth = world.alpha_key, world.beta, world.alpha_key.auth
    ghost = unique("ghost")  # permission is checked before existence (AIP-193)
    calls: Calls = {
        "GetAgent": lambda: client.agents.GetAgent(_agent(beta), metadata=auth),
        "GetAgent (no such agent)": lambda: client.agents.GetAgent(_agent(ghost), metadata=auth),
        "CreateAgent": lambda: client.create_agent(ghost),
        "UpdateAgent": lambda: client.agents.UpdateAgent(_rename(beta), metadata=auth),
        "OpenEpisode": lambda: client.open_episode(beta),
        "SearchEpisodes": lambda: client.episodes.SearchEpisodes(_search(beta), metadata=auth),
        "ListEpisodes": lambda: client.episodes.ListEpisodes(_episodes_of(beta), metadata=auth),
    }
    assert await _codes(calls) == dict.fromkeys(calls, "PERMISSION_DENIED")


async def test_a_restricted_key_finds_no_episode_or_model_call_of_another_agent(world: World) -> None:
    client, auth, episode, call = world.alpha_key, world.alpha_key.auth, world.beta_episode, world.beta_call
    one = episode_service_pb2.AddMessageRequest(episode_id=episode, message=user_message("sneaked in"))
    calls: Calls = {
        "GetEpisode": lambda: client.get_episode(episode),
        "AddMessage": lambda: client.episodes.AddMessage(one, metadata=auth),
        "AddMessages": lambda: client.add(episode, user_message("sneaked in")),
        "ListMessages": lambda: client.episodes.ListMessages(_messages_of(episode), metadata=auth),
        "CloseEpisode": lambda: client.episodes.CloseEpisode(_close(episode), metadata=auth),
        "BuildContext": lambda: build(client, episode, user_message="sneaked in", append_user_message=True),
        "ListModelCalls": lambda: list_calls(client, episode),
        "GetModelCall": lambda: get_call(client, call),
        "RecordModelReply": lambda: client.context.RecordModelReply(_reply(call), metadata=auth),
    }
    assert await _codes(calls) == dict.fromkeys(calls, "NOT_FOUND")
    await _untouched(world)


async def test_another_agents_episode_looks_exactly_like_a_missing_one(world: World) -> None:
    other = await _missing(world.alpha_key.get_episode(world.beta_episode))
    absent = await _missing(world.alpha_key.get_episode(world.beta_episode + "-nope"))
    assert error_reason(other) == error_reason(absent) == "EPISODE_NOT_FOUND"
    assert other.details() == f"episode {world.beta_episode!r} not found"


async def test_opening_another_agents_episode_id_answers_as_an_unused_id_does(world: World) -> None:
    taken = await _open(world.alpha_key, world.alpha, world.beta_episode)
    unused = await _open(world.alpha_key, world.alpha, unique("ep-unused"))
    assert _shape(taken) == _shape(unused) == (True, world.alpha, "mary", 0, 35)
    assert taken.episode.episode_id != world.beta_episode
    await _untouched(world)


async def test_a_restricted_key_retries_an_open_by_the_id_it_named(world: World) -> None:
    named = unique("conversation")
    first = await _open(world.alpha_key, world.alpha, named)
    retried = await _open(world.alpha_key, world.alpha, named)
    by_its_id = await _open(world.alpha_key, world.alpha, first.episode.episode_id)
    assert (first.created, retried.created, by_its_id.created) == (True, False, False)
    assert first.episode.episode_id == retried.episode.episode_id == by_its_id.episode.episode_id
    own = await _open(world.alpha_key, world.alpha, world.alpha_episode)
    assert (own.created, own.episode.episode_id) == (False, world.alpha_episode)


async def test_creating_another_agents_memory_id_answers_as_an_unused_id_does(world: World) -> None:
    taken = unique("mem-taken")
    theirs = await _remember(world.tenant_key, world.beta, taken, "Owns a red boat")
    assert theirs.memory.memory_id == taken
    over_theirs = await _remember(world.alpha_key, world.alpha, taken, "Likes green tea")
    unused = await _remember(world.alpha_key, world.alpha, unique("mem-unused"), "Reads Portuguese poetry")
    for made in (over_theirs, unused):
        assert made.outcome == memory_service_pb2.MEMORY_OUTCOME_CREATED
        assert made.memory.memory_id.startswith("mem_") and made.memory.agent_id == world.alpha
    assert over_theirs.memory.memory_id != taken
    again = await _remember(world.alpha_key, world.alpha, taken, "Likes green tea")
    assert (again.outcome, again.memory.memory_id) == (
        memory_service_pb2.MEMORY_OUTCOME_UNCHANGED,
        over_theirs.memory.memory_id,
    )
    still = await world.tenant_key.memories.GetMemory(
        memory_service_pb2.GetMemoryRequest(memory_id=taken), metadata=world.tenant_key.auth
    )
    assert (still.memory.agent_id, still.memory.text) == (world.beta, "Owns a red boat")


async def test_a_key_of_the_whole_tenant_opens_the_id_it_names(world: World) -> None:
    named = unique("ep-named")
    assert (await _open(world.tenant_key, world.alpha, named)).episode.episode_id == named
    taken = _open(world.tenant_key, world.alpha, world.beta_episode)
    await expect_code(taken, grpc.StatusCode.ALREADY_EXISTS)


async def test_listings_under_a_restricted_key_show_only_its_agents(world: World) -> None:
    restricted, everything = world.alpha_key, world.tenant_key
    assert await _agents_seen(restricted) == {world.alpha}
    assert {world.alpha, world.beta} <= await _agents_seen(everything)
    assert await _episodes_seen(restricted) == {world.alpha_episode}
    assert {world.alpha_episode, world.beta_episode} <= await _episodes_seen(everything)


async def test_a_key_of_the_whole_tenant_uses_every_agent(world: World) -> None:
    client = world.tenant_key
    for episode_id in (world.alpha_episode, world.beta_episode):
        assert (await client.get_episode(episode_id)).episode_id == episode_id
        await client.add(episode_id, user_message("more"))
    assert (await get_call(client, world.beta_call)).model_call_id == world.beta_call
    await client.episodes.SearchEpisodes(_search(world.alpha), metadata=client.auth)


async def _remember(client: Client, agent_id: str, memory_id: str, text: str) -> ms.MemoryResult:
    memory = ms.MemoryInput(memory_id=memory_id, text=text, kind=memory_pb2.MEMORY_KIND_FACT)
    request = ms.CreateMemoriesRequest(
        agent_id=agent_id, user_id="mary", placement=ms.MEMORY_PLACEMENT_EAGER, memories=[memory]
    )
    (made,) = (await client.memories.CreateMemories(request, metadata=client.auth)).results
    return made


async def _open(client: Client, agent_id: str, episode_id: str) -> episode_service_pb2.OpenEpisodeResponse:
    request = episode_service_pb2.OpenEpisodeRequest(agent_id=agent_id, user_id="mary", episode_id=episode_id)
    return await client.episodes.OpenEpisode(request, metadata=client.auth)


def _shape(opened: episode_service_pb2.OpenEpisodeResponse) -> tuple[bool, str, str, int, int]:
    """Everything of an answer but its fresh id and times."""
    episode = opened.episode
    return opened.created, episode.agent_id, episode.user_id, episode.message_count, len(episode.episode_id)


async def _codes(calls: Calls) -> dict[str, str]:
    """Each call's status code name ("OK" if it succeeded), so a failure names every leak."""
    found: dict[str, str] = {}
    for name, call in calls.items():
        try:
            await call()
            found[name] = "OK"
        except grpc.aio.AioRpcError as err:
            found[name] = err.code().name
    return found


async def _missing(call: Awaitable[object]) -> grpc.aio.AioRpcError:
    return await expect_code(call, grpc.StatusCode.NOT_FOUND)


async def _untouched(world: World) -> None:
    """Nothing the refused calls asked for was written."""
    episode = await world.tenant_key.get_episode(world.beta_episode)
    assert episode.state == episode_pb2.Episode.STATE_OPEN and episode.message_count == 1
    assert not (await get_call(world.tenant_key, world.beta_call)).HasField("reply")


async def _agents_seen(client: Client) -> set[str]:
    """One large page: on PostgreSQL the tenant also holds other tests' agents and episodes."""
    request = agent_service_pb2.ListAgentsRequest(page_size=1000)
    page = await client.agents.ListAgents(request, metadata=client.auth)
    return {a.agent_id for a in page.agents}


async def _episodes_seen(client: Client) -> set[str]:
    request = episode_service_pb2.ListEpisodesRequest(page_size=1000)
    page = await client.episodes.ListEpisodes(request, metadata=client.auth)
    return {e.episode_id for e in page.episodes}


def _rename(agent_id: str) -> agent_service_pb2.UpdateAgentRequest:
    return agent_service_pb2.UpdateAgentRequest(
        agent=agent_pb2.Agent(agent_id=agent_id, display_name="renamed"),
        update_mask=field_mask_pb2.FieldMask(paths=["display_name"]),
    )


def _search(agent_id: str) -> episode_service_pb2.SearchEpisodesRequest:
    return episode_service_pb2.SearchEpisodesRequest(
        agent_id=agent_id, user_id="mary", mode=episode_service_pb2.SEARCH_MODE_RECENCY
    )


def _agent(agent_id: str) -> agent_service_pb2.GetAgentRequest:
    return agent_service_pb2.GetAgentRequest(agent_id=agent_id)


def _episodes_of(agent_id: str) -> episode_service_pb2.ListEpisodesRequest:
    return episode_service_pb2.ListEpisodesRequest(agent_id=agent_id)


def _messages_of(episode_id: str) -> episode_service_pb2.ListMessagesRequest:
    return episode_service_pb2.ListMessagesRequest(episode_id=episode_id)


def _close(episode_id: str) -> episode_service_pb2.CloseEpisodeRequest:
    return episode_service_pb2.CloseEpisodeRequest(episode_id=episode_id)


def _reply(model_call_id: str) -> context_service_pb2.RecordModelReplyRequest:
    return context_service_pb2.RecordModelReplyRequest(
        model_call_id=model_call_id, input_tokens=10, output_tokens=5
    )


async def test_a_restricted_key_exports_only_its_agents_data(world: World) -> None:
    restricted = world.alpha_key
    request = episode_service_pb2.ExportUserRequest(user_id="mary")
    responses = [r async for r in restricted.episodes.ExportUser(request, metadata=restricted.auth)]
    records = [json.loads(line) for r in responses for line in r.records]
    assert {r["agent_id"] for r in records if r["type"] == "episode"} == {world.alpha}
    other = episode_service_pb2.ExportUserRequest(user_id="mary", agent_id=world.beta)
    denied = await expect_code(
        _drain(restricted.episodes.ExportUser(other, metadata=restricted.auth)),
        grpc.StatusCode.PERMISSION_DENIED,
    )
    assert error_reason(denied) == "AGENT_NOT_ALLOWED"


async def _drain(stream: AsyncIterable[object]) -> None:
    async for _ in stream:
        pass
