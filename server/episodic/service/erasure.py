"""EraseUser: every row and vector of one user in the caller's tenant, with a receipt.

Order matters for the index: the digester writes a digest's vectors to SQL and then to the
index under `index_lock`; erasure deletes rows and then removes vectors under the same
lock, so a digest finishing during an erasure can neither leave vectors behind nor bring
them back. Recall reads digests from SQL too, so other replicas' indexes (which keep
erased vectors until they restart) never surface an erased episode.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from episodic.domain.access import require_agent, require_every_agent
from episodic.domain.erasure import Erased, Receipt, user_hash
from episodic.domain.model import Caller
from episodic.domain.ports import Clock, IdFactory, VectorIndex
from episodic.domain.recall import Scope, episode_of
from episodic.domain.validation import Violations, check_id


class Eraser(Protocol):
    async def erase(self, tenant_id: str, user_id: str, agent_id: str, audit: dict[str, Any]) -> Erased: ...

    async def scrub(self) -> bool: ...


AuditRow = Callable[[str, str, str, str, Any], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class EraseService:
    eraser: Eraser
    audit_row: AuditRow
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
        tenant, erasure_id, at = caller.tenant_id, f"er_{self.new_id()}", self.clock()
        hashed = user_hash(tenant, user_id)
        async with self.index_lock:
            erased = await self.eraser.erase(
                tenant, user_id, agent_id, self.audit_row(tenant, erasure_id, hashed, agent_id, at)
            )
            unindexed = self._unindex(tenant, user_id, erased.episodes)
        self._forget(tenant, user_id, erased.episodes)
        scrubbed = await self.eraser.scrub()
        return Receipt(erasure_id, at, hashed, erased.counts, unindexed, scrubbed)

    def _unindex(self, tenant: str, user_id: str, episodes: Sequence[tuple[str, str]]) -> int:
        removed = 0
        for agent, ids in _by_agent(episodes).items():
            scope = Scope(tenant, agent, user_id)
            keys = [k for k in self.index.keys(scope) if episode_of(k) in ids]
            self.index.remove(scope, keys)
            removed += len(keys)
        return removed

    def _forget(self, tenant: str, user_id: str, episodes: Sequence[tuple[str, str]]) -> None:
        for agent, ids in _by_agent(episodes).items():
            self.scope_changed(Scope(tenant, agent, user_id))
            for episode_id in ids:
                self.forget_episode(tenant, episode_id)


def _by_agent(episodes: Sequence[tuple[str, str]]) -> dict[str, set[str]]:
    grouped: dict[str, set[str]] = {}
    for agent, episode_id in episodes:
        grouped.setdefault(agent, set()).add(episode_id)
    return grouped
