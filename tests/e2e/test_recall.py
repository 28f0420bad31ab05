"""Closing makes a digest; SearchEpisodes recalls READY episodes of one user's scope."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from grpc_status import rpc_status

from episodic.v1 import agent_pb2, agent_service_pb2, episode_pb2, episode_service_pb2
from episodic.v1.agent_service_pb2_grpc import AgentServiceStub
from episodic.v1.episode_service_pb2_grpc import EpisodeServiceStub
from tests.conftest import unique
from tests.e2e.helpers import settled_digest
from tests.server_harness import KEY_A, KEY_B, RunningServer, bearer

if TYPE_CHECKING:
    from episodic.v1.episode_service_pb2_grpc import EpisodeServiceAsyncStub

AUTH = bearer(KEY_A)
pb = episode_service_pb2
# Weeks ago, within the default 90-day retention: a fixed date had fallen past it, and the
# server's retention sweep (its first one runs at start, when leadership is taken) could
# soft-delete the conversations while the test read them.
DAY0 = (datetime.now(UTC) - timedelta(days=30)).replace(hour=9, minute=0, second=0, microsecond=0)
CONVERSATIONS = [
    ["I booked a flight to Lisbon for the conference", "Great, the conference is in May"],
    ["My cat Miso needs a vet appointment", "The vet is open on Saturday mornings"],
    ["Please remind me to renew my passport", "Your passport renewal takes six weeks"],
]


def ts(value: datetime) -> Timestamp:
    out = Timestamp()
    out.FromDatetime(value)
    return out


async def remembered(channel: grpc.aio.Channel, user: str) -> tuple[str, list[str]]:
    """An agent with three closed, digested conversations of `user`, a day apart."""
    agent_id = unique("agent")
    agent = agent_pb2.Agent(agent_id=agent_id, model="gpt-4")
    await AgentServiceStub(channel).CreateAgent(
        agent_service_pb2.CreateAgentRequest(agent=agent), metadata=AUTH
    )
    stub = EpisodeServiceStub(channel)
    ids = [
        await converse(stub, agent_id, user, lines, DAY0 + timedelta(days=i))
        for i, lines in enumerate(CONVERSATIONS)
    ]
    return agent_id, ids


async def converse(
    stub: EpisodeServiceAsyncStub, agent_id: str, user: str, lines: list[str], day: datetime
) -> str:
    opened = await stub.OpenEpisode(
        pb.OpenEpisodeRequest(agent_id=agent_id, user_id=user, start_time=ts(day)), metadata=AUTH
    )
    episode_id = opened.episode.episode_id
    roles = [episode_pb2.ROLE_USER, episode_pb2.ROLE_ASSISTANT]
    messages = [episode_pb2.MessageInput(role=roles[i % 2], content=text) for i, text in enumerate(lines)]
    await stub.AddMessages(pb.AddMessagesRequest(episode_id=episode_id, messages=messages), metadata=AUTH)
    close = pb.CloseEpisodeRequest(episode_id=episode_id, end_time=ts(day + timedelta(hours=1)))
    await stub.CloseEpisode(close, metadata=AUTH)

    async def read() -> episode_pb2.Episode:
        return (await stub.GetEpisode(pb.GetEpisodeRequest(episode_id=episode_id), metadata=AUTH)).episode

    digest = await settled_digest(read)
    assert digest.state == episode_pb2.DIGEST_STATE_READY, digest
    return str(episode_id)


def search(agent_id: str, user: str, mode: int, query: str = "", **extra: object) -> pb.SearchEpisodesRequest:
    return pb.SearchEpisodesRequest(agent_id=agent_id, user_id=user, mode=mode, query=query, **extra)  # type: ignore[arg-type]


async def test_closing_makes_a_digest_with_summary_facts_and_embeddings(server: RunningServer) -> None:
    async with server.channel() as channel:
        _agent_id, ids = await remembered(channel, "mary")
        got = await EpisodeServiceStub(channel).GetEpisode(
            pb.GetEpisodeRequest(episode_id=ids[0]), metadata=AUTH
        )
    digest = got.episode.digest
    assert digest.state == episode_pb2.DIGEST_STATE_READY and digest.summary
    assert digest.embedding_model == "hashing-256" and digest.attempts == 1


async def test_recency_returns_newest_endings_first(server: RunningServer) -> None:
    async with server.channel() as channel:
        agent_id, ids = await remembered(channel, "mary")
        reply = await EpisodeServiceStub(channel).SearchEpisodes(
            search(agent_id, "mary", pb.SEARCH_MODE_RECENCY, top_k=2), metadata=AUTH
        )
    assert [s.episode_id for s in reply.snippets] == [ids[2], ids[1]]
    assert reply.snippets[0].signals == [pb.MATCH_SIGNAL_RECENCY] and reply.pending_digests == 0


@pytest.mark.parametrize("mode", [pb.SEARCH_MODE_SEMANTIC, pb.SEARCH_MODE_HYBRID])
async def test_meaningful_search_ranks_the_matching_conversation_first(
    server: RunningServer, mode: int
) -> None:
    async with server.channel() as channel:
        agent_id, ids = await remembered(channel, "mary")
        reply = await EpisodeServiceStub(channel).SearchEpisodes(
            search(agent_id, "mary", mode, "vet appointment for my cat"), metadata=AUTH
        )
    assert reply.snippets[0].episode_id == ids[1]
    assert reply.snippets[0].end_time.ToDatetime(tzinfo=UTC) == DAY0 + timedelta(days=1, hours=1)


async def test_a_time_range_keeps_only_episodes_that_ended_inside_it(server: RunningServer) -> None:
    async with server.channel() as channel:
        agent_id, ids = await remembered(channel, "mary")
        window = {"ended_after": ts(DAY0 + timedelta(days=1)), "ended_before": ts(DAY0 + timedelta(days=2))}
        reply = await EpisodeServiceStub(channel).SearchEpisodes(
            search(agent_id, "mary", pb.SEARCH_MODE_SEMANTIC, "passport flight vet", **window), metadata=AUTH
        )
    assert [s.episode_id for s in reply.snippets] == [ids[1]]


async def test_another_user_agent_or_tenant_sees_none_of_the_episodes(server: RunningServer) -> None:
    async with server.channel() as channel:
        stub = EpisodeServiceStub(channel)
        agent_id, _ = await remembered(channel, "mary")
        other_agent, _ = await remembered(channel, "bob")
        for agent, user, key in [(agent_id, "bob", KEY_A), (other_agent, "mary", KEY_A)]:
            reply = await stub.SearchEpisodes(
                search(agent, user, pb.SEARCH_MODE_HYBRID, "passport"), metadata=bearer(key)
            )
            assert list(reply.snippets) == []
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.SearchEpisodes(
                search(agent_id, "mary", pb.SEARCH_MODE_HYBRID, "passport"), metadata=bearer(KEY_B)
            )
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize(
    ("request_fields", "field"),
    [
        ({"mode": pb.SEARCH_MODE_RECENCY, "top_k": -1}, "top_k"),
        ({"mode": pb.SEARCH_MODE_RECENCY, "top_k": 100_000}, "top_k"),
        ({"mode": pb.SEARCH_MODE_SEMANTIC, "query": "  "}, "query"),
        ({"mode": pb.SEARCH_MODE_HYBRID}, "query"),
        ({"mode": pb.SEARCH_MODE_UNSPECIFIED}, "mode"),
        ({"mode": 42}, "mode"),
        ({"mode": pb.SEARCH_MODE_RECENCY, "ended_after": ts(DAY0), "ended_before": ts(DAY0)}, "ended_before"),
        ({"mode": pb.SEARCH_MODE_RECENCY, "user_id": ""}, "user_id"),
    ],
)
async def test_bad_search_requests_name_the_field(
    server: RunningServer, request_fields: dict[str, Any], field: str
) -> None:
    fields: dict[str, Any] = {"agent_id": "someone", "user_id": "mary", **request_fields}
    async with server.channel() as channel:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await EpisodeServiceStub(channel).SearchEpisodes(
                pb.SearchEpisodesRequest(**fields), metadata=AUTH
            )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    status = rpc_status.from_call(err.value)  # type: ignore[arg-type]
    assert status is not None and field in str(status.details)
