"""EraseUser: every row and vector of one user in the caller's tenant, with a receipt.

Order matters for the index: the digester writes a digest's vectors to SQL and then to the
index under `index_lock`; erasure deletes rows and then removes vectors under the same
lock, so a digest finishing during an erasure can neither leave vectors behind nor bring
them back. Recall reads digests from SQL too, so other replicas' indexes (which keep
erased vectors until they restart) never surface an erased episode.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from episodic.domain.access import require_agent, require_every_agent
from episodic.domain.erasure import Audit, Erased, Receipt, user_hash
from episodic.domain.model import Caller
from episodic.domain.ports import Clock, IdFactory, VectorIndex
from episodic.domain.recall import Scope
from episodic.domain.validation import Violations, check_id
from episodic.service.unindex import unindex_episodes


class Eraser(Protocol):
    async def erase(self, tenant_id: str, user_id: str, agent_id: str, audit: Audit) -> Erased: ...

    async def scrub(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class EraseService:
    eraser: Eraser
    index: VectorIndex
    index_lock: asyncio.Lock
    clock: Clock
    new_id: IdFactory
    forget_episode: Callable[[str, str], None]  # drops a cached working set
    scope_changed: Callable[[Scope], None]

    async def erase_user(self, caller: Caller, user_id: str, agent_id: str = "") -> Receipt:
        v = Violations()
        check_id(v, "user_id", user_id)
        check_id(v, "agent_id", agent_id, required=False)
        v.raise_if_any()
        if agent_id:
            require_agent(caller, agent_id)
        else:  # a key limited to some agents may not erase what other agents hold
            require_every_agent(caller, "EraseUser without agent_id")
        tenant = caller.tenant_id
        audit = Audit(f"er_{self.new_id()}", user_hash(tenant, user_id), agent_id, self.clock())
        async with self.index_lock:
            erased = await self.eraser.erase(tenant, user_id, agent_id, audit)
            scoped = [(Scope(tenant, agent, user_id), episode_id) for agent, episode_id in erased.episodes]
            unindexed = unindex_episodes(self.index, scoped)
        for scope, episode_id in scoped:
            self.scope_changed(scope)
            self.forget_episode(tenant, episode_id)
        scrubbed = await self.eraser.scrub()
        return Receipt(audit.erasure_id, audit.erased_at, audit.user_hash, erased.counts, unindexed, scrubbed)
