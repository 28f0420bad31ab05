"""Recall: SearchEpisodes over one scope (tenant, agent, user), by recency, meaning, or
meaning fused with full-text matching."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from episodic.domain.access import require_agent
from episodic.domain.excerpts import passage_scores, terms
from episodic.domain.model import Caller
from episodic.domain.ports.clock import Clock
from episodic.domain.ports.digests import DigestReads
from episodic.domain.ports.episodes import AgentStore, ReadBatch
from episodic.domain.ports.indexes import ScopeIndex
from episodic.domain.ports.models import Embedder, embeds_inline
from episodic.domain.recall import (
    Digest,
    Hit,
    Scope,
    SearchMode,
    Signal,
    Snippet,
    Vector,
    episode_of,
    fuse_with_passages,
    reciprocal_rank_fusion,
)
from episodic.domain.validation import (
    SEARCH_MAX_TOP_K,
    Limits,
    Violations,
    check_id,
    check_search,
    check_text,
)
from episodic.domain.when import Period, period_in
from episodic.service.known_agents import require_existing_agent
from episodic.service.passages import Passages
from episodic.telemetry.tracing import (
    EPISODIC_SEARCH_MODE,
    GEN_AI_MEMORY_QUERY_TEXT,
    GEN_AI_MEMORY_RECORD_COUNT,
    GEN_AI_MEMORY_STORE_ID,
    GEN_AI_OPERATION_NAME,
    SEARCH_MEMORY,
    AttributeValue,
    Tracing,
    no_tracing,
)

CHUNKS_PER_EPISODE = 8  # candidates fetched per wanted episode, since episodes have several vectors
# HYBRID reads the messages of this many best fused episodes and ranks them a third time by
# their best passage (LoCoMo dev R@5 for pools of 5, 10 and 20: 0.902, 0.925, 0.924).
PASSAGE_POOL = 10
# The ranking of what ended in the period a query names counts twice in the fusion: only it
# knows time, and once was too little for a question whose words fit other episodes ("what did
# I ask support in April?": chats set temporal MRR 0.739 -> 0.833; LoCoMo dev, whose dated
# questions already found their period, unchanged). Not more: a question's own words, matched
# by meaning, full text and passage alike, still outrank a time misremembered (at 3 they no
# longer do).
FUSION_WEIGHTS = {Signal.RECENCY: 2.0}


class QueryVectorSource(Protocol):
    """Embeddings of query texts, remembered between the searches of one turn."""

    def prefetch(self, text: str, tenant_id: str = "") -> None:
        """Starts embedding `text` now, on `tenant_id`'s turn; a later `of(text)` gets the result."""

    def under_way(self, text: str) -> bool:
        """Whether `text` is being embedded now: a search waiting for it could do other work."""
        ...

    async def of(self, text: str, tenant_id: str = "") -> Vector: ...


async def embed_query(
    embedder: Embedder, queries: QueryVectorSource | None, text: str, tenant_id: str = ""
) -> Vector:
    if queries is not None:
        return await queries.of(text, tenant_id)
    if embeds_inline(embedder, text):
        (vector,) = embedder.embed([text])
        return vector
    (vector,) = await asyncio.to_thread(embedder.embed, [text])
    return vector


@dataclass(frozen=True, slots=True)
class SearchRequest:
    agent_id: str
    user_id: str
    mode: SearchMode | None
    query: str = ""
    top_k: int = 0
    min_score: float | None = None
    ended_after: datetime | None = None
    ended_before: datetime | None = None


@dataclass(frozen=True, slots=True)
class SearchResult:
    snippets: list[Snippet]
    pending_digests: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallService:
    digests: DigestReads
    agents: AgentStore
    embedder: Embedder
    index: ScopeIndex
    limits: Limits
    clock: Clock  # resolves "last week" and "in May" in HYBRID queries
    passages: Passages | None = None  # None: HYBRID fuses meaning and full text only
    known_agents: set[tuple[str, str]] = field(default_factory=set)
    tracing: Tracing = field(default_factory=no_tracing)
    queries: QueryVectorSource | None = None  # shared query embeddings; None: embed every time
    timed: Callable[[str, float], None] | None = None  # told each search's mode and seconds (metrics)

    async def search(
        self, caller: Caller, request: SearchRequest, batch: ReadBatch | None = None
    ) -> SearchResult:
        """`batch`: the trip to the database a turn's searches share (None: reads of its own)."""
        mode, top_k = self._check(request)
        require_agent(caller, request.agent_id)
        if self.timed is None:
            return await self._search(caller, request, mode, top_k, batch)
        started = time.perf_counter()
        try:
            return await self._search(caller, request, mode, top_k, batch)
        finally:
            self.timed(mode.value, time.perf_counter() - started)

    async def _search(
        self, caller: Caller, request: SearchRequest, mode: SearchMode, top_k: int, batch: ReadBatch | None
    ) -> SearchResult:
        with self.tracing.span(SEARCH_MEMORY, self._span_attributes(request, mode)) as span:
            await require_existing_agent(self.agents, self.known_agents, caller.tenant_id, request.agent_id)
            scope = Scope(caller.tenant_id, request.agent_id, request.user_id)
            found = (
                self._recent(scope, request, top_k, batch)
                if mode is SearchMode.RECENCY
                else self._ranked(scope, request, mode, top_k, batch)
            )
            snippets, pending = await asyncio.gather(found, self.digests.pending_count(scope, batch))
            span.set_attribute(GEN_AI_MEMORY_RECORD_COUNT, len(snippets))
            return SearchResult(snippets, pending)

    def _span_attributes(self, r: SearchRequest, mode: SearchMode) -> dict[str, AttributeValue]:
        """The agent names the store; tenant and user ids stay out of traces (the user id
        may be personal data), and the query goes in only when content capture is on."""
        attributes: dict[str, AttributeValue] = {
            GEN_AI_OPERATION_NAME: SEARCH_MEMORY,
            GEN_AI_MEMORY_STORE_ID: r.agent_id,
            EPISODIC_SEARCH_MODE: mode.value,
        }
        if self.tracing.capture_content and r.query:
            attributes[GEN_AI_MEMORY_QUERY_TEXT] = r.query
        return attributes

    def _check(self, r: SearchRequest) -> tuple[SearchMode, int]:
        v = Violations()
        check_id(v, "agent_id", r.agent_id)
        check_id(v, "user_id", r.user_id)
        check_text(v, "query", r.query, self.limits.max_content_bytes)
        top_k = check_search(v, r.mode, r.query, r.top_k)
        if r.min_score is not None and not -1.0 <= r.min_score <= 1.0:
            v.add("min_score", "must be between -1 and 1")
        if r.ended_after and r.ended_before and r.ended_after >= r.ended_before:
            v.add("ended_before", "must be later than ended_after")
        v.raise_if_any()
        assert r.mode is not None
        return r.mode, top_k

    async def _recent(
        self, scope: Scope, r: SearchRequest, top_k: int, batch: ReadBatch | None
    ) -> list[Snippet]:
        found = await self.digests.recent(scope, top_k, r.ended_after, r.ended_before, batch)
        return [_snippet(d, 1.0 / rank, (Signal.RECENCY,)) for rank, d in enumerate(found, start=1)]

    async def _ranked(
        self, scope: Scope, r: SearchRequest, mode: SearchMode, top_k: int, batch: ReadBatch | None
    ) -> list[Snippet]:
        wanted = top_k if r.ended_after is None and r.ended_before is None else SEARCH_MAX_TOP_K
        if mode is SearchMode.HYBRID and self.passages is not None:
            wanted = max(wanted, PASSAGE_POOL)
        fused: list[tuple[Hit, tuple[Signal, ...]]]
        if mode is SearchMode.SEMANTIC:
            semantic = _keep_above(await self._semantic(scope, r.query, wanted), r.min_score)
            fused = [(hit, (Signal.SEMANTIC,)) for hit in semantic]
            digests = await self._ready(scope, r, fused, batch)
        else:
            # words first: the full-text read needs no vector, and a turn's query embedding
            # (started before the append) is often still being made when recall begins
            lexical = await self.digests.lexical(scope, r.query, wanted * 2, batch)
            semantic = _keep_above(await self._semantic(scope, r.query, wanted), r.min_score)
            rankings = {Signal.SEMANTIC: semantic, Signal.LEXICAL: lexical}
            fused = reciprocal_rank_fusion(rankings)
            if r.ended_after is None and r.ended_before is None:
                rankings |= await self._in_period(scope, r.query, wanted, fused, batch)
                fused = reciprocal_rank_fusion(rankings, weights=FUSION_WEIGHTS)
            digests = await self._ready(scope, r, fused, batch)
            if self.passages is not None:
                fused = await self._by_passages(scope, r.query, rankings, fused, digests)
        found = [_snippet(digests[h.episode_id], h.score, s) for h, s in fused if h.episode_id in digests]
        return found[:top_k]

    async def _in_period(
        self,
        scope: Scope,
        query: str,
        wanted: int,
        fused: Sequence[tuple[Hit, tuple[Signal, ...]]],
        batch: ReadBatch | None,
    ) -> dict[Signal, list[Hit]]:
        """The episodes that ended in the period the query names ("last week", "in May") as one
        more ranking: those already found in their fused order, then the newest others. The
        time asked about is part of the question, but a period that holds everything changes
        no order."""
        period = period_in(query, self.clock())
        if period is None:
            return {}
        ids = [h.episode_id for h, _ in fused]
        newest = [
            d.episode_id for d in await self.digests.recent(scope, wanted, period.start, period.end, batch)
        ]
        if period.any_year:  # "in June": the latest June that holds a talk, else a candidate's June
            found = await self.digests.ready_among(scope, ids, None, period.end, batch)
            if not newest:
                period = latest_holding(period, [d.ended_at for d in found.values()])
            inside = {e for e, d in found.items() if period.start <= d.ended_at < period.end}
        else:
            inside = set(await self.digests.ready_among(scope, ids, period.start, period.end, batch))
        order = [e for e in ids if e in inside]
        order += [e for e in newest if e not in order]
        return {Signal.RECENCY: [Hit(e, 1.0 / rank) for rank, e in enumerate(order, start=1)]}

    async def _ready(
        self,
        scope: Scope,
        r: SearchRequest,
        fused: Sequence[tuple[Hit, tuple[Signal, ...]]],
        batch: ReadBatch | None,
    ) -> dict[str, Digest]:
        ids = [hit.episode_id for hit, _ in fused]
        return await self.digests.ready_among(scope, ids, r.ended_after, r.ended_before, batch)

    async def _by_passages(
        self,
        scope: Scope,
        query: str,
        rankings: dict[Signal, list[Hit]],
        fused: list[tuple[Hit, tuple[Signal, ...]]],
        digests: dict[str, Digest],
    ) -> list[tuple[Hit, tuple[Signal, ...]]]:
        """Fused again with the best passage of each of the PASSAGE_POOL best episodes: one
        exchange about the thing asked, diluted in a long episode, still counts."""
        assert self.passages is not None
        head = [hit.episode_id for hit, _ in fused if hit.episode_id in digests][:PASSAGE_POOL]
        if not head or not terms(query):
            return fused
        transcripts = await self.passages.of(scope.tenant_id, head)
        return fuse_with_passages(rankings, passage_scores(query, transcripts), weights=FUSION_WEIGHTS)

    def may_find_by_meaning(self, scope: Scope) -> bool:
        """False when the scope is known to hold no vectors: its query need not be embedded."""
        return not self.index.holds_nothing(scope)

    async def _semantic(self, scope: Scope, query: str, wanted: int) -> list[Hit]:
        await self.index.ensure(scope)
        if not self.may_find_by_meaning(scope):  # a user with no digested episode yet
            return []
        vector = await embed_query(self.embedder, self.queries, query, scope.tenant_id)
        hits = await self.index.nearest(scope, vector, wanted * CHUNKS_PER_EPISODE)
        return best_per_episode(hits)


def latest_holding(period: Period, ended: Sequence[datetime]) -> Period:
    """A period named without its year, which holds none of the user's talks, moved back to the
    latest year one of `ended` (the candidates' ends) falls in (itself when none does): asked
    "in June" in December 2026, a user whose June talks were in 2023 means June 2023. Linear in
    the candidates."""
    years = {period.start.year - when.year for when in ended if when < period.end}
    for back in sorted(y for y in years if y >= 0):
        moved = period.years_back(back)
        if any(moved.start <= when < moved.end for when in ended):
            return moved
    return period


def best_per_episode(hits: Sequence[Hit]) -> list[Hit]:
    """Several vectors per episode: an episode scores its best chunk."""
    best: dict[str, float] = {}
    for hit in hits:
        episode_id = episode_of(hit.episode_id)
        best[episode_id] = max(best.get(episode_id, -1.0), hit.score)
    return [Hit(e, s) for e, s in sorted(best.items(), key=lambda item: (-item[1], item[0]))]


def _keep_above(hits: list[Hit], min_score: float | None) -> list[Hit]:
    return hits if min_score is None else [h for h in hits if h.score >= min_score]


def _snippet(d: Digest, score: float, signals: tuple[Signal, ...]) -> Snippet:
    return Snippet(d.episode_id, d.started_at, d.ended_at, d.summary, d.key_facts, score, signals)
