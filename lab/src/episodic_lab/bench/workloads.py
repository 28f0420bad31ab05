"""What the workers call: Echo (the baseline) and AddMessage, either one episode per
worker (appends concurrent across episodes) or all workers on one episode (contention)."""

from __future__ import annotations

import itertools
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import grpc

from episodic.v1 import (
    agent_pb2,
    agent_service_pb2,
    diagnostics_service_pb2,
    episode_pb2,
    episode_service_pb2,
)
from episodic.v1.agent_service_pb2_grpc import AgentServiceStub
from episodic.v1.diagnostics_service_pb2_grpc import DiagnosticsServiceStub
from episodic.v1.episode_service_pb2_grpc import EpisodeServiceStub
from episodic_lab.bench.load import Call

if TYPE_CHECKING:
    from episodic.v1.episode_service_pb2_grpc import EpisodeServiceAsyncStub

# About 200 characters, like a short chat turn; Echo sends the same number of bytes.
CONTENT = (
    "Could you remind me what we decided about the quarterly report last week? I think "
    "the deadline moved to Friday, and Sam was going to draft the summary section first. "
    "Is that still the plan?"
)
ECHO_PAYLOAD = CONTENT.encode()


@dataclass(slots=True)
class Session:
    """One backend's client side: stubs, the bench agent, and every acknowledged append."""

    channel: grpc.aio.Channel
    agent_id: str = field(default_factory=lambda: f"bench-{uuid.uuid4().hex[:8]}")
    acknowledged: Counter[str] = field(default_factory=Counter)  # episode_id -> AddMessage OKs
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    async def create_agent(self) -> None:
        agent = agent_pb2.Agent(agent_id=self.agent_id, system_prompt="Be brief.", model="gpt-4o")
        await AgentServiceStub(self.channel).CreateAgent(agent_service_pb2.CreateAgentRequest(agent=agent))

    def echo(self) -> Call:
        stub = DiagnosticsServiceStub(self.channel)
        request = diagnostics_service_pb2.EchoRequest(payload=ECHO_PAYLOAD)

        async def call(_worker: int) -> None:
            await stub.Echo(request)

        return call

    async def add_message(self, episodes: int) -> Call:
        """Appends on `episodes` fresh episodes; worker i writes to episode i mod episodes."""
        stub = EpisodeServiceStub(self.channel)
        ids = [await self._open_episode(stub) for _ in range(episodes)]
        self.acknowledged.update(dict.fromkeys(ids, 0))  # checked even if no call succeeds

        async def call(worker: int) -> None:
            episode_id = ids[worker % episodes]
            await stub.AddMessage(self._append_request(episode_id))
            self.acknowledged[episode_id] += 1

        return call

    async def _open_episode(self, stub: EpisodeServiceAsyncStub) -> str:
        request = episode_service_pb2.OpenEpisodeRequest(agent_id=self.agent_id, user_id="bench-user")
        return (await stub.OpenEpisode(request)).episode.episode_id

    def _append_request(self, episode_id: str) -> episode_service_pb2.AddMessageRequest:
        # A unique client_message_id per call: the server's dedup lookup is part of the cost.
        message = episode_pb2.MessageInput(
            role=episode_pb2.ROLE_USER, content=CONTENT, client_message_id=f"m{next(self._ids)}"
        )
        return episode_service_pb2.AddMessageRequest(episode_id=episode_id, message=message)
