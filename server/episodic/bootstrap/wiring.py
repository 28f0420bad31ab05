"""The wiring: adapters -> the in-RAM state and its one change owner, the use cases and the
background workers. It opens nothing and starts nothing (`build_core`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from concurrent.futures import Executor, ThreadPoolExecutor
from datetime import timedelta

from episodic.bootstrap.adapters import KNOWLEDGE_WORDS_SHARE, build_indexes
from episodic.bootstrap.containers import Adapters, Core, State, Workers
from episodic.bootstrap.thread_priority import BULK_EMBED_NICE, QUERY_EMBED_NICE, niced_pool
from episodic.config import ExtractorKind, Settings, SummarizerKind, values
from episodic.config.concerns import CacheSettings
from episodic.domain.digests import indexed_with
from episodic.index.words import Bm25WordIndex
from episodic.service.agent_deletion import AgentDeletion
from episodic.service.agents import AgentService
from episodic.service.compaction import SharedCompactions, SummaryMaker, TailCompaction
from episodic.service.context import ContextService
from episodic.service.earlier import EarlierRecall
from episodic.service.episodes import EpisodeService
from episodic.service.erasure import EraseService
from episodic.service.index_check import IndexChecker
from episodic.service.inspection import InspectionService
from episodic.service.knowledge import KnowledgeService, ResidentKnowledge, SearchTimings
from episodic.service.known_agents import KnownAgents
from episodic.service.live_memories import LiveMemories
from episodic.service.memories import Extraction, MemoryService
from episodic.service.memory_search import MemorySearch
from episodic.service.memory_tools import MemoryTools
from episodic.service.model_calls import ModelCallRecorder, ModelCallService
from episodic.service.passages import Passages
from episodic.service.privacy import PiiGuard
from episodic.service.recall import RecallService
from episodic.service.services import Services
from episodic.service.session_data import SessionDataService
from episodic.service.transfer import TransferService
from episodic.service.turn_searches import TurnSearches
from episodic.service.users import UserService
from episodic.service.watch import LiveEpisodes, WatchService
from episodic.state.chunk_cache import ChunkCache
from episodic.state.digest_memo import RememberedDigestReads
from episodic.state.embed_turns import QUERY_SLOTS, FairEmbeddings
from episodic.state.fixed_facts import FixedFactsCache
from episodic.state.health import Health
from episodic.state.knowledge_words import ResidentWords
from episodic.state.query_vectors import QueryVectors
from episodic.state.recall_memo import RecencyMemo, ScopeVersions
from episodic.state.records_in_flight import RecordsInFlight
from episodic.state.shares import TenantShares
from episodic.state.spoken_cache import SpokenCache
from episodic.state.visibility import Visibility
from episodic.state.watch_hub import WatchHub
from episodic.state.working_set import WorkingSetCache
from episodic.telemetry.metrics import Metrics
from episodic.telemetry.tracing import Tracing, no_tracing
from episodic.workers.compactor import BackgroundCompactor
from episodic.workers.digester import Digester, DigestPace
from episodic.workers.feed import FeedPruner, FeedTail
from episodic.workers.reaper import IdleReaper
from episodic.workers.recall_marks import RecallMarks
from episodic.workers.retention import RetentionJob
from episodic.workers.warm_start import WarmStart

log = logging.getLogger("episodic.server")


def build_state(settings: Settings, adapters: Adapters) -> State:
    """Every cache derived from SQL watches the change owner, so a change announced there
    reaches all of them. Nothing is opened or started here."""
    default, tenants = values.pii_policies(settings)
    lock = asyncio.Lock()  # the owner's, shared with the index caches' last load try
    index, memory_index, knowledge_index = build_indexes(CacheSettings.of(settings), adapters, lock)
    health = Health()
    visibility = Visibility(
        index=index, memory_index=memory_index, knowledge_index=knowledge_index, feed=adapters.feed, lock=lock
    )
    tail = FeedTail(
        feed=adapters.change_log, owner=visibility, signals=adapters.signals, healthy=health.part("feed"),
        poll_seconds=settings.feed_poll_seconds,
    )  # fmt: skip
    state = State(
        visibility=visibility,
        tail=tail,
        index=index,
        memory_index=memory_index,
        knowledge_index=knowledge_index,
        chunks=ChunkCache(settings.knowledge_cache_bytes, adapters.knowledge, adapters.monotonic),
        knowledge_words=ResidentWords(
            adapters.knowledge, Bm25WordIndex, max(1, int(settings.index_cache_bytes * KNOWLEDGE_WORDS_SHARE))
        ),
        health=health,
        working_sets=WorkingSetCache(settings.working_set_max_bytes),
        versions=ScopeVersions(),
        fixed_facts=FixedFactsCache(),
        spoken=SpokenCache(),
        pii=PiiGuard(agents=adapters.agents, default=default, tenants=tenants, clock=adapters.monotonic),
        # subscribes: before start
        watch=WatchHub(adapters.drafts, adapters.signals, values.watch_limits(settings)),
        shares=TenantShares(values.share_limits(settings), clock=adapters.monotonic),
    )
    watchers = (
        state.working_sets, state.versions, state.fixed_facts, state.spoken, state.pii, state.chunks,
        state.knowledge_words,
    )  # fmt: skip
    for watcher in watchers:
        state.visibility.watch(watcher)
    state.visibility.watch(state.watch)  # removed episodes end their watches at once
    return state


# Summaries are pure-Python CPU work under the GIL: a second thread would add no throughput,
# only contention with the event loop that serves every tenant.
SUMMARY_THREADS = 1


# Embeddings written in bulk (documents' chunks, memories, digests) share the bulk threads
# (settings.bulk_embed_threads, default 1): however many a tenant asks for at once, they take
# that many cores. Query embeddings (one text, on a turn's path) do not wait behind them.
# Tenants take both in turn (state/embed_turns.py).
EMBED_THREADS = 1


def new_embed_pool(threads: int = EMBED_THREADS) -> ThreadPoolExecutor:
    """The bulk threads; FairEmbeddings' bulk slots (build_core) are as many. Below the query
    threads, which are below the loop and the writer (thread_priority.py)."""
    return niced_pool(threads, "episodic-embed", BULK_EMBED_NICE)


def new_query_pool() -> ThreadPoolExecutor:
    """The threads that embed turns' queries, one per query slot, niced below the loop and
    the writer (thread_priority.py); not asyncio's default executor, whose threads run the
    index searches on the turn's path at normal priority."""
    return niced_pool(QUERY_SLOTS, "episodic-query-embed", QUERY_EMBED_NICE)


def new_summary_pool() -> ThreadPoolExecutor:
    """Where extractive summaries are made (compaction, digests), whoever asks for them."""
    return ThreadPoolExecutor(SUMMARY_THREADS, thread_name_prefix="episodic-summary")


def build_memory_service(
    settings: Settings,
    adapters: Adapters,
    state: State,
    pool: Executor,
    embed_pool: Executor | None = None,
    embeddings: FairEmbeddings | None = None,
) -> MemoryService:
    a = adapters
    extraction = Extraction(  # an LLM waits on the network: it must not hold the pool
        extractor=a.extractor, pool=None if settings.extractor == ExtractorKind.OPENAI else pool
    )
    return MemoryService(
        store=a.memories, episodes=a.episodes, agents=a.agents, index=state.memory_index,
        changes=state.visibility, pii=state.pii, extraction=extraction, limits=values.limits(settings),
        clock=a.clock, new_id=a.new_id, quota=state.shares,
        embeddings=embeddings if embeddings is not None else FairEmbeddings(a.embedder, embed_pool),
    )  # fmt: skip


def build_digester(
    settings: Settings,
    adapters: Adapters,
    state: State,
    pool: Executor,
    memories: MemoryService,
    metrics: Metrics | None = None,
    embed_pool: Executor | None = None,
    embeddings: FairEmbeddings | None = None,
) -> Digester:
    # An LLM waits on the network: it must not hold the pool.
    llm = settings.summarizer == SummarizerKind.OPENAI
    return Digester(
        store=adapters.digests,
        summarizer=adapters.summarizer,
        embedder=adapters.embedder,
        changes=state.visibility,
        clock=adapters.clock,
        summary_pool=None if llm else pool,
        embed_pool=embed_pool,
        embeddings=embeddings,
        promote=memories.promote_closed,
        pace=DigestPace(workers=settings.digest_workers),
        on_failure=metrics.digest_failed if metrics is not None and metrics.enabled else None,
    )


def build_compactor(
    settings: Settings, adapters: Adapters, state: State, live: LiveMemories | None = None
) -> BackgroundCompactor | None:
    """Extractive compaction runs inline; a configured LLM summarizer runs in the background.
    `live` is told what each summary newly covers, as BuildContext tells it of inline ones."""
    if settings.summarizer != SummarizerKind.OPENAI:
        return None
    return BackgroundCompactor(
        summarizer=adapters.summarizer,
        maker=SummaryMaker(tokens=adapters.tokens, clock=adapters.clock),
        store=adapters.context,
        cache=state.working_sets,
        listener=live,
    )


def _unmetered(sections: Iterable[tuple[str, int]]) -> None:
    """Where a model call's section tokens go when no metrics are served."""


def build_services(
    settings: Settings,
    adapters: Adapters,
    state: State,
    *,
    digester: Digester,
    compactor: BackgroundCompactor | None,
    pool: Executor,
    tracing: Tracing,
    memories: MemoryService,
    marks: RecallMarks,
    metrics: Metrics | None = None,
    live: LiveMemories | None = None,
    embed_pool: Executor | None = None,
) -> Services:
    a, limits, clock = adapters, values.limits(settings), adapters.clock
    metered = metrics if metrics is not None and metrics.enabled else None
    queries = QueryVectors(a.embedder, embeddings=memories.embeddings)
    known = KnownAgents()  # agents known to exist, forgotten when updated or deleted (any replica)
    state.visibility.watch(known)
    memory_search = MemorySearch(
        store=a.memories, agents=a.agents, embedder=a.embedder, index=state.memory_index, limits=limits,
        clock=clock, marks=marks, queries=queries, known_agents=known,
    )  # fmt: skip
    episodes = EpisodeService(
        episodes=a.episodes, agents=a.agents, tokens=a.tokens, limits=limits, clock=clock,
        new_id=a.new_episode_id, changes=state.visibility, digests=digester, pii=state.pii,
        fixed_facts=state.fixed_facts, tracing=tracing, live=LiveEpisodes(state.watch, a.drafts),
    )  # fmt: skip
    knowledge = KnowledgeService(
        store=a.knowledge, agents=a.agents, embedder=a.embedder,
        resident=ResidentKnowledge(state.knowledge_index, state.knowledge_words, state.chunks),
        changes=state.visibility, limits=limits, clock=clock,
        embed_pool=embed_pool, embeddings=memories.embeddings, queries=queries, quota=state.shares,
        timings=SearchTimings(metered.knowledge_searched, a.monotonic) if metered else None,
    )  # fmt: skip
    knowledge.known_agents = known
    passages = Passages(messages=a.context, cache=state.spoken)
    recall = RecallService(
        digests=RememberedDigestReads(a.digests, state.versions, clock=a.monotonic), agents=a.agents,
        embedder=a.embedder, index=state.index, limits=limits,
        clock=clock, passages=passages, tracing=tracing, queries=queries,
        timed=metered.recall_finished if metered else None, known_agents=known,
    )  # fmt: skip
    searches = TurnSearches(
        past=recall, memo=RecencyMemo(state.versions, clock=a.monotonic), transcripts=passages,
        memories=memory_search, memory_store=a.memories, sessions=a.sessions, queries=queries,
        knowledge=knowledge, reads=a.reads, earlier=EarlierRecall(
            embedder=a.embedder, queries=queries, embeddings=memories.embeddings
        ),
        scopes=(state.index, state.memory_index), tracing=tracing,
    )  # fmt: skip
    inline = SharedCompactions(  # the local (extractive) summarizer, in the summary pool
        summarizer=a.inline_summarizer, maker=SummaryMaker(tokens=a.tokens, clock=clock), pool=pool
    )
    calls = ModelCallRecorder(
        store=a.context, clock=clock, new_id=a.new_id,
        rendered=metered.context_rendered if metered else _unmetered, in_flight=RecordsInFlight(),
    )  # fmt: skip
    context = ContextService(
        store=a.context, turns=episodes, tokens=a.tokens, limits=limits, cache=state.working_sets,
        pii=state.pii, searches=searches, calls=calls, tracing=tracing,
        compaction=TailCompaction(inline=inline, background=compactor, listener=live),
    )  # fmt: skip
    model_calls = ModelCallService(
        store=a.context, episodes=episodes, limits=limits, clock=clock, in_flight=calls.in_flight
    )
    agents = AgentService(
        store=a.agents, tokens=a.tokens, limits=limits, clock=clock, changes=state.visibility
    )
    erasure = EraseService(
        eraser=a.eraser, changes=state.visibility, clock=clock, new_id=a.new_id, ledger=a.erasure_ledger
    )
    return Services(
        episodes=episodes,
        agents=agents,
        recall=recall,
        context=context,
        model_calls=model_calls,
        knowledge=knowledge,
        transfer=TransferService(
            transfer=a.transfer,
            memories=memories,
            changes=state.visibility,
            digests=digester,
            clock=clock,
            tokens=a.tokens,
            limits=limits,
            quota=state.shares,
        )
        if a.transfer is not None
        else None,
        erasure=erasure,
        index_checker=IndexChecker(
            store=a.digest_keys, index=state.index, model=indexed_with(a.embedder.model_id)
        ),
        knowledge_checker=IndexChecker(
            store=a.knowledge, index=state.knowledge_index, model=a.embedder.model_id
        ),
        memories=memories,
        memory_search=memory_search,
        sessions=SessionDataService(
            store=a.sessions, episodes=a.episodes, pii=state.pii, limits=limits, clock=clock
        ),
        memory_tools=MemoryTools(memories=memories, search=memory_search, episodes=a.episodes),
        watch=WatchService(
            episodes=episodes,
            drafts=a.drafts,
            hub=state.watch,
            limits=limits,
            watch_limits=values.watch_limits(settings),
            draft_limits=values.draft_limits(settings),
            clock=clock,
        ),
        inspection=InspectionService(
            agents=agents,
            episodes=episodes,
            model_calls=model_calls,
            knowledge=knowledge,
            users=a.users,
            log=a.episodes,
            calls=a.context,
        ),
        users=UserService(users=a.users, agents=a.agents, limits=limits),
        agent_deletion=AgentDeletion(agents=a.agents, erasure=erasure),
    )


def build_workers(
    settings: Settings,
    adapters: Adapters,
    state: State,
    services: Services,
    digester: Digester,
    compactor: BackgroundCompactor | None,
    marks: RecallMarks,
    live: LiveMemories,
) -> Workers:
    reaper = IdleReaper(
        episodes=adapters.episodes,
        service=services.episodes,
        clock=adapters.clock,
        on_closed=digester.wake,
        interval_seconds=settings.idle_sweep_seconds,
        leadership=adapters.leadership,
        cluster_now=adapters.cluster_now,
    )
    retention = RetentionJob(
        store=adapters.retention,
        changes=state.visibility,
        clock=adapters.clock,
        grace=timedelta(days=settings.retention_grace_days),
        interval_seconds=settings.retention_sweep_seconds,
        expire_memories=services.memories.remove_expired,
        expire_documents=services.knowledge.remove_expired,
        leadership=adapters.leadership,
    )
    pruner = FeedPruner(
        feed=adapters.change_log,
        retention_seconds=settings.feed_retention_seconds,
        leadership=adapters.leadership,
        clock=adapters.monotonic,
    )
    return Workers(
        digester=digester, reaper=reaper, retention=retention, compactor=compactor, marks=marks,
        pruner=pruner, earlier=services.context.searches.earlier, live_memories=live,
        warm_start=build_warm_start(settings, adapters, state, services),
    )  # fmt: skip


def build_warm_start(
    settings: Settings, adapters: Adapters, state: State, services: Services
) -> WarmStart | None:
    if adapters.recently_active is None:
        return None
    cache, room = state.working_sets, settings.working_set_max_bytes // 2
    return WarmStart(
        recent=adapters.recently_active,
        warm=services.context.warm,
        full=lambda: cache.total_bytes >= room,
        limit=settings.warm_start_conversations,
    )


def build_core(
    settings: Settings,
    adapters: Adapters,
    *,
    pool: Executor,
    embed_pool: Executor | None = None,
    query_pool: Executor | None = None,
    tracing: Tracing | None = None,
    metrics: Metrics | None = None,
) -> Core:
    """The pure wiring over the ports, the same for the server (over SQL) and the unit tests
    (over fakes): no database opened, no thread, no task started; `pool` runs summaries and
    extractions, `embed_pool` bulk embeddings, `query_pool` turns' query embeddings (None:
    asyncio's default executor); tenants take the embedding threads in turn."""
    state = build_state(settings, adapters)
    embeddings = FairEmbeddings(
        adapters.embedder, embed_pool, query_pool=query_pool, bulk_slots=settings.bulk_embed_threads
    )
    memories = build_memory_service(settings, adapters, state, pool, embed_pool, embeddings)
    digester = build_digester(settings, adapters, state, pool, memories, metrics, embed_pool, embeddings)
    live = LiveMemories(memories=memories)  # memories from compacted turns, while episodes are open
    compactor = build_compactor(settings, adapters, state, live)
    marks = RecallMarks(store=adapters.memories)
    services = build_services(
        settings, adapters, state, digester=digester, compactor=compactor, pool=pool,
        tracing=tracing if tracing is not None else no_tracing(), memories=memories, marks=marks,
        metrics=metrics, live=live, embed_pool=embed_pool,
    )  # fmt: skip
    workers = build_workers(settings, adapters, state, services, digester, compactor, marks, live)
    return Core(state, services, workers)
