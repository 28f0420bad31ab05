"""The spoken messages of recalled episodes, read once and remembered: HYBRID recall scores
their passages, BuildContext quotes them. Both ask for the same few episodes turn after turn."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from episodic.domain.excerpts import Transcript, spoken
from episodic.domain.ports.episodes import SpokenMessages
from episodic.state.spoken_cache import SpokenCache

SOURCE_MESSAGES = 400  # per episode: bounds the read and the scoring, whatever its length


@dataclass(frozen=True, slots=True, kw_only=True)
class Passages:
    messages: SpokenMessages
    cache: SpokenCache
    per_episode: int = SOURCE_MESSAGES

    async def of(self, tenant_id: str, episode_ids: Sequence[str]) -> dict[str, Transcript]:
        """Episode id -> its spoken messages, in the order asked; from the cache, and what it
        lacks in one read."""
        found = {e: held for e in episode_ids if (held := self.cache.get((tenant_id, e))) is not None}
        missing = [e for e in episode_ids if e not in found]
        if missing:
            read = await self.messages.spoken(tenant_id, missing, self.per_episode)
            for episode_id in missing:
                found[episode_id] = spoken(read.get(episode_id, []))
                self.cache.put((tenant_id, episode_id), found[episode_id])
        return {e: found[e] for e in episode_ids}
