"""BuildContext and the model-call audit: what the model sees this turn, and what it saw.

One call: (optionally) append the user message -> bring the working set up to date ->
recall past episodes -> assemble under the budget (reducers; compaction when the tail
does not fit) -> store the model call (with any new summary) in one transaction. The
caller streams what was stored, so stored == streamed by construction.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from episodic.domain.access import require_visible
from episodic.domain.agents import MemoryDraft, check_memory, fill_memory
from episodic.domain.assembly import Assembly, AssemblyInput, Budget, Shares, assemble, mandatory_sections
from episodic.domain.context import Compaction, ContextReport, ModelCall, Summary
from episodic.domain.earlier_block import EarlierFound
from episodic.domain.excerpts import choose_excerpts, terms
from episodic.domain.knowledge import KnowledgeItem, check_items, stored_item
from episodic.domain.knowledge_block import Trim
from episodic.domain.known_facts import KnownFact, pending_for_turn, selected, subject_words
from episodic.domain.log import PreparedMessage, countable_text
from episodic.domain.memories import Memory, MemoryOrigin
from episodic.domain.model import (
    Caller,
    EpisodeState,
    JsonValue,
    MemoryConfig,
    Message,
    NewMessage,
    RecallMode,
    Role,
)
from episodic.domain.ports import (
    BackgroundCompactions,
    Clock,
    CompactionListener,
    ContextStore,
    IdFactory,
    MemoryStore,
    ReadsTogether,
    SessionDataStore,
    Summarizer,
    TokenCounter,
)
from episodic.domain.recall import Scope, SearchMode, Snippet
from episodic.domain.reducers import REPLY_PRIMING, least_tokens
from episodic.domain.validation import Limits, Violations, check_id, check_text
from episodic.domain.working_set import WorkingSet
from episodic.errors import CONFIGURATION, FailedPrecondition
from episodic.service.compaction import SharedCompactions, SummaryMaker
from episodic.service.earlier import EarlierRecall
from episodic.service.episodes import EpisodeService
from episodic.service.knowledge import KnowledgeService
from episodic.service.memory_search import MemoryQuery, MemorySearch
from episodic.service.passages import Passages
from episodic.service.privacy import PiiGuard, redact_text
from episodic.service.recall import QueryVectorSource, RecallService, SearchRequest
from episodic.state.recall_memo import RecencyMemo
from episodic.state.token_cache import CachedCounts
from episodic.state.working_set import Key, WorkingSetCache
from episodic.telemetry.tracing import (
    GEN_AI_CONVERSATION_ID,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_USAGE_INPUT_TOKENS,
    Tracing,
    no_tracing,
)

T = TypeVar("T")

# Excerpts of recalled episodes: how many matching messages each (each with its reply), how long.
EXCERPTS_PER_EPISODE = 3
EXCERPT_CHARS = 300
PROFILE_POOL = 4  # "[Known Facts]" fills its unmatched slots from this many times top-K newest memories
_RECALL_MODES = {
    RecallMode.RECENCY: SearchMode.RECENCY,
    RecallMode.SEMANTIC: SearchMode.SEMANTIC,
    RecallMode.HYBRID: SearchMode.HYBRID,
}


@dataclass(frozen=True, slots=True)
class ContextRequest:
    episode_id: str
    user_message: str = ""
    append_user_message: bool = False
    client_message_id: str = ""
    system_prompt: str | None = None
    memory: MemoryDraft = dataclasses.field(default_factory=MemoryDraft)
    model: str = ""
    recall_query: str = ""
    request_id: str = ""
    knowledge: tuple[KnowledgeItem, ...] = ()  # the caller's, rendered in "[Knowledge]"


@dataclass(frozen=True, slots=True)
class TurnQuery:
    """What recall and known facts match this turn by (the redacted text), analysed once."""

    text: str
    matchable: bool  # it has words a search can match (not only stop words)

    @classmethod
    def of(cls, r: ContextRequest) -> TurnQuery:
        text = r.recall_query or r.user_message
        return cls(text, bool(terms(text)))


@dataclass(frozen=True, slots=True)
class Turn:
    """Everything one assembly needs, gathered under the conversation's lock."""

    working_set: WorkingSet
    config: MemoryConfig
    model: str
    snippets: list[Snippet]
    pending_digests: int
    user_seq: int
    request: ContextRequest
    facts: list[KnownFact] = dataclasses.field(default_factory=list)
    session: list[tuple[str, JsonValue]] = dataclasses.field(default_factory=list)
    found: list[KnowledgeItem] = dataclasses.field(default_factory=list)  # stored chunks for this turn
    earlier: EarlierFound | None = None  # this episode's compacted messages matching the turn


@dataclass(slots=True, kw_only=True)
class ContextService:
    store: ContextStore
    episodes: EpisodeService
    recall: RecallService
    tokens: TokenCounter
    summarizer: Summarizer  # inline, local (extractive)
    limits: Limits
    clock: Clock
    new_id: IdFactory
    cache: WorkingSetCache
    memo: RecencyMemo
    passages: Passages  # recalled episodes' messages, for excerpts
    pii: PiiGuard
    summary_pool: Executor  # where inline summaries are made: a small pool of the composition root
    background: BackgroundCompactions | None  # an LLM summarizer's compactions, off the request path
    tracing: Tracing = dataclasses.field(default_factory=no_tracing)
    memories: MemorySearch  # the user's long-term memories, for "[Known Facts]"
    memory_store: MemoryStore  # this episode's PENDING memories, when the turn does not append
    sessions: SessionDataStore
    queries: QueryVectorSource  # shared with recall and memories: embedded once a turn
    knowledge: KnowledgeService  # the agent's documents, for "[Knowledge]"
    reads: ReadsTogether  # a turn's searches share one trip to the database
    earlier: EarlierRecall  # this episode's compacted messages, for "[Earlier in this conversation]"
    # told the tokens of each section of every new model call (metrics)
    rendered: Callable[[Iterable[tuple[str, int]]], None]
    # told what each inline summary newly covers: memories are extracted from it while live
    compacted: CompactionListener | None = None
    counts: CachedCounts = dataclasses.field(init=False)
    compactions: SharedCompactions = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.counts = CachedCounts(self.tokens)
        maker = SummaryMaker(tokens=self.tokens, clock=self.clock)
        self.compactions = SharedCompactions(summarizer=self.summarizer, maker=maker, pool=self.summary_pool)

    async def build(self, caller: Caller, request: ContextRequest) -> tuple[ModelCall, bool]:
        """Returns the stored model call and whether it is new (False: a request_id replay)."""
        _check(request, self.limits)
        if request.request_id:
            stored = await self.store.call_for_request(
                caller.tenant_id, request.episode_id, request.request_id
            )
            if stored is not None:
                require_visible(caller, stored.agent_id, "episode", request.episode_id)
                return stored, False
        key = (caller.tenant_id, request.episode_id)
        async with self.cache.hold(key):
            turn = await self._gather(caller, key, request)
            return await self._assemble_and_store(caller, key, turn.request, turn)

    def _prefetch_query(self, working_set: WorkingSet, config: MemoryConfig, q: TurnQuery) -> None:
        """Starts the query embedding (of the redacted text) before the append is written,
        when recall or known facts will want it; both then take it from `queries`."""
        e = working_set.episode
        scope = Scope(e.tenant_id, e.agent_id, e.user_id)
        by_meaning = _RECALL_MODES.get(config.recall_mode) in (SearchMode.SEMANTIC, SearchMode.HYBRID)
        recalls = by_meaning and q.text.strip() != "" and self.recall.may_find_by_meaning(scope)
        memories = self.memories if config.known_facts and q.matchable else None
        earlier = self.earlier.searches(working_set, config.earlier_budget_percent, q.matchable)
        if (
            recalls
            or (earlier and working_set.compacted_log.embedded > 0)
            or self._searches_knowledge(working_set, config, q)
            or (memories is not None and memories.may_find_by_meaning(scope))
        ):
            self.queries.prefetch(q.text)

    async def _append_user_message(
        self, key: Key, working_set: WorkingSet, r: ContextRequest, allowance: int, config: MemoryConfig
    ) -> tuple[WorkingSet, int, list[Memory] | None]:
        """Appends the (checked, authorized, redacted) user message and takes it into the
        working set held under the lock; the log is read again only when another writer
        appended in between. The append's transaction also reads the episode's PENDING
        memories when known facts want them (None: not appended, not read)."""
        if not r.append_user_message:
            return working_set, 0, None
        encoding = working_set.episode.token_encoding
        message = NewMessage(Role.USER, r.user_message, client_message_id=r.client_message_id or None)
        prepared = PreparedMessage(message, self.counts.count(countable_text(message), encoding), encoding)
        stored, pending = await self.episodes.append_turn(key[0], key[1], prepared, config.known_facts)
        if working_set.appended(stored):
            self.cache.put(key, working_set)
        else:
            working_set = await self._working_set(key, allowance)
        return working_set, stored.seq, pending

    async def _gather(self, caller: Caller, key: Key, r: ContextRequest) -> Turn:
        """Everything is checked before the user message is appended: a refused call
        writes nothing. Each step runs once: at most one read of what is new (none when
        the held set is current and the turn appends: the append finds what it missed),
        the PII policy and the agent's memory configuration applied once, the append taken
        into the held set."""
        with self.tracing.span("load_working_set", {GEN_AI_CONVERSATION_ID: r.episode_id}) as span:
            allowance = r.memory.max_working_memory_tokens or 0
            working_set = self._current(key, allowance) if r.append_user_message else None
            if working_set is None:
                working_set = await self._working_set(key, allowance)
            require_visible(caller, working_set.episode.agent_id, "episode", r.episode_id)
            r = self._without_pii(caller, working_set, r)
            config = _effective_memory(working_set, r.memory).within(self.limits.max_context_tokens)
            model = self._model(working_set, r.model)
            self._check_ceiling(r, working_set, config)
            query = TurnQuery.of(r)
            self._prefetch_query(working_set, config, query)
            working_set, user_seq, pending = await self._append_user_message(
                key, working_set, r, allowance, config
            )
            span.set_attribute("episodic.working_set.messages", len(working_set.tail))
        searches = self._searches(caller, working_set, config, query, pending)
        if "knowledge" in searches and len(searches) > 1:
            # at once, so the knowledge's full-text read shares recall's trip to the database
            # (without knowledge a turn has one search read at most: tasks would only cost)
            with self.reads.together():
                results = await asyncio.gather(*[search() for search in searches.values()])
                found = dict(zip(searches, results, strict=True))
        else:  # one at a time; a search not reached (an earlier one raised) is never started
            found = {name: await search() for name, search in searches.items()}
        snippets, pending_digests = found.get("recall", ([], 0))
        return Turn(
            working_set, config, model, snippets, pending_digests, user_seq, r,
            found.get("known_facts", []), found.get("session", []), found.get("knowledge", []),
            found.get("earlier"),
        )  # fmt: skip

    def _searches(
        self, caller: Caller, ws: WorkingSet, config: MemoryConfig, q: TurnQuery, pending: list[Memory] | None
    ) -> dict[str, Callable[[], Coroutine[Any, Any, Any]]]:
        """What this turn looks up beside its working set, by name; only what it will use.
        Each is started when it is run (a coroutine made and never awaited is a leak)."""
        found: dict[str, Callable[[], Coroutine[Any, Any, Any]]] = {}
        if _RECALL_MODES.get(config.recall_mode) is not None:
            found["recall"] = partial(
                self._spanned, "recall", ws, partial(self._recall, caller, ws, config, q)
            )
        if config.known_facts:
            found["known_facts"] = partial(
                self._spanned, "known_facts", ws, partial(self._known_facts, ws, config, q, pending)
            )
        if config.session_data_keys:
            found["session"] = partial(self._session, ws, config)
        if self.earlier.searches(ws, config.earlier_budget_percent, q.matchable):
            found["earlier"] = partial(self._spanned, "earlier", ws, partial(self.earlier.found, ws, q.text))
        if self._searches_knowledge(ws, config, q):
            found["knowledge"] = partial(
                self._spanned, "knowledge", ws, partial(self._found_knowledge, ws, config, q)
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

    def _current(self, key: Key, allowance: int) -> WorkingSet | None:
        held = self.cache.current(key)
        return None if held is None or _holds_too_little(held, allowance) else held

    async def _known_facts(
        self, ws: WorkingSet, config: MemoryConfig, query: TurnQuery, pending: list[Memory] | None
    ) -> list[KnownFact]:
        """This episode's PENDING memories (its working memory) first, then the user's long-term
        memories that match the turn (HYBRID, `memory_min_score` on the cosine), then the user's
        profile for the slots of `memory_top_k` the match left (facts and preferences before
        events, newest first; scored 0), without the ones that repeat a fact before them."""
        if not config.known_facts:
            return []
        e = ws.episode
        if pending is None:
            pending = [m for m, _ in await self.memory_store.pending(e.tenant_id, e.episode_id)]
        scope, top_k = Scope(e.tenant_id, e.agent_id, e.user_id), config.memory_top_k
        matched: list[KnownFact] = []
        if query.matchable:
            q = MemoryQuery(
                e.agent_id, e.user_id, SearchMode.HYBRID, query.text, top_k, config.memory_min_score
            )
            hits = await self.memories.ranked(scope, q, SearchMode.HYBRID, top_k)
            matched = [_fact(h.memory, h.score) for h in hits if h.memory.episode_id != e.episode_id]
        newest: list[KnownFact] = []
        # a matching search loaded the scope: known to hold nothing, it has no profile to read
        known_empty = query.matchable and not self.memories.may_find_by_meaning(scope)
        if len(matched) < top_k and not known_empty:
            pool = top_k * PROFILE_POOL
            q = MemoryQuery(e.agent_id, e.user_id, SearchMode.RECENCY, "", pool)
            hits = await self.memories.ranked(scope, q, SearchMode.RECENCY, pool)
            newest = [_fact(h.memory, 0.0) for h in hits if h.memory.episode_id != e.episode_id]
        newest_first = [_fact(m, 1.0, pending=True) for m in reversed(pending)]
        held = pending_for_turn(newest_first, query.text, top_k)
        return selected(held, matched, newest, top_k, subject_words(e.user_id))

    async def _session(self, ws: WorkingSet, config: MemoryConfig) -> list[tuple[str, JsonValue]]:
        if not config.session_data_keys:
            return []
        data = (await self.sessions.get(ws.episode.tenant_id, ws.episode.episode_id)).data
        return [(key, data[key]) for key in config.session_data_keys if key in data]

    def _without_pii(self, caller: Caller, working_set: WorkingSet, r: ContextRequest) -> ContextRequest:
        """Under a redact policy the user message is rendered, appended and embedded (as
        the recall query) with placeholders only."""
        if not self.pii.redacts(caller.tenant_id, working_set.agent.memory.pii_policy):
            return r
        return dataclasses.replace(
            r, user_message=redact_text(r.user_message), recall_query=redact_text(r.recall_query)
        )

    def _check_ceiling(self, r: ContextRequest, working_set: WorkingSet, config: MemoryConfig) -> None:
        probe = _inputs(r, working_set, config)
        mandatory_sections(probe, partial(self.counts.count, encoding=working_set.episode.token_encoding))

    async def _working_set(self, key: Key, allowance: int) -> WorkingSet:
        """Brings the cached working set up to date with one read of what is new (other
        replicas and plain AddMessage calls write the log too); builds it on a miss. Reads
        hold at most about `allowance` tokens (or the agent's budget) of new messages."""
        cached = self.cache.get(key)
        if cached is not None and _holds_too_little(cached, allowance):
            cached = None  # a larger budget than the tail was read for: read it again
        known_summary, after = (cached.summary_to, cached.last_seq) if cached else (0, None)
        found = await self.store.sources(*key, known_summary, after, allowance)
        if cached is None:
            cached = WorkingSet.of(found)
        else:
            cached.absorb(found)
        self.cache.put(key, cached)
        return cached

    def _model(self, working_set: WorkingSet, requested: str) -> str:
        """A model tiktoken knows must count with the episode's encoding (stored counts use
        it); unknown model names are taken as labels."""
        model = requested or working_set.agent.model
        encoding = self.tokens.known_model_encoding(model) if requested else None
        episode_encoding = working_set.episode.token_encoding
        if encoding is not None and encoding != episode_encoding:
            raise FailedPrecondition(
                f"model {model!r} counts tokens with {encoding}, but this episode's stored counts use "
                f"{episode_encoding}; build the context for a model of the same encoding",
                reason="ENCODING_MISMATCH",
            )
        return model

    async def _recall(
        self, caller: Caller, working_set: WorkingSet, config: MemoryConfig, q: TurnQuery
    ) -> tuple[list[Snippet], int]:
        mode = _RECALL_MODES.get(config.recall_mode)
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
        found = await self._search(caller, request)
        snippets = [s for s in found[0] if s.episode_id != episode.episode_id]
        return await self._with_excerpts(caller, snippets, q), found[1]

    async def _with_excerpts(self, caller: Caller, snippets: list[Snippet], q: TurnQuery) -> list[Snippet]:
        """Each recalled episode's messages that match the query, verbatim: the detail a
        summary leaves out is what people ask about."""
        if not snippets or not q.matchable:
            return snippets
        transcripts = await self.passages.of(caller.tenant_id, [s.episode_id for s in snippets])
        chosen = choose_excerpts(q.text, transcripts, EXCERPTS_PER_EPISODE, EXCERPT_CHARS)
        return [dataclasses.replace(s, excerpts=chosen.get(s.episode_id, ())) for s in snippets]

    async def _search(self, caller: Caller, r: SearchRequest) -> tuple[list[Snippet], int]:
        """Recency answers are remembered between turns (see RecencyMemo)."""
        if r.mode is not SearchMode.RECENCY:
            found = await self.recall.search(caller, r)
            return found.snippets, found.pending_digests
        scope = Scope(caller.tenant_id, r.agent_id, r.user_id)
        key = (scope, r.top_k, r.min_score)
        remembered = self.memo.get(key)
        if remembered is not None:
            return remembered
        version = self.memo.version(scope)
        found = await self.recall.search(caller, r)
        self.memo.put(key, version, found.snippets, found.pending_digests)
        return found.snippets, found.pending_digests

    async def _assemble_and_store(
        self, caller: Caller, key: Key, r: ContextRequest, turn: Turn
    ) -> tuple[ModelCall, bool]:
        count = partial(self.counts.count, encoding=turn.working_set.episode.token_encoding)
        with self.tracing.span("reduce", {GEN_AI_CONVERSATION_ID: r.episode_id}):
            inputs = _inputs(r, turn.working_set, turn.config, turn.snippets, turn.user_seq)
            knowledge = (*r.knowledge, *turn.found)
            inputs = dataclasses.replace(
                inputs, facts=turn.facts, session=turn.session, knowledge=knowledge, earlier=turn.earlier
            )
            assembly = assemble(inputs, count, self._trim(turn))
        assembly, summary, compaction = await self._compact(key, turn, inputs, assembly, count)
        call = self._model_call(caller, r, turn, assembly, compaction)
        with self.tracing.span("persist", {GEN_AI_CONVERSATION_ID: r.episode_id}):
            stored, fresh = await self.store.save_call(call, summary)
        if fresh:  # the sections rendered: an absent one observed as 0 skewed every average
            self.rendered(
                (section, tokens) for section, tokens in stored.report.section_tokens.items() if tokens
            )
        if summary is not None:
            if self.compacted is not None:
                self.compacted.compacted(turn.working_set.episode, _newly_covered(turn.working_set, summary))
            turn.working_set.compacted(summary)
            self.cache.put(key, turn.working_set)
        return stored, fresh

    async def _compact(
        self,
        key: Key,
        turn: Turn,
        inputs: AssemblyInput,
        assembly: Assembly,
        count: Callable[[str], int],
    ) -> tuple[Assembly, Summary | None, Compaction]:
        if turn.working_set.episode.state is not EpisodeState.OPEN:
            return assembly, None, Compaction.SKIPPED_CLOSED
        through = assembly.compact_through
        if not through:
            return assembly, None, Compaction.NONE
        if self.background is not None:
            self.background.schedule(key, turn.working_set, through)
            return assembly, None, Compaction.SCHEDULED
        with self.tracing.span("summarize", {GEN_AI_CONVERSATION_ID: key[1]}) as span:
            summary = await self.compactions.summary(key, turn.working_set, through)
            span.set_attribute("episodic.summary.to_seq", through)
        rest = [m for m in inputs.tail if m.seq > through]
        again = dataclasses.replace(inputs, summary=summary, tail=rest, can_compact=False, rendered_tail=None)
        return assemble(again, count, self._trim(turn)), summary, Compaction.SUMMARIZED

    def _trim(self, turn: Turn) -> Trim:
        return partial(self.tokens.prefix, encoding=turn.working_set.episode.token_encoding)

    def _model_call(
        self, caller: Caller, r: ContextRequest, turn: Turn, assembly: Assembly, compaction: Compaction
    ) -> ModelCall:
        episode = turn.working_set.episode
        call_id = f"mc_{self.new_id()}"
        with self.tracing.span("render", {GEN_AI_CONVERSATION_ID: episode.episode_id}) as span:
            report = _report(turn, assembly, compaction, call_id, self.tracing.trace_id())
            span.set_attribute(GEN_AI_REQUEST_MODEL, report.model)
            span.set_attribute(GEN_AI_USAGE_INPUT_TOKENS, report.total_tokens)
            span.set_attribute("episodic.model_call.id", call_id)
            if self.tracing.capture_content:  # opt-in only: the rendered text is personal data
                span.set_attribute(GEN_AI_INPUT_MESSAGES, _input_messages(assembly))
        return ModelCall(
            caller.tenant_id, call_id, episode.episode_id, episode.agent_id, episode.user_id,
            self.clock(), assembly.messages, report, r.request_id,
        )  # fmt: skip


def _check(r: ContextRequest, limits: Limits) -> None:
    v = Violations()
    check_id(v, "episode_id", r.episode_id)
    check_text(v, "user_message", r.user_message, limits.max_content_bytes)
    check_text(v, "recall_query", r.recall_query, limits.max_content_bytes)
    check_text(v, "model", r.model, 256)
    check_id(v, "client_message_id", r.client_message_id, required=False)
    check_id(v, "request_id", r.request_id, required=False)
    if r.system_prompt is not None:
        check_text(v, "system_prompt", r.system_prompt, limits.max_content_bytes)
    if r.append_user_message and not r.user_message.strip():
        v.add("user_message", "is required when append_user_message is set")
    if r.client_message_id and not r.append_user_message:
        v.add("client_message_id", "applies only with append_user_message")
    check_items(v, r.knowledge)
    v.raise_if_any()


def _effective_memory(working_set: WorkingSet, draft: MemoryDraft) -> MemoryConfig:
    config = fill_memory(working_set.agent.memory, draft)
    v = Violations()
    check_memory(v, "memory_config", config)
    v.raise_if_any(CONFIGURATION)
    return config


def _inputs(
    r: ContextRequest,
    ws: WorkingSet,
    config: MemoryConfig,
    snippets: Sequence[Snippet] = (),
    user_seq: int = 0,
) -> AssemblyInput:
    """The user message appended by this call (`user_seq`) is rendered last, not in history;
    retracted messages are in no context."""
    keep = [i for i, m in enumerate(ws.tail) if m.seq != user_seq and m.retracted_at is None]
    everything = len(keep) == len(ws.tail)
    tail: list[Message] = ws.tail if everything else [ws.tail[i] for i in keep]
    rendered = ws.rendered if everything else [ws.rendered[i] for i in keep]
    return AssemblyInput(
        system_prompt=r.system_prompt if r.system_prompt is not None else ws.agent.system_prompt,
        user_message=r.user_message,
        snippets=snippets,
        summary=ws.shown_summary,
        tail=tail,
        keep_tool_results=config.tool_results_kept_verbatim,
        budget=Budget(config.max_working_memory_tokens, config.ceiling_tokens),
        can_compact=True,
        system_prompt_overridden=r.system_prompt is not None,
        rendered_tail=rendered,
        held_after=ws.held_after,
        knowledge=r.knowledge,
        shares=Shares(
            config.knowledge_budget_percent,
            config.known_facts_budget_percent,
            config.recall_budget_percent,
            config.earlier_budget_percent,
        ),
    )


def _holds_too_little(ws: WorkingSet, allowance: int) -> bool:
    """A tail with unheld messages before it shows as many turns as a whole one only up
    to the allowance it was read for."""
    return ws.unheld > 0 and sum(least_tokens(m) for m in ws.tail) <= allowance


def _report(
    turn: Turn, assembly: Assembly, compaction: Compaction, call_id: str, trace_id: str
) -> ContextReport:
    return ContextReport(
        section_tokens=assembly.section_tokens,
        reply_priming=REPLY_PRIMING,
        budget=turn.config.max_working_memory_tokens,
        ceiling=turn.config.ceiling_tokens,
        over_budget=assembly.over_budget,
        pruned=assembly.pruned,
        stubbed=assembly.stubbed,
        summarized=_covered(assembly),
        summary_span=assembly.summary_span,
        history_span=assembly.history_span,
        compaction=compaction,
        recalled=assembly.recalled,
        memories=assembly.memories,
        session_keys=assembly.session_keys,
        knowledge=assembly.knowledge,
        earlier=assembly.earlier,
        pending_digests=turn.pending_digests,
        model=turn.model,
        token_encoding=turn.working_set.episode.token_encoding,
        model_call_id=call_id,
        trace_id=trace_id,
        user_message_seq=turn.user_seq,
    )


def _input_messages(assembly: Assembly) -> str:
    """The rendered messages in the GenAI input-messages shape, as one JSON string."""
    parts = [
        {"role": m.role.value, "parts": [{"type": "text", "content": m.content}]} for m in assembly.messages
    ]
    return json.dumps(parts, ensure_ascii=False)


def _newly_covered(ws: WorkingSet, summary: Summary) -> list[Message]:
    """The tail messages a new summary folds in, before the working set drops them."""
    return [m for m in ws.tail if m.seq <= summary.to_seq and m.retracted_at is None]


def _covered(assembly: Assembly) -> int:
    span = assembly.summary_span
    return span.to_seq - span.from_seq + 1 if span.to_seq else 0


def _fact(m: Memory, score: float, *, pending: bool = False) -> KnownFact:
    client = m.source.origin is MemoryOrigin.CLIENT
    return KnownFact(m.memory_id, m.text, m.kind.value, score, pending, m.event_time, client)
