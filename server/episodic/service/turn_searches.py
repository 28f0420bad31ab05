"""What one BuildContext turn looks up beside its working set, at once: past episodes
("[Past Conversations]", with excerpts), the user's memories ("[Known Facts]"), session data,
the agent's documents ("[Knowledge]") and this episode's compacted messages ("[Earlier in
this conversation]"). One collaborator of ContextService, over ports: what it searches is
named by the protocols below, not by the services that implement them, and each search runs
only when the turn will use it, with the turn's one query embedding. When several search at
once, the reads of recall, known facts and session data are handed one `ReadBatch` (an
argument, passed down to the stores' reads): they share one trip to the database."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol, TypeVar

from episodic.domain.earlier_block import EarlierFound
from episodic.domain.excerpts import Transcript, choose_excerpts, terms
from episodic.domain.knowledge import KnowledgeHit, KnowledgeItem, stored_item
from episodic.domain.known_facts import KnownFact, pending_for_turn, selected, subject_words
from episodic.domain.memories import Memory, MemoryHit, MemoryOrigin
from episodic.domain.model import Caller, JsonValue, MemoryConfig, RecallMode
from episodic.domain.ports.episodes import ReadBatch, ReadsTogether
from episodic.domain.ports.memories import MemoryStore, SessionDataStore
from episodic.domain.recall import Scope, SearchMode, Snippet
from episodic.domain.working_set import WorkingSet
from episodic.service.memory_search import MemoryQuery
from episodic.service.recall import QueryVectorSource, SearchRequest, SearchResult
from episodic.state.recall_memo import RecencyMemo
from episodic.telemetry.tracing import GEN_AI_CONVERSATION_ID, Tracing, no_tracing

T = TypeVar("T")
# One of a turn's searches, started with the batch its reads join (None: trips of their own).
Search = Callable[[ReadBatch | None], Coroutine[Any, Any, Any]]

# Excerpts of recalled episodes: how many matching messages each (each with its reply), how long.
EXCERPTS_PER_EPISODE = 3
EXCERPT_CHARS = 300
PROFILE_POOL = 4  # "[Known Facts]" fills its unmatched slots from this many times top-K newest memories
RECALL_MODES = {
    RecallMode.RECENCY: SearchMode.RECENCY,
    RecallMode.SEMANTIC: SearchMode.SEMANTIC,
    RecallMode.HYBRID: SearchMode.HYBRID,
}


class PastEpisodes(Protocol):
    """SearchEpisodes over one user's closed episodes (service/recall.py)."""

    async def search(
        self, caller: Caller, request: SearchRequest, batch: ReadBatch | None = None
    ) -> SearchResult: ...

    def may_find_by_meaning(self, scope: Scope) -> bool: ...


class EpisodeTranscripts(Protocol):
    """Recalled episodes' spoken messages, for their excerpts (service/passages.py)."""

    async def of(self, tenant_id: str, episode_ids: Sequence[str]) -> dict[str, Transcript]: ...


class MemoryRanking(Protocol):
    """The user's long-term memories ranked for a query (service/memory_search.py)."""

    async def ranked(
        self,
        scope: Scope,
        q: MemoryQuery,
        mode: SearchMode,
        top_k: int,
        batch: ReadBatch | None = None,
        *,
        mark: bool = True,
    ) -> list[MemoryHit]: ...

    async def recalled(self, scope: Scope, hits: Sequence[MemoryHit]) -> None:
        """Notes hits read with `mark=False` as recalled."""

    def may_find_by_meaning(self, scope: Scope) -> bool: ...


class AgentKnowledge(Protocol):
    """The agent's document chunks that match a turn (service/knowledge.py)."""

    async def for_turn(
        self, tenant_id: str, agent_id: str, text: str, top_k: int, min_score: float | None
    ) -> Sequence[KnowledgeHit]: ...

    def may_find_by_meaning(self, tenant_id: str, agent_id: str) -> bool: ...


class ScopePreloads(Protocol):
    """A vector index of user scopes loaded on first use (state/index_cache.py)."""

    def preload(self, scope: Scope) -> None:
        """Starts loading the scope, without waiting."""
        ...


class EarlierMessages(Protocol):
    """This episode's compacted messages that match the turn (service/earlier.py)."""

    def searches(self, ws: WorkingSet, share_percent: int, matchable: bool) -> bool: ...

    async def found(self, ws: WorkingSet, query: str) -> EarlierFound: ...

    async def stop(self) -> None:
        """Ends its background work (the messages' vectors), at shutdown."""


@dataclass(frozen=True, slots=True)
class TurnQuery:
    """What recall and known facts match this turn by (the redacted text), analysed once."""

    text: str
    matchable: bool  # it has words a search can match (not only stop words)

    @classmethod
    def of(cls, recall_query: str, user_message: str) -> TurnQuery:
        text = recall_query or user_message
        return cls(text, bool(terms(text)))


@dataclass(frozen=True, slots=True)
class Found:
    """What the turn's searches found."""

    snippets: list[Snippet] = field(default_factory=list)
    pending_digests: int = 0
    facts: list[KnownFact] = field(default_factory=list)
    session: list[tuple[str, JsonValue]] = field(default_factory=list)
    knowledge: list[KnowledgeItem] = field(default_factory=list)  # stored chunks for this turn
    earlier: EarlierFound | None = None  # this episode's compacted messages matching the turn


@dataclass(slots=True, kw_only=True)
class TurnSearches:
    past: PastEpisodes
    memo: RecencyMemo  # recency answers, remembered between turns
    transcripts: EpisodeTranscripts
    memories: MemoryRanking
    memory_store: MemoryStore  # this episode's PENDING memories, when the turn does not append
    sessions: SessionDataStore
    queries: QueryVectorSource  # shared with recall and memories: embedded once a turn
    knowledge: AgentKnowledge
    reads: ReadsTogether  # a batch for a turn's searches: their reads share one trip to the database
    earlier: EarlierMessages
    scopes: Sequence[ScopePreloads] = ()  # the user's indexes (recall, memories): loaded at prefetch
    tracing: Tracing = field(default_factory=no_tracing)

    async def run(
        self, caller: Caller, ws: WorkingSet, config: MemoryConfig, q: TurnQuery, pending: list[Memory] | None
    ) -> Found:
        """`pending`: the episode's PENDING memories the append read (None: read them here)."""
        searches = self._searches(caller, ws, config, q, pending)
        if len(searches) > 1 and ("knowledge" in searches or self.queries.under_way(q.text)):
            # at once, the searches' reads handed one batch: one trip to the database. Else
            # one search reads at a time (tasks would only cost), unless the query is still
            # being embedded: then each does its reads that need no vector meanwhile
            with self.reads.together() as batch:
                results = await asyncio.gather(*[search(batch) for search in searches.values()])
                found = dict(zip(searches, results, strict=True))
        else:  # one at a time; a search not reached (an earlier one raised) is never started
            found = {name: await search(None) for name, search in searches.items()}
        snippets, pending_digests = found.get("recall", ([], 0))
        return Found(
            snippets, pending_digests, found.get("known_facts", []), found.get("session", []),
            found.get("knowledge", []), found.get("earlier"),
        )  # fmt: skip

    def prefetch(self, working_set: WorkingSet, config: MemoryConfig, q: TurnQuery) -> None:
        """Starts the query embedding (of the redacted text) before the append is written,
        when recall or known facts will want it; both then take it from `queries`. Starts
        loading the user's indexes too, when not resident (the first turn after a restart)."""
        e = working_set.episode
        scope = Scope(e.tenant_id, e.agent_id, e.user_id)
        by_meaning = RECALL_MODES.get(config.recall_mode) in (SearchMode.SEMANTIC, SearchMode.HYBRID)
        recalls = by_meaning and q.text.strip() != "" and self.past.may_find_by_meaning(scope)
        memories = self.memories if config.known_facts and q.matchable else None
        earlier = self.earlier.searches(working_set, config.earlier_budget_percent, q.matchable)
        if (
            recalls
            or (earlier and working_set.compacted_log.embedded > 0)
            or self._searches_knowledge(working_set, config, q)
            or (memories is not None and memories.may_find_by_meaning(scope))
        ):
            self.queries.prefetch(q.text, e.tenant_id)
            self.preload(working_set)  # the first turn after a restart: loaded beside the append

    def preload(self, working_set: WorkingSet) -> None:
        """Starts loading the indexes of the conversation's user, where not resident."""
        e = working_set.episode
        scope = Scope(e.tenant_id, e.agent_id, e.user_id)
        for index in self.scopes:
            index.preload(scope)

    def _searches(
        self, caller: Caller, ws: WorkingSet, config: MemoryConfig, q: TurnQuery, pending: list[Memory] | None
    ) -> dict[str, Search]:
        """What this turn looks up beside its working set, by name; only what it will use.
        Each is started when it is run (a coroutine made and never awaited is a leak), given
        the batch its reads join (None: their own trips)."""
        found: dict[str, Search] = {}
        if RECALL_MODES.get(config.recall_mode) is not None:
            found["recall"] = lambda batch: self._spanned(
                "recall", ws, partial(self._recall, caller, ws, config, q, batch)
            )
        if config.known_facts:
            found["known_facts"] = lambda batch: self._spanned(
                "known_facts", ws, partial(self._known_facts, ws, config, q, pending, batch)
            )
        if config.session_data_keys:
            found["session"] = lambda batch: self._session(ws, config, batch)
        if self.earlier.searches(ws, config.earlier_budget_percent, q.matchable):
            found["earlier"] = lambda _: self._spanned("earlier", ws, partial(self.earlier.found, ws, q.text))
        if self._searches_knowledge(ws, config, q):
            found["knowledge"] = lambda _: self._spanned(
                "knowledge", ws, partial(self._found_knowledge, ws, config, q)
            )
        return found

    async def _spanned(self, name: str, ws: WorkingSet, step: Callable[[], Awaitable[T]]) -> T:
        with self.tracing.span(name, {GEN_AI_CONVERSATION_ID: ws.episode.episode_id}):
            return await step()

    def _searches_knowledge(self, ws: WorkingSet, config: MemoryConfig, q: TurnQuery) -> bool:
        """Not when the agent is known to hold no documents, or the turn has nothing to match."""
        if not (config.knowledge and config.knowledge_top_k > 0 and q.matchable):
            return False
        return self.knowledge.may_find_by_meaning(ws.episode.tenant_id, ws.episode.agent_id)

    async def _found_knowledge(
        self, ws: WorkingSet, config: MemoryConfig, q: TurnQuery
    ) -> list[KnowledgeItem]:
        """The agent's document chunks that match the turn (hybrid: meaning and words), best
        first; none when the agent is known to hold no documents."""
        e = ws.episode
        if not self._searches_knowledge(ws, config, q):
            return []
        min_score = config.knowledge_min_score if config.knowledge_min_score > 0 else None
        hits = await self.knowledge.for_turn(
            e.tenant_id, e.agent_id, q.text, config.knowledge_top_k, min_score
        )
        return [stored_item(h) for h in hits]

    async def _known_facts(
        self,
        ws: WorkingSet,
        config: MemoryConfig,
        query: TurnQuery,
        pending: list[Memory] | None,
        batch: ReadBatch | None,
    ) -> list[KnownFact]:
        """This episode's PENDING memories (its working memory) first, then the user's long-term
        memories that match the turn (HYBRID, `memory_min_score` on the cosine), then the user's
        profile for the slots of `memory_top_k` the match left (facts and preferences before
        events, newest first; scored 0), without the ones that repeat a fact before them."""
        if not config.known_facts:
            return []
        e = ws.episode
        if pending is None:
            pending = [m for m, _ in await self.memory_store.pending(e.tenant_id, e.episode_id, batch)]
        scope, top_k = Scope(e.tenant_id, e.agent_id, e.user_id), config.memory_top_k
        pool = top_k * PROFILE_POOL
        profile = MemoryQuery(e.agent_id, e.user_id, SearchMode.RECENCY, "", pool)
        early: list[MemoryHit] | None = None
        if query.matchable and self.queries.under_way(query.text):
            # the match waits for the query's vector: read the profile meanwhile, unmarked
            # until it is known to be used
            early = await self.memories.ranked(scope, profile, SearchMode.RECENCY, pool, batch, mark=False)
        matched: list[KnownFact] = []
        if query.matchable:
            q = MemoryQuery(
                e.agent_id, e.user_id, SearchMode.HYBRID, query.text, top_k, config.memory_min_score
            )
            hits = await self.memories.ranked(scope, q, SearchMode.HYBRID, top_k, batch)
            matched = [_fact(h.memory, h.score) for h in hits if h.memory.episode_id != e.episode_id]
        newest: list[KnownFact] = []
        # a matching search loaded the scope: known to hold nothing, it has no profile to read
        known_empty = query.matchable and not self.memories.may_find_by_meaning(scope)
        if len(matched) < top_k and not known_empty:
            if early is None:
                hits = await self.memories.ranked(scope, profile, SearchMode.RECENCY, pool, batch)
            else:
                hits = early
                await self.memories.recalled(scope, hits)
            newest = [_fact(h.memory, 0.0) for h in hits if h.memory.episode_id != e.episode_id]
        newest_first = [_fact(m, 1.0, pending=True) for m in reversed(pending)]
        held = pending_for_turn(newest_first, query.text, top_k)
        return selected(held, matched, newest, top_k, subject_words(e.user_id))

    async def _session(
        self, ws: WorkingSet, config: MemoryConfig, batch: ReadBatch | None
    ) -> list[tuple[str, JsonValue]]:
        if not config.session_data_keys:
            return []
        data = (await self.sessions.get(ws.episode.tenant_id, ws.episode.episode_id, batch)).data
        return [(key, data[key]) for key in config.session_data_keys if key in data]

    async def _recall(
        self,
        caller: Caller,
        working_set: WorkingSet,
        config: MemoryConfig,
        q: TurnQuery,
        batch: ReadBatch | None,
    ) -> tuple[list[Snippet], int]:
        mode = RECALL_MODES.get(config.recall_mode)
        if mode is None:
            return [], 0
        query = q.text
        if not query.strip():
            mode = SearchMode.RECENCY  # nothing to match yet: the latest episodes
        episode = working_set.episode
        min_score = config.recall_min_score if config.recall_min_score > 0 else None
        request = SearchRequest(
            episode.agent_id, episode.user_id, mode, query, config.recall_top_k, min_score
        )
        found = await self._search(caller, request, batch)
        snippets = [s for s in found[0] if s.episode_id != episode.episode_id]
        return await self._with_excerpts(caller, snippets, q), found[1]

    async def _with_excerpts(self, caller: Caller, snippets: list[Snippet], q: TurnQuery) -> list[Snippet]:
        """Each recalled episode's messages that match the query, verbatim: the detail a
        summary leaves out is what people ask about."""
        if not snippets or not q.matchable:
            return snippets
        transcripts = await self.transcripts.of(caller.tenant_id, [s.episode_id for s in snippets])
        chosen = choose_excerpts(q.text, transcripts, EXCERPTS_PER_EPISODE, EXCERPT_CHARS)
        return [dataclasses.replace(s, excerpts=chosen.get(s.episode_id, ())) for s in snippets]

    async def _search(
        self, caller: Caller, r: SearchRequest, batch: ReadBatch | None
    ) -> tuple[list[Snippet], int]:
        """Recency answers are remembered between turns (see RecencyMemo)."""
        if r.mode is not SearchMode.RECENCY:
            found = await self.past.search(caller, r, batch)
            return found.snippets, found.pending_digests
        scope = Scope(caller.tenant_id, r.agent_id, r.user_id)
        key = (scope, r.top_k, r.min_score)
        remembered = self.memo.get(key)
        if remembered is not None:
            return remembered
        version = self.memo.version(scope)
        found = await self.past.search(caller, r, batch)
        self.memo.put(key, version, found.snippets, found.pending_digests)
        return found.snippets, found.pending_digests


def _fact(m: Memory, score: float, *, pending: bool = False) -> KnownFact:
    client = m.source.origin is MemoryOrigin.CLIENT
    return KnownFact(m.memory_id, m.text, m.kind.value, score, pending, m.event_time, client)
