"""What the workers call: Echo (the baseline) and AddMessage, either one episode per
worker (appends concurrent across episodes) or all workers on one episode (contention)."""

from __future__ import annotations

import itertools
import uuid
from collections import Counter
from dataclasses import dataclass, field

from episodic_client import AsyncEpisodicClient
from episodic_lab.bench.load import Call

# About 200 characters, like a short chat turn; Echo sends the same number of bytes.
CONTENT = (
    "Could you remind me what we decided about the quarterly report last week? I think "
    "the deadline moved to Friday, and Sam was going to draft the summary section first. "
    "Is that still the plan?"
)
ECHO_PAYLOAD = CONTENT.encode()


@dataclass(slots=True)
class Session:
    """One backend's client side: the client, the bench agent, and every acknowledged append."""

    client: AsyncEpisodicClient
    agent_id: str = field(default_factory=lambda: f"bench-{uuid.uuid4().hex[:8]}")
    acknowledged: Counter[str] = field(default_factory=Counter)  # episode_id -> AddMessage OKs
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    async def create_agent(self) -> None:
        await self.client.create_agent(self.agent_id, system_prompt="Be brief.", model="gpt-4o")

    def echo(self) -> Call:
        async def call(_worker: int) -> None:
            await self.client.echo(ECHO_PAYLOAD)

        return call

    async def add_message(self, episodes: int) -> Call:
        """Appends on `episodes` fresh episodes; worker i writes to episode i mod episodes."""
        ids = [await self._open_episode() for _ in range(episodes)]
        self.acknowledged.update(dict.fromkeys(ids, 0))  # checked even if no call succeeds

        async def call(worker: int) -> None:
            episode_id = ids[worker % episodes]
            # A unique client_message_id per call: the server's dedup lookup is part of the cost.
            await self.client.add_message(
                episode_id, "user", CONTENT, client_message_id=f"m{next(self._ids)}"
            )
            self.acknowledged[episode_id] += 1

        return call

    async def _open_episode(self) -> str:
        return (await self.client.open_episode(self.agent_id, "bench-user")).episode.episode_id
