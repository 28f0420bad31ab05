"""CheckIndex: does this replica's vector index hold exactly the vectors SQL holds? Compared
key by key within one tenant, since SQL is the source of truth the index is a cache of.
Every scope of the tenant in SQL is made resident and compared right after (so a cache
smaller than the tenant still checks each), then resident scopes SQL no longer has. A scope
too large for its cache is never held, its searches reading SQL's vectors: it matches."""

from __future__ import annotations

import enum
import heapq
from collections.abc import Iterable
from dataclasses import dataclass

from episodic.domain.access import require_agent, require_every_agent
from episodic.domain.model import Caller
from episodic.domain.ports.indexes import ScopeIndex, StoredVectorKeys
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

    @property
    def drifted(self) -> bool:
        return bool(self.missing or self.orphaned)


class IndexState(enum.StrEnum):
    """What CheckIndex concludes of the indexes it compared with SQL."""

    CONSISTENT = "consistent"
    DRIFTED = "drifted"

    @classmethod
    def of(cls, *reports: IndexReport) -> IndexState:
        return cls.DRIFTED if any(r.drifted for r in reports) else cls.CONSISTENT


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexChecker:
    store: StoredVectorKeys
    index: ScopeIndex
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
        scopes = {scope for scope, _ in in_sql}
        in_index: set[ScopedKey] = set()
        for scope in sorted(scopes, key=_order):
            await self.index.ensure(scope)
            if self.index.too_large(scope):  # never held: each search reads SQL's own vectors
                in_index.update(key for key in in_sql if key[0] == scope)
            else:
                in_index.update((scope, key) for key in self.index.keys(scope))
        for scope in self.index.resident():
            if scope not in scopes and _within(scope, caller.tenant_id, agent_id):
                in_index.update((scope, key) for key in self.index.keys(scope))
        return compare(in_sql, in_index)


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


def _order(scope: Scope) -> tuple[str, str, str]:
    return scope.tenant_id, scope.agent_id, scope.user_id


def _within(scope: Scope, tenant_id: str, agent_id: str) -> bool:
    return scope.tenant_id == tenant_id and (not agent_id or scope.agent_id == agent_id)


def _sample(keys: Iterable[ScopedKey]) -> list[str]:
    written = (f"{scope.agent_id}/{scope.user_id}/{key}" for scope, key in keys)
    return heapq.nsmallest(MAX_SAMPLE_KEYS, written)
