"""SearchMemories, and the memories BuildContext renders under "[Known Facts]".

SEMANTIC: cosine of the query's embedding, FAISS per scope. HYBRID: the semantic pool
(POOL memories at least) ranked again with word matches (BM25 among the pool) by reciprocal
rank fusion. RECENCY: newest first. Filters are applied in SQL to the candidates; the
PENDING memories of a named open episode join with their stored vectors."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from episodic.domain.access import require_agent
from episodic.domain.memories import RECALL_MARK_EVERY, Memory, MemoryHit, MemoryState
from episodic.domain.memory_search import cosine_hits, merged_hits, word_matches
from episodic.domain.model import Caller
from episodic.domain.ports.clock import Clock
from episodic.domain.ports.episodes import AgentStore, ReadBatch
from episodic.domain.ports.indexes import ScopeIndex
from episodic.domain.ports.memories import MemoryFilter, MemoryStore
from episodic.domain.ports.models import Embedder
from episodic.domain.recall import Hit, Scope, SearchMode, Signal, Vector, reciprocal_rank_fusion
from episodic.domain.validation import Limits, Violations, check_id, check_search, check_text
from episodic.service.known_agents import require_existing_agent
from episodic.service.recall import QueryVectorSource, embed_query

POOL = 50  # HYBRID re-ranks at least this many semantic candidates by their words
FILTERED_POOL = 2000  # with filters, this many nearest candidates are read before filtering


class RecallMarker(Protocol):
    """Takes note of recalled memories, to write their last_recalled_at later."""

    def note(self, tenant_id: str, memory_ids: Sequence[str], at: datetime) -> None: ...


@dataclass(frozen=True, slots=True)
class MemoryQuery:
    agent_id: str
    user_id: str
    mode: SearchMode | None
    query: str = ""
    top_k: int = 0
    min_score: float | None = None
    where: MemoryFilter = field(default_factory=MemoryFilter)


@dataclass(kw_only=True)
class MemorySearch:
    store: MemoryStore
    agents: AgentStore
    embedder: Embedder
    index: ScopeIndex  # promoted memories per scope
    limits: Limits
    clock: Clock
    marks: RecallMarker | None = None  # writes last_recalled_at behind the request; None: inline
    known_agents: set[tuple[str, str]] = field(default_factory=set)
    queries: QueryVectorSource | None = None  # shared with recall: a turn embeds its query once

    async def search(self, caller: Caller, q: MemoryQuery) -> list[MemoryHit]:
        mode, top_k = self._check(q)
        require_agent(caller, q.agent_id)
        await require_existing_agent(self.agents, self.known_agents, caller.tenant_id, q.agent_id)
        return await self.ranked(Scope(caller.tenant_id, q.agent_id, q.user_id), q, mode, top_k)

    async def ranked(
        self,
        scope: Scope,
        q: MemoryQuery,
        mode: SearchMode,
        top_k: int,
        batch: ReadBatch | None = None,
        *,
        mark: bool = True,
    ) -> list[MemoryHit]:
        """`batch`: the trip to the database a turn's searches share (None: reads of its own).
        `mark` False: the hits are not noted as recalled (a read the caller may not use: it
        calls `recalled` for the hits it does)."""
        now = self.clock()
        if mode is SearchMode.RECENCY:
            found = await self._newest(scope, q.where, now, top_k, batch)
            hits = [MemoryHit(m, 1.0 / rank, (Signal.RECENCY,)) for rank, m in enumerate(found, start=1)]
        else:
            hits = await self._by_meaning(scope, q, mode, top_k, now, batch)
        if mark:
            await self._touch(scope.tenant_id, [h.memory for h in hits], now)
        return hits

    async def recalled(self, scope: Scope, hits: Sequence[MemoryHit]) -> None:
        """Notes hits read with `mark=False` as recalled now."""
        await self._touch(scope.tenant_id, [h.memory for h in hits], self.clock())

    def may_find_by_meaning(self, scope: Scope) -> bool:
        """False when the scope is known to hold no long-term memories' vectors: a search
        that names no episode (whose PENDING memories count too) need not embed its query."""
        return not self.index.holds_nothing(scope)

    async def _by_meaning(
        self,
        scope: Scope,
        q: MemoryQuery,
        mode: SearchMode,
        top_k: int,
        now: datetime,
        batch: ReadBatch | None,
    ) -> list[MemoryHit]:
        await self.index.ensure(scope)
        if not q.where.episode_id and not self.may_find_by_meaning(scope):  # no memories yet
            return []
        vector = await embed_query(self.embedder, self.queries, q.query, scope.tenant_id)
        wanted = (
            FILTERED_POOL if _filters(q.where) else max(top_k * 4, POOL if mode is SearchMode.HYBRID else 0)
        )
        nearest = await self.index.nearest(scope, vector, wanted)
        pending = await self._pending(scope, q.where.episode_id, vector)
        semantic = [h for h in merged_hits(nearest, pending) if q.min_score is None or h.score >= q.min_score]
        rows = await self._rows(scope, q.where, [h.episode_id for h in semantic], now, batch)
        semantic = [h for h in semantic if h.episode_id in rows]
        if mode is SearchMode.SEMANTIC:
            return [MemoryHit(rows[h.episode_id], h.score, (Signal.SEMANTIC,)) for h in semantic[:top_k]]
        pool = semantic[: max(POOL, top_k * 4)]  # word matching stays bounded when filters widen the read
        words = word_matches(q.query, {h.episode_id: rows[h.episode_id].text for h in pool})
        fused = reciprocal_rank_fusion({Signal.SEMANTIC: semantic, Signal.LEXICAL: words}, limit=top_k)
        return [MemoryHit(rows[h.episode_id], h.score, s) for h, s in fused]

    async def _newest(
        self, scope: Scope, where: MemoryFilter, now: datetime, top_k: int, batch: ReadBatch | None
    ) -> list[Memory]:
        """Long-term memories, newest first, with the named episode's PENDING ones among them."""
        stored = dataclasses.replace(where, state=MemoryState.PROMOTED, episode_id="")
        found = await self.store.page(scope, stored, now, None, top_k, batch)
        if where.episode_id:
            held = await self.store.pending(scope.tenant_id, where.episode_id)
            ids = [m.memory_id for m, _ in held if m.scope == scope]
            found += (
                await self.store.among(scope, ids, dataclasses.replace(stored, state=None), now)
            ).values()
        return sorted(found, key=lambda m: (m.created_at, m.memory_id), reverse=True)[:top_k]

    async def _pending(self, scope: Scope, episode_id: str, vector: Vector) -> list[Hit]:
        """An open episode's PENDING memories are not indexed: scored here (at most a few hundred)."""
        if not episode_id:
            return []
        held = await self.store.pending(scope.tenant_id, episode_id)
        vectors = {m.memory_id: v for m, v in held if v is not None and m.scope == scope}
        return cosine_hits(vector, vectors)

    async def _rows(
        self, scope: Scope, where: MemoryFilter, ids: Sequence[str], now: datetime, batch: ReadBatch | None
    ) -> dict[str, Memory]:
        """Candidates that pass the filter; an episode's PENDING memories pass even though the
        filter's state and episode fields describe long-term storage."""
        if not ids:
            return {}
        return await self.store.among(
            scope, ids, dataclasses.replace(where, episode_id="", state=None), now, batch
        )

    async def _touch(self, tenant_id: str, memories: Sequence[Memory], now: datetime) -> None:
        due = [
            m.memory_id
            for m in memories
            if m.last_recalled_at is None or now - m.last_recalled_at >= RECALL_MARK_EVERY
        ]
        if not due:
            return
        if self.marks is not None:
            self.marks.note(tenant_id, due, now)
        else:
            await self.store.touch(tenant_id, due, now)

    def _check(self, q: MemoryQuery) -> tuple[SearchMode, int]:
        v = Violations()
        check_id(v, "agent_id", q.agent_id)
        check_id(v, "user_id", q.user_id)
        check_id(v, "episode_id", q.where.episode_id, required=False)
        check_text(v, "query", q.query, self.limits.max_content_bytes)
        top_k = check_search(v, q.mode, q.query, q.top_k)
        if q.min_score is not None and not 0.0 <= q.min_score <= 1.0:
            v.add("min_score", "must be between 0 and 1")
        if q.where.after and q.where.before and q.where.after >= q.where.before:
            v.add("before", "must be later than after")
        v.raise_if_any()
        assert q.mode is not None
        return q.mode, top_k


def _filters(where: MemoryFilter) -> bool:
    return bool(where.kinds or where.topics or where.entities or where.after or where.before)
