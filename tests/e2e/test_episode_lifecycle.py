"""The happy path over the wire: agent, episode, messages, scrollback, close."""

from __future__ import annotations

import grpc
import pytest

from episodic.v1 import agent_pb2, agent_service_pb2, episode_pb2, episode_service_pb2
from episodic.v1.agent_service_pb2_grpc import AgentServiceStub
from episodic.v1.episode_service_pb2_grpc import EpisodeServiceStub
from tests.conftest import unique
from tests.server_harness import KEY_A, RunningServer, bearer

AUTH = bearer(KEY_A)


async def create_agent(channel: grpc.aio.Channel, model: str = "gpt-4o") -> str:
    agent_id = unique("agent")
    request = agent_service_pb2.CreateAgentRequest(
        agent=agent_pb2.Agent(agent_id=agent_id, system_prompt="Be brief.", model=model)
    )
    await AgentServiceStub(channel).CreateAgent(request, metadata=AUTH)
    return agent_id


def user_message(text: str, client_id: str = "") -> episode_pb2.MessageInput:
    return episode_pb2.MessageInput(role=episode_pb2.ROLE_USER, content=text, client_message_id=client_id)


async def test_a_conversation_is_logged_in_order_and_read_back_newest_first(server: RunningServer) -> None:
    async with server.channel() as channel:
        stub = EpisodeServiceStub(channel)
        agent_id = await create_agent(channel)
        opened = await stub.OpenEpisode(
            episode_service_pb2.OpenEpisodeRequest(agent_id=agent_id, user_id="mary"), metadata=AUTH
        )
        episode_id = opened.episode.episode_id
        assert opened.created and opened.episode.state == episode_pb2.Episode.STATE_OPEN
        for i in range(5):
            added = await stub.AddMessage(
                episode_service_pb2.AddMessageRequest(
                    episode_id=episode_id, message=user_message(f"turn {i}")
                ),
                metadata=AUTH,
            )
            assert added.message.seq == i + 1
            assert added.message.token_count > 0
        page = await stub.ListMessages(
            episode_service_pb2.ListMessagesRequest(episode_id=episode_id, page_size=3), metadata=AUTH
        )
        assert [m.seq for m in page.messages] == [5, 4, 3]
        rest = await stub.ListMessages(
            episode_service_pb2.ListMessagesRequest(
                episode_id=episode_id, page_size=3, page_token=page.next_page_token
            ),
            metadata=AUTH,
        )
        assert [m.seq for m in rest.messages] == [2, 1] and rest.next_page_token == ""
        closed = await stub.CloseEpisode(
            episode_service_pb2.CloseEpisodeRequest(episode_id=episode_id), metadata=AUTH
        )
        assert closed.episode.state == episode_pb2.Episode.STATE_CLOSED
        assert closed.episode.close_reason == episode_pb2.CLOSE_REASON_USER_ENDED
        assert closed.episode.message_count == 5


async def test_missing_credentials_are_unauthenticated(server: RunningServer) -> None:
    async with server.channel() as channel:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await EpisodeServiceStub(channel).GetEpisode(
                episode_service_pb2.GetEpisodeRequest(episode_id="x")
            )
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
