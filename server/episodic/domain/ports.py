"""Ports the domain needs from the outside world. Adapters live in store/ and tokens/;
fakes for tests live in tests/fakes.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from episodic.domain.episodes import OpenRequest
from episodic.domain.log import PreparedMessage
from episodic.domain.model import Agent, CloseReason, Episode, EpisodeState, Message

Clock = Callable[[], datetime]
IdFactory = Callable[[], str]


@dataclass(frozen=True, slots=True)
class EpisodeFilter:
    agent_id: str = ""
    user_id: str = ""
    state: EpisodeState | None = None


@dataclass(frozen=True, slots=True)
class EpisodeCursor:
    """Keyset position in the newest-first episode listing."""

    started_at: datetime
    episode_id: str


class TokenCounter(Protocol):
    """Counts tokens with a named tiktoken-compatible encoding; never downloads anything."""

    def supported_encodings(self) -> frozenset[str]: ...

    def encoding_for_model(self, model: str) -> str: ...

    def count(self, text: str, encoding: str) -> int: ...


class AgentStore(Protocol):
    async def create_agent(self, agent: Agent) -> Agent: ...

    async def get_agent(self, tenant_id: str, agent_id: str) -> Agent: ...

    async def update_agent(
        self, tenant_id: str, agent_id: str, change: Callable[[Agent], Agent]
    ) -> Agent: ...

    async def list_agents(self, tenant_id: str, after: str | None, limit: int) -> list[Agent]: ...


class EpisodeStore(Protocol):
    async def open_episode(
        self, tenant_id: str, request: OpenRequest, token_encoding: str
    ) -> tuple[Episode, bool]: ...

    async def append(
        self, tenant_id: str, episode_id: str, batch: Sequence[PreparedMessage]
    ) -> list[tuple[Message, bool]]: ...

    async def close_episode(
        self, tenant_id: str, episode_id: str, reason: CloseReason, note: str, ended_at: datetime
    ) -> Episode: ...

    async def get_episode(self, tenant_id: str, episode_id: str) -> Episode: ...

    async def list_episodes(
        self, tenant_id: str, where: EpisodeFilter, after: EpisodeCursor | None, limit: int
    ) -> list[Episode]: ...

    async def list_messages(
        self, tenant_id: str, episode_id: str, before_seq: int | None, limit: int
    ) -> list[Message]: ...
