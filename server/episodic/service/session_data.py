"""Session data: a JSON object kept with one episode (merge-patched, versioned by etag,
optionally expiring), rendered in its contexts when the agent names keys."""

from __future__ import annotations

from dataclasses import dataclass

from episodic.domain.access import require_visible
from episodic.domain.memories import SessionData
from episodic.domain.memory_rules import SessionUpdate, check_session_update, merged_session
from episodic.domain.model import Caller, EpisodeState
from episodic.domain.ports.clock import Clock
from episodic.domain.ports.episodes import EpisodeStore
from episodic.domain.ports.memories import SessionDataStore
from episodic.domain.validation import Limits, Violations, check_id
from episodic.errors import FailedPrecondition
from episodic.service.privacy import PiiGuard, redact_object


@dataclass(kw_only=True)
class SessionDataService:
    store: SessionDataStore
    episodes: EpisodeStore
    pii: PiiGuard
    limits: Limits
    clock: Clock

    async def get(self, caller: Caller, episode_id: str) -> SessionData:
        v = Violations()
        check_id(v, "episode_id", episode_id)
        v.raise_if_any()
        episode = await self.episodes.get_episode(caller.tenant_id, episode_id)
        require_visible(caller, episode.agent_id, "episode", episode_id)
        return await self.store.get(caller.tenant_id, episode_id)

    async def update(self, caller: Caller, u: SessionUpdate) -> SessionData:
        check_session_update(u, self.limits)
        episode = await self.episodes.get_episode(caller.tenant_id, u.episode_id)
        require_visible(caller, episode.agent_id, "episode", u.episode_id)
        if episode.state is not EpisodeState.OPEN:
            raise FailedPrecondition(
                f"episode {u.episode_id!r} is closed: its session data can no longer change",
                reason="EPISODE_CLOSED",
            )
        if await self.pii.redacts_for(caller.tenant_id, episode.agent_id):
            u = SessionUpdate(u.episode_id, redact_object(u.patch), u.etag, u.ttl)
        now = self.clock()
        return await self.store.update(
            caller.tenant_id, u.episode_id, lambda current: merged_session(current, u, now)
        )
