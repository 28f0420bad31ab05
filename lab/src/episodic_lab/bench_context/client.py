"""The bench's client side: the agent it measures, and each call it makes as one small method
over `episodic_client`. BuildContext reads the whole stream and returns its report. Every
BuildContext, SearchEpisodes and Echo carries the next text of `messages` (a different one
per call unless it repeats), so Echo moves as many bytes as the calls it is compared with."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TypeAlias

from episodic_client import AsyncEpisodicClient
from episodic_client.v1 import agent_pb2, context_pb2, episode_pb2, episode_service_pb2
from episodic_lab.bench_context.messages import UserMessages

BUDGET_TOKENS = 4096
RECALL_TOP_K = 10
BATCH_MESSAGES = 500  # the server's default max_batch_messages
PAGE_SIZE = 1000  # the server's maximum ListMessages page
RecallMode: TypeAlias = "agent_pb2.RecallMode.ValueType"
RECENCY = agent_pb2.RECALL_MODE_RECENCY
HYBRID = agent_pb2.RECALL_MODE_HYBRID


@dataclass(frozen=True, slots=True)
class Client:
    client: AsyncEpisodicClient
    agent_id: str
    messages: UserMessages = field(default_factory=UserMessages)

    @classmethod
    async def with_new_agent(
        cls,
        client: AsyncEpisodicClient,
        messages: UserMessages | None = None,
        idle_timeout: timedelta | None = None,
    ) -> Client:
        """The measured agent: a 4096-token budget, RECENCY recall of the top 10; `idle_timeout`
        for runs whose logs must stay open longer than the server's default 30 minutes."""
        agent_id = f"bench-context-{uuid.uuid4().hex[:8]}"
        memory = agent_pb2.MemoryConfig(
            max_working_memory_tokens=BUDGET_TOKENS, recall_mode=RECENCY, recall_top_k=RECALL_TOP_K
        )
        if idle_timeout is not None:
            memory.idle_timeout.FromTimedelta(idle_timeout)
        await client.create_agent(agent_id, system_prompt="Be brief.", model="gpt-4o", memory_config=memory)
        return cls(client, agent_id, messages or UserMessages())

    async def open(self, user_id: str) -> str:
        return (await self.client.open_episode(self.agent_id, user_id)).episode.episode_id

    async def add(self, episode_id: str, messages: Sequence[episode_pb2.MessageInput]) -> None:
        for start in range(0, len(messages), BATCH_MESSAGES):
            await self.client.add_messages(episode_id, messages[start : start + BATCH_MESSAGES])

    async def append(self, episode_id: str, message: episode_pb2.MessageInput) -> None:
        """One AddMessage (a chat turn), not a batch."""
        await self.client.add_message(episode_id, message.role, message.content)

    async def seqs(self, episode_id: str) -> list[int]:
        """Every seq in the episode's log, page by page."""
        pages = self.client.iter_messages(episode_id, page_size=PAGE_SIZE)
        return [message.seq async for message in pages]

    async def close_digested(self, episode_id: str) -> None:
        await self.client.close_episode(episode_id, wait_for_digest=True)

    async def build(self, episode_id: str, recall: RecallMode = RECENCY) -> context_pb2.ContextReport:
        """Renders the next turn without appending its user message, so the log stays as it is."""
        memory = agent_pb2.MemoryConfig(recall_mode=recall)
        message = self.messages.next()
        built = await self.client.build_context(episode_id, user_message=message, memory_config=memory)
        return built.report

    async def search(self, user_id: str, mode: str) -> episode_service_pb2.SearchEpisodesResponse:
        """SearchEpisodes of the user's past episodes, the next message as the query, top 10 as
        BuildContext's recall."""
        query = self.messages.next()
        return await self.client.search_episodes(self.agent_id, user_id, query, mode=mode, top_k=RECALL_TOP_K)

    async def echo(self) -> None:
        await self.client.echo(self.messages.next().encode())
