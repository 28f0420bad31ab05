"""CheckIndex: does the in-memory vector index hold exactly the vectors SQL holds? Compared
key by key within one tenant, since SQL is the source of truth the index is rebuilt from
and the digester writes SQL first, then the index."""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Iterable
from dataclasses import dataclass

from episodic.domain.access import require_agent, require_every_agent
from episodic.domain.model import Caller
from episodic.domain.ports import StoredVectorKeys, VectorIndex
from episodic.domain.recall import Scope
from episodic.domain.validation import Violations, check_id

MAX_SAMPLE_KEYS = 20
ScopedKey = tuple[Scope, str]


@dataclass(frozen=True, slots=True)
class IndexReport:
    sql_vectors: int
    index_vectors: int
    missing: int  # in SQL, not in the index
    orphaned: int  # in the index, not in SQL
    missing_keys: list[str]  # the first MAX_SAMPLE_KEYS, as "agent/user/episode#chunk"
    orphaned_keys: list[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexChecker:
    store: StoredVectorKeys
    index: VectorIndex
    model: str  # the index holds this embedding model's vectors only

    async def check(self, caller: Caller, agent_id: str = "") -> IndexReport:
        """Only the caller's tenant is read, on both sides; a key restricted to some agents
        must name one of them."""
        v = Violations()
        check_id(v, "agent_id", agent_id, required=False)
        v.raise_if_any()
        if agent_id:
            require_agent(caller, agent_id)
        else:
            require_every_agent(caller, "CheckIndex without agent_id")
        in_sql = set(await self.store.vector_keys(caller.tenant_id, self.model, agent_id))
        in_index = await asyncio.to_thread(self._indexed_keys, caller.tenant_id, agent_id)
        return compare(in_sql, in_index)

    def _indexed_keys(self, tenant_id: str, agent_id: str) -> set[ScopedKey]:
        scopes = [s for s in self.index.scopes() if _within(s, tenant_id, agent_id)]
        return {(scope, key) for scope in scopes for key in self.index.keys(scope)}


def compare(in_sql: set[ScopedKey], in_index: set[ScopedKey]) -> IndexReport:
    missing, orphaned = in_sql - in_index, in_index - in_sql
    return IndexReport(
        sql_vectors=len(in_sql),
        index_vectors=len(in_index),
        missing=len(missing),
        orphaned=len(orphaned),
        missing_keys=_sample(missing),
        orphaned_keys=_sample(orphaned),
    )


def _within(scope: Scope, tenant_id: str, agent_id: str) -> bool:
    return scope.tenant_id == tenant_id and (not agent_id or scope.agent_id == agent_id)


def _sample(keys: Iterable[ScopedKey]) -> list[str]:
    written = (f"{scope.agent_id}/{scope.user_id}/{key}" for scope, key in keys)
    return heapq.nsmallest(MAX_SAMPLE_KEYS, written)
