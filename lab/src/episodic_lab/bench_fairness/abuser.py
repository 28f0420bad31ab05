"""Tenant A's data, written before any phase so that no phase measures a fill: small open
episodes (flood, watches), an episode whose context renders to ~1 MB (unread-streams) and
a long episode of large messages for the inspector's "where did it go?" (inspector-searches)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from episodic_client import AsyncEpisodicClient, MemoryConfig, MessageInput, message_input
from episodic_lab.bench_fairness.texts import prose

USER = "a-user"
SMALL_EPISODES = 24  # watches spread over them: at most 100 watchers per episode by default
SMALL_MESSAGES = 10
# ~1 MB of context: 40 messages of 25 KB, rendered whole by an agent with a big window.
BIG_MESSAGES, BIG_CHARACTERS = 40, 25_000
# The budget may not pass the window's ceiling (70 % by default): 280,000 of 400,000.
BIG_WINDOW = MemoryConfig(context_window_tokens=400_000, max_working_memory_tokens=280_000)
# The inspector's long episode: 2,000 messages of 20 KB, written 150 a call (~3 MB, under 4 MB).
WHERE_MESSAGES, WHERE_CHARACTERS, WHERE_BATCH = 2_000, 20_000, 150
WHERE_PHRASE = "zanzibar"
WHERE_EVERY = 100  # one message in this many holds the phrase


@dataclass(slots=True)
class AbuserData:
    client: AsyncEpisodicClient
    agent_id: str = "a-agent"
    big_agent_id: str = "a-big-agent"
    episodes: list[str] = field(default_factory=list)
    big_episode: str = ""
    where_episode: str = ""
    rng: random.Random = field(default_factory=lambda: random.Random(1))

    async def prepare(self, abuses: Sequence[str]) -> None:
        await self.client.create_agent(self.agent_id, model="gpt-4o")
        await self.client.create_agent(self.big_agent_id, model="gpt-4o", memory_config=BIG_WINDOW)
        for _ in range(SMALL_EPISODES):
            self.episodes.append(await self._fill(self.agent_id, SMALL_MESSAGES, 200))
        if "unread-streams" in abuses:
            self.big_episode = await self._fill(self.big_agent_id, BIG_MESSAGES, BIG_CHARACTERS)
        if "inspector-searches" in abuses:
            self.where_episode = await self._fill(self.big_agent_id, WHERE_MESSAGES, WHERE_CHARACTERS)

    async def _fill(self, agent_id: str, messages: int, characters: int) -> str:
        episode = (await self.client.open_episode(agent_id, USER)).episode.episode_id
        for start in range(0, messages, WHERE_BATCH):
            count = min(WHERE_BATCH, messages - start)
            batch = [self._message(start + i, characters) for i in range(count)]
            await self.client.add_messages(episode, batch)
        return episode

    def _message(self, number: int, characters: int) -> MessageInput:
        text = prose(self.rng, characters)
        if number % WHERE_EVERY == 0:
            text = f"{WHERE_PHRASE} {text}"
        return message_input(("user", "assistant")[number % 2], text)
