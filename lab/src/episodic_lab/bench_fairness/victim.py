"""Tenant B, the victim: an agent with a few closed, digested episodes (for SearchEpisodes),
an episode with some history (for BuildContext, a new user message each turn, nothing
appended so its cost stays the same from phase to phase) and a chat episode it appends to."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from episodic_client import AsyncEpisodicClient, message_input
from episodic_lab.bench_context.messages import UserMessages
from episodic_lab.bench_fairness.options import B_METHODS
from episodic_lab.bench_fairness.texts import prose

METHODS = B_METHODS
ECHO = "Echo"
USER = "b-user"
DIGESTED_EPISODES = 5
HISTORY_MESSAGES = 40
MESSAGE_CHARACTERS = 200  # a short chat turn
ECHO_PAYLOAD = b"x" * MESSAGE_CHARACTERS


@dataclass(slots=True)
class Victim:
    client: AsyncEpisodicClient
    agent_id: str = "b-agent"
    history_episode: str = ""
    chat_episode: str = ""
    texts: UserMessages = field(default_factory=UserMessages)
    rng: random.Random = field(default_factory=lambda: random.Random(2))

    async def prepare(self) -> None:
        await self.client.create_agent(self.agent_id, system_prompt="Be brief.", model="gpt-4o")
        for _ in range(DIGESTED_EPISODES):
            episode_id = await self._episode_with(6)
            await self.client.close_episode(episode_id, wait_for_digest=True)
        self.history_episode = await self._episode_with(HISTORY_MESSAGES)
        self.chat_episode = await self._episode_with(0)

    def calls(self) -> dict[str, Callable[[], Awaitable[object]]]:
        """One call of each measured method (and Echo, the reference), by name."""
        return {
            "AddMessage": self._add,
            "BuildContext": self._build,
            "SearchEpisodes": self._search,
            ECHO: self._echo,
        }

    async def _add(self) -> object:
        return await self.client.add_message(self.chat_episode, "user", self.texts.next())

    async def _build(self) -> object:
        return await self.client.build_context(self.history_episode, user_message=self.texts.next())

    async def _search(self) -> object:
        return await self.client.search_episodes(self.agent_id, USER, self.texts.next(), top_k=5)

    async def _echo(self) -> object:
        return await self.client.echo(ECHO_PAYLOAD)

    async def _episode_with(self, messages: int) -> str:
        episode = (await self.client.open_episode(self.agent_id, USER)).episode.episode_id
        roles = ("user", "assistant")
        batch = [message_input(roles[i % 2], prose(self.rng, MESSAGE_CHARACTERS)) for i in range(messages)]
        if batch:
            await self.client.add_messages(episode, batch)
        return episode
