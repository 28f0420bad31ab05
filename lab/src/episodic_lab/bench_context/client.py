"""The bench's client side: the agent it measures, and each call it makes as one small method
over the generated stubs. BuildContext reads the whole stream and returns its report."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

import grpc

from episodic.v1 import (
    agent_pb2,
    agent_service_pb2,
    context_pb2,
    context_service_pb2,
    diagnostics_service_pb2,
    episode_pb2,
    episode_service_pb2,
)
from episodic.v1.agent_service_pb2_grpc import AgentServiceStub
from episodic.v1.context_service_pb2_grpc import ContextServiceStub
from episodic.v1.diagnostics_service_pb2_grpc import DiagnosticsServiceStub
from episodic.v1.episode_service_pb2_grpc import EpisodeServiceStub

if TYPE_CHECKING:
    from episodic.v1.context_service_pb2_grpc import ContextServiceAsyncStub
    from episodic.v1.diagnostics_service_pb2_grpc import DiagnosticsServiceAsyncStub
    from episodic.v1.episode_service_pb2_grpc import EpisodeServiceAsyncStub

BUDGET_TOKENS = 4096
RECALL_TOP_K = 10
BATCH_MESSAGES = 500  # the server's default max_batch_messages
USER_MESSAGE = "What did Sam say about the quarterly report, and is the Friday deadline still on?"
ECHO_PAYLOAD = USER_MESSAGE.encode()  # Echo carries as many bytes as the BuildContext request
RecallMode: TypeAlias = "agent_pb2.RecallMode.ValueType"
RECENCY = agent_pb2.RECALL_MODE_RECENCY
HYBRID = agent_pb2.RECALL_MODE_HYBRID


@dataclass(frozen=True, slots=True)
class Client:
    episodes: EpisodeServiceAsyncStub
    context: ContextServiceAsyncStub
    diagnostics: DiagnosticsServiceAsyncStub
    agent_id: str

    @classmethod
    async def with_new_agent(cls, channel: grpc.aio.Channel) -> Client:
        """The measured agent: a 4096-token budget, RECENCY recall of the top 10."""
        agent_id = f"bench-context-{uuid.uuid4().hex[:8]}"
        memory = agent_pb2.MemoryConfig(
            max_working_memory_tokens=BUDGET_TOKENS, recall_mode=RECENCY, recall_top_k=RECALL_TOP_K
        )
        agent = agent_pb2.Agent(
            agent_id=agent_id, system_prompt="Be brief.", model="gpt-4o", memory_config=memory
        )
        await AgentServiceStub(channel).CreateAgent(agent_service_pb2.CreateAgentRequest(agent=agent))
        stubs = (EpisodeServiceStub(channel), ContextServiceStub(channel), DiagnosticsServiceStub(channel))
        return cls(*stubs, agent_id)

    async def open(self, user_id: str) -> str:
        request = episode_service_pb2.OpenEpisodeRequest(agent_id=self.agent_id, user_id=user_id)
        return (await self.episodes.OpenEpisode(request)).episode.episode_id

    async def add(self, episode_id: str, messages: Sequence[episode_pb2.MessageInput]) -> None:
        for start in range(0, len(messages), BATCH_MESSAGES):
            batch = messages[start : start + BATCH_MESSAGES]
            await self.episodes.AddMessages(
                episode_service_pb2.AddMessagesRequest(episode_id=episode_id, messages=batch)
            )

    async def close_digested(self, episode_id: str) -> None:
        request = episode_service_pb2.CloseEpisodeRequest(episode_id=episode_id, wait_for_digest=True)
        await self.episodes.CloseEpisode(request)

    async def build(self, episode_id: str, recall: RecallMode = RECENCY) -> context_pb2.ContextReport:
        """Renders the next turn without appending USER_MESSAGE, so the log stays as it is."""
        request = context_service_pb2.BuildContextRequest(
            episode_id=episode_id,
            user_message=USER_MESSAGE,
            memory_config=agent_pb2.MemoryConfig(recall_mode=recall),
        )
        report = context_pb2.ContextReport()
        async for frame in self.context.BuildContext(request):
            if frame.HasField("report"):
                report = frame.report
        return report

    async def echo(self) -> None:
        await self.diagnostics.Echo(diagnostics_service_pb2.EchoRequest(payload=ECHO_PAYLOAD))
