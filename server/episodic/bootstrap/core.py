"""The composition root: the one place that knows every concrete class. It builds one of
each adapter per process (database, writer, stores, token counter, models, index), the
in-RAM state and its one change owner, the use cases and the background workers, and hands
them to the gRPC server. `open_app(settings, replace=...)` + `serve_app(app)` is the only
door for running the product in-process (tests, the lab)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from episodic.bootstrap import system
from episodic.bounded import within
from episodic.config import ConfigError, EmbedderKind, ExtractorKind, Settings, SummarizerKind, TlsMaterial
from episodic.domain.digests import indexed_with
from episodic.domain.erasure_ledger import Replayed
from episodic.domain.ports.changes import ChangeFeed, ChangeLog, Leadership, Signals
from episodic.domain.ports.clock import Clock, IdFactory
from episodic.domain.ports.digests import DigestStore
from episodic.domain.ports.episodes import (
    AgentStore,
    ContextStore,
    DraftStore,
    EpisodeStore,
    ReadsTogether,
    RetentionStore,
    UserDirectory,
)
from episodic.domain.ports.indexes import ScopeVectorSource, StoredVectorKeys, VectorIndex
from episodic.domain.ports.knowledge import KnowledgeStore
from episodic.domain.ports.memories import MemoryStore, SessionDataStore
from episodic.domain.ports.models import Embedder, MemoryExtractor, Summarizer, TokenCounter
from episodic.domain.ports.users import Eraser, ErasureLedger, ErasureRecords, UserTransfer
from episodic.edges.grpc.access_log import AccessLog, JsonLinesAccessLog, NoAccessLog
from episodic.edges.grpc.arrivals import QUIET_SECONDS
from episodic.edges.grpc.server import GrpcServer, Services, build_server
from episodic.edges.grpc.shares import Refused
from episodic.edges.http.guard import HttpLimits
from episodic.edges.inspector.serving import serving_inspector
from episodic.edges.keys import KeyRing
from episodic.embed import EmbeddingError, make_embedder
from episodic.embed.model_cache import default_cache_dir
from episodic.errors import EpisodicError
from episodic.index import FaissVectorIndex
from episodic.index.words import Bm25WordIndex
from episodic.service.agents import AgentService
from episodic.service.compaction import SummaryMaker
from episodic.service.context import ContextService
from episodic.service.earlier import EarlierRecall
from episodic.service.episodes import EpisodeService
from episodic.service.erasure import EraseService
from episodic.service.erasure_replay import ErasureReplay
from episodic.service.index_check import IndexChecker
from episodic.service.inspection import InspectionService
from episodic.service.knowledge import KnowledgeService
from episodic.service.live_memories import LiveMemories
from episodic.service.memories import MemoryService
from episodic.service.memory_search import MemorySearch
from episodic.service.memory_tools import MemoryTools
from episodic.service.model_calls import ModelCallService
from episodic.service.passages import Passages
from episodic.service.privacy import PiiGuard
from episodic.service.recall import RecallService
from episodic.service.session_data import SessionDataService
from episodic.service.transfer import TransferService
from episodic.service.turn_searches import EarlierMessages, TurnSearches
from episodic.service.watch import LiveEpisodes, WatchService
from episodic.state.chunk_cache import ChunkCache
from episodic.state.digest_memo import RememberedDigestReads
from episodic.state.embed_turns import FairEmbeddings
from episodic.state.fixed_facts import FixedFactsCache
from episodic.state.health import Health
from episodic.state.index_cache import IndexCache, ResidentScopes, WholeIndex
from episodic.state.knowledge_words import ResidentWords
from episodic.state.query_vectors import QueryVectors
from episodic.state.recall_memo import RecencyMemo, ScopeVersions
from episodic.state.shares import TenantShares
from episodic.state.spoken_cache import SpokenCache
from episodic.state.visibility import Visibility
from episodic.state.watch_hub import WatchHub
from episodic.state.working_set import WorkingSetCache
from episodic.store.agents import SqlAgentStore
from episodic.store.cluster_clock import DatabaseClock
from episodic.store.context import SqlContextStore
from episodic.store.database import Database, Timeouts, open_database
from episodic.store.digests import SqlDigestStore
from episodic.store.drafts import SqlDraftStore
from episodic.store.episodes import SqlEpisodeStore
from episodic.store.erasure import SqlEraser
from episodic.store.faults import sqlite_path_problem, startup_failure
from episodic.store.feed import SqlChangeFeed
from episodic.store.knowledge import SqlKnowledgeStore
from episodic.store.leadership import PgLeadership
from episodic.store.lease import DatabaseInUse, SqliteLease
from episodic.store.ledger import FileErasureLedger, NoErasureLedger, ledger_path
from episodic.store.memories import SqlMemoryStore
from episodic.store.migrate import current_revision, head_revision, is_new_sqlite, upgrade_to_head
from episodic.store.retention import SqlRetention
from episodic.store.session_data import SqlSessionDataStore
from episodic.store.signals import LocalSignals, PgSignals
from episodic.store.sqlite_files import file_of
from episodic.store.transfer import SqlTransfer
from episodic.store.vector_sources import SqlDigestVectors, SqlKnowledgeVectors, SqlMemoryVectors
from episodic.store.writer import GroupCommitWriter
from episodic.summarize.extractive import ExtractiveSummarizer
from episodic.summarize.memories import ExtractiveMemoryExtractor
from episodic.summarize.openai_chat import OpenAIChatConfig, OpenAIChatSummarizer
from episodic.summarize.openai_memories import OpenAiMemoryExtractor
from episodic.telemetry.instrumentation import server_interceptor
from episodic.telemetry.metrics import MeteredAccessLog, Metrics, Watched, build_metrics
from episodic.telemetry.metrics_endpoint import serving_metrics
from episodic.telemetry.setup import tracing_from_env
from episodic.telemetry.tracing import Tracing, no_tracing
from episodic.tokens import TiktokenCounter, verify_assets
from episodic.workers.compactor import BackgroundCompactor
from episodic.workers.digester import Digester
from episodic.workers.feed import FeedPruner, FeedTail
from episodic.workers.loops import SoleReplica
from episodic.workers.reaper import IdleReaper
from episodic.workers.recall_marks import RecallMarks
from episodic.workers.retention import RetentionJob


@dataclass(frozen=True, slots=True)
class ScopeSources:
    """Where per-scope index caches load their vectors from (SQL, in production)."""

    digests: ScopeVectorSource
    memories: ScopeVectorSource
    knowledge: ScopeVectorSource


@dataclass(frozen=True, slots=True)
class Adapters:
    """One of each port per process, typed by the port: `build_adapters` makes them over SQL
    and the models, the unit tests over tests/fakes.py; the builders below (`build_core`)
    wire the same state, use cases and workers over either. Time and ids are ports too."""

    tokens: TokenCounter
    agents: AgentStore
    episodes: EpisodeStore
    users: UserDirectory  # the episode store, as the inspector lists users
    digests: DigestStore
    digest_keys: StoredVectorKeys  # the digest store, as the index checker reads it
    context: ContextStore
    embedder: Embedder
    summarizer: Summarizer  # digests' (and an LLM's compactions)
    inline_summarizer: Summarizer  # inline compaction (extractive in production)
    index: VectorIndex
    memories: MemoryStore
    sessions: SessionDataStore
    memory_index: VectorIndex  # promoted memories, per scope, keyed by memory id
    knowledge: KnowledgeStore  # agents' documents
    knowledge_index: VectorIndex  # their chunks, per agent, keyed "<document>#<n>"
    extractor: MemoryExtractor
    eraser: Eraser
    retention: RetentionStore
    leadership: Leadership  # who runs the once-per-cluster jobs
    signals: Signals  # wake-ups between replicas (LISTEN/NOTIFY)
    feed: ChangeFeed  # what this replica commits, for the others
    change_log: ChangeLog  # the same feed, as the tail and the pruner read it
    drafts: DraftStore  # assistant replies in progress, and what watchers read
    sources: ScopeSources | None  # None: `index` and `memory_index` are whole (pre-built, or fakes)
    clock: Clock
    monotonic: Callable[[], float]  # the caches' TTLs and the tenants' shares
    new_episode_id: IdFactory
    new_id: IdFactory  # model calls, memories, erasures
    reads: ReadsTogether  # the database, as a turn's concurrent searches share a trip to it
    cluster_now: Callable[[], Awaitable[datetime]] | None  # the cluster's time; None: `clock`
    transfer: UserTransfer | None  # ExportUser / ImportUser: over SQL only (None in the fake world)
    # every erasure, kept outside the database (none: the fakes' world, unless a test gives one)
    erasure_ledger: ErasureLedger = field(default_factory=NoErasureLedger, kw_only=True)


@dataclass(frozen=True, slots=True)
class SqlAdapters(Adapters):
    """The production set, and what `open_app` starts, watches and closes beside the ports."""

    database: Database
    writer: GroupCommitWriter
    tiktoken: TiktokenCounter  # `tokens`, warmed off the loop at start
    replica_signals: PgSignals | LocalSignals  # `signals`, started and stopped with the app
    replica_leadership: PgLeadership | SoleReplica  # `leadership`, released at the end
    sql_digests: SqlDigestStore  # `digests`, whose queue metrics read
    erasure_records: ErasureRecords  # `eraser`, as the erasure ledger's replay reads the audit table


@dataclass(frozen=True, slots=True)
class State:
    """What the process holds in RAM, kept in step with SQL by `visibility`, its one owner."""

    visibility: Visibility
    index: IndexCache  # episodes' digests, per scope, loaded from SQL on first use
    memory_index: IndexCache  # promoted memories, likewise
    knowledge_index: IndexCache  # agents' document chunks, per agent, likewise
    chunks: ChunkCache  # their rows, as turns render them
    knowledge_words: ResidentWords  # their words, per agent, loaded from SQL on first use
    health: Health  # SERVING while the database answers and the feed is readable
    tail: FeedTail  # what other replicas commit, applied through `visibility`
    working_sets: WorkingSetCache
    versions: ScopeVersions
    fixed_facts: FixedFactsCache
    spoken: SpokenCache
    pii: PiiGuard
    watch: WatchHub  # live watchers of episodes and their readers
    shares: TenantShares  # each tenant's share of this server


WORKER_STOP_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class Workers:
    digester: Digester
    reaper: IdleReaper
    retention: RetentionJob
    compactor: BackgroundCompactor | None
    marks: RecallMarks
    pruner: FeedPruner
    live_memories: LiveMemories  # memories extracted from live episodes' compacted turns
    earlier: EarlierMessages  # its background embedding of live episodes' compacted messages

    def start(self) -> None:
        self.digester.start()
        self.live_memories.start()
        self.reaper.start()
        self.retention.start()
        self.marks.start()
        self.pruner.start()

    async def stop(self) -> None:
        """Each loop is cancelled and awaited for a bounded time (see `within`)."""
        await within(WORKER_STOP_SECONDS, self.pruner.stop(), "stop feed pruner")
        await within(WORKER_STOP_SECONDS, self.retention.stop(), "stop retention")
        if self.compactor is not None:
            await within(WORKER_STOP_SECONDS, self.compactor.stop(), "stop compactor")
        await within(WORKER_STOP_SECONDS, self.live_memories.stop(), "stop live memories")
        await within(WORKER_STOP_SECONDS, self.reaper.stop(), "stop idle reaper")
        await within(WORKER_STOP_SECONDS, self.digester.stop(), "stop digester")
        await within(WORKER_STOP_SECONDS, self.marks.stop(), "stop recall marks")  # writes what is noted
        await within(WORKER_STOP_SECONDS, self.earlier.stop(), "stop earlier vectors")


@dataclass(frozen=True, slots=True)
class App:
    settings: Settings
    database: Database
    keys: KeyRing
    adapters: SqlAdapters
    state: State
    services: Services
    workers: Workers
    access_log: AccessLog
    tracing: Tracing
    tls: TlsMaterial | None  # None: plaintext
    metrics: Metrics  # served on settings.metrics_address by serve_app; no-ops when it is empty


log = logging.getLogger("episodic.server")


def load_keys(settings: Settings) -> KeyRing:
    try:
        keys = KeyRing.parse(settings.api_key_text())
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if not keys and not settings.insecure_dev:
        raise ConfigError(
            "no API keys configured: set EPISODIC_API_KEYS or EPISODIC_API_KEYS_FILE "
            "(see `episodic keygen`), or pass --insecure-dev for local development"
        )
    return keys


class DatabaseNotReady(ConfigError):
    """The database cannot be opened, or is not at this server's schema: one line that
    says what to do."""


async def ensure_schema(database: Database, migrate: bool) -> None:
    problem = sqlite_path_problem(database.url)
    if problem is not None:
        raise DatabaseNotReady(f"database_url: {problem}")
    with explained_startup_failures(database):
        await _bring_schema_up(database, migrate)


@contextmanager
def explained_startup_failures(database: Database) -> Iterator[None]:
    """A database that cannot be reached or read at start-up (by serve, migrate, an operator's
    command) becomes DatabaseNotReady's one line; anything else passes through."""
    try:
        yield
    except (DatabaseNotReady, EpisodicError):  # already say what is wrong
        raise
    except Exception as exc:
        message = startup_failure(exc, database.url)
        if message is None:
            raise
        raise DatabaseNotReady(f"database_url: {message}") from exc


async def _bring_schema_up(database: Database, migrate: bool) -> None:
    """A new, empty SQLite file (the embedded default) is created at the current schema;
    an older schema and PostgreSQL wait for an explicit migrate."""
    if migrate or await is_new_sqlite(database):
        await upgrade_to_head(database.maintenance)  # a long migration must not meet statement_timeout
        if not migrate:
            log.info(
                "created a new SQLite database at the current schema", extra={"revision": head_revision()}
            )
    found, wanted = await current_revision(database.engine), head_revision()
    if found != wanted:
        raise DatabaseNotReady(
            f"database_url: the database schema is at revision {found}, this server needs {wanted}: "
            "run `episodic migrate` or start with --migrate-on-start"
        )


def model_cache_dir(settings: Settings) -> Path | None:
    """Where the int8 model is cached: the setting, else the user's cache (None: no home)."""
    if settings.model_cache_dir:
        return Path(settings.model_cache_dir)
    return default_cache_dir(settings.xdg_cache_home)


def build_embedder(settings: Settings) -> Embedder:
    """A model that cannot load (altered file, no usable temporary directory for the int8
    derivation) or an endpoint misconfigured stops the start with one line naming why."""
    try:
        options: dict[str, object] = {}
        if settings.embedder == EmbedderKind.OPENAI:
            options = {
                "base_url": settings.embedder_url,
                "model": settings.embedder_model,
                "api_key": settings.embedder_api_key or None,
            }
        elif settings.embedder in (EmbedderKind.MINILM, EmbedderKind.MINILM_FP32):
            options = {"cache_dir": model_cache_dir(settings)}
        return make_embedder(str(settings.embedder), **options)
    except (EmbeddingError, ValueError) as exc:
        raise ConfigError(f"embedder: {exc}") from exc


def build_summarizer(settings: Settings) -> Summarizer:
    if settings.summarizer != SummarizerKind.OPENAI:
        return ExtractiveSummarizer()
    try:
        return OpenAIChatSummarizer(chat_endpoint(settings))
    except ValueError as exc:
        raise ConfigError(f"summarizer: {exc}") from exc


def chat_endpoint(settings: Settings) -> OpenAIChatConfig:
    """The chat endpoint of summarizer=openai, which extractor=openai uses too."""
    return OpenAIChatConfig(
        base_url=settings.summarizer_url,
        model=settings.summarizer_model,
        api_key=settings.summarizer_api_key,
    )


def build_extractor(settings: Settings) -> MemoryExtractor:
    if settings.extractor != ExtractorKind.OPENAI:
        return ExtractiveMemoryExtractor()
    if not settings.summarizer_url or not settings.summarizer_model:
        raise ConfigError("extractor=openai needs EPISODIC_SUMMARIZER_URL and EPISODIC_SUMMARIZER_MODEL")
    try:
        config = chat_endpoint(settings)
    except ValueError as exc:
        raise ConfigError(f"extractor: {exc}") from exc
    return OpenAiMemoryExtractor(config, fallback=ExtractiveMemoryExtractor())


def build_adapters(
    settings: Settings,
    database: Database,
    writer: GroupCommitWriter,
    index: VectorIndex | None,
) -> SqlAdapters:
    embedder, summarizer = build_embedder(settings), build_summarizer(settings)  # ConfigError names them
    signals = LocalSignals() if database.is_sqlite else PgSignals(database.url)
    leadership = SoleReplica() if database.is_sqlite else PgLeadership(database.url)
    feed = SqlChangeFeed(database, writer, origin=uuid.uuid4().hex, signals=signals)
    eraser = SqlEraser(database, writer)
    tokens, digests, episodes = (
        TiktokenCounter(),
        SqlDigestStore(database, writer),
        SqlEpisodeStore(database, writer, system.utc_now),
    )
    model = indexed_with(embedder.model_id)
    # a pre-built index is whole; otherwise each scope loads from SQL on first use
    whole = index is not None
    sources = (
        None
        if whole
        else ScopeSources(
            SqlDigestVectors(database, model),
            SqlMemoryVectors(database, model),
            SqlKnowledgeVectors(database, embedder.model_id),
        )
    )
    return SqlAdapters(
        tokens=tokens,
        agents=SqlAgentStore(database, writer),
        episodes=episodes,
        users=episodes,
        digests=digests,
        digest_keys=digests,
        context=SqlContextStore(database, writer),
        embedder=embedder,
        summarizer=summarizer,
        inline_summarizer=ExtractiveSummarizer(),
        index=index if index is not None else FaissVectorIndex(embedder.dimension),
        memories=SqlMemoryStore(database, writer, embedding_model=model, clock=system.utc_now),
        sessions=SqlSessionDataStore(database, writer, system.utc_now),
        memory_index=FaissVectorIndex(embedder.dimension),
        knowledge=SqlKnowledgeStore(database, writer),
        knowledge_index=FaissVectorIndex(embedder.dimension),
        extractor=build_extractor(settings),
        eraser=eraser,
        erasure_records=eraser,
        erasure_ledger=build_ledger(settings),
        transfer=SqlTransfer(database, writer),
        retention=SqlRetention(database, writer, settings.retention_caps()),
        leadership=leadership,
        signals=signals,
        feed=feed,
        change_log=feed,
        drafts=SqlDraftStore(database, writer),
        sources=sources,
        clock=system.utc_now,  # read when built: a test may put a skewed clock there (cluster_helpers)
        monotonic=time.monotonic,
        new_episode_id=system.new_episode_id,
        new_id=system.new_call_id,
        reads=database,
        cluster_now=DatabaseClock(database, system.utc_now).now,
        database=database,
        writer=writer,
        tiktoken=tokens,
        replica_signals=signals,
        replica_leadership=leadership,
        sql_digests=digests,
    )


# Of the index cache's bytes, memories get this share (they are fewer and shorter-lived), and
# agents' knowledge this one (one scope per agent, shared by all its users); episodes the rest.
MEMORY_CACHE_SHARE = 0.25
KNOWLEDGE_CACHE_SHARE = 0.15  # its vectors
KNOWLEDGE_WORDS_SHARE = 0.10  # its word index: ~0.7 KiB a chunk against a vector's 1-1.5 KiB


def build_indexes(
    settings: Settings, adapters: Adapters, lock: asyncio.Lock
) -> tuple[IndexCache, IndexCache, IndexCache]:
    """Per-scope caches of SQL (or, over whole indexes without sources: tools holding a
    pre-built index, the unit tests' fakes, the index itself): episodes', memories' and
    knowledge's."""
    if adapters.sources is None:
        whole = (adapters.index, adapters.memory_index, adapters.knowledge_index)
        return WholeIndex(whole[0]), WholeIndex(whole[1]), WholeIndex(whole[2])
    dim, total = adapters.embedder.dimension, settings.index_cache_bytes
    memory_bytes = max(1, int(total * MEMORY_CACHE_SHARE))
    knowledge_bytes = max(1, int(total * KNOWLEDGE_CACHE_SHARE))
    episodes = ResidentScopes(
        adapters.index, adapters.sources.digests, dimension=dim,
        max_bytes=max(1, total - memory_bytes - knowledge_bytes), lock=lock,
    )  # fmt: skip
    memories = ResidentScopes(
        adapters.memory_index, adapters.sources.memories, dimension=dim, max_bytes=memory_bytes, lock=lock
    )
    knowledge = ResidentScopes(
        adapters.knowledge_index,
        adapters.sources.knowledge,
        dimension=dim,
        max_bytes=knowledge_bytes,
        lock=lock,
    )
    return episodes, memories, knowledge


def build_state(settings: Settings, adapters: Adapters) -> State:
    """Every cache derived from SQL watches the change owner, so a change announced there
    reaches all of them. Nothing is opened or started here."""
    default, tenants = settings.pii_policies()
    lock = asyncio.Lock()  # the owner's, shared with the index caches' last load try
    index, memory_index, knowledge_index = build_indexes(settings, adapters, lock)
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
        watch=WatchHub(adapters.drafts, adapters.signals, settings.watch_limits),  # subscribes: before start
        shares=TenantShares(settings.share_limits, clock=adapters.monotonic),
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


# Embeddings written in bulk (memories, digests) share one thread: however many a tenant
# asks for at once, they take one core, never the event loop's. Query embeddings (one text,
# on a turn's path) do not wait behind them. Tenants take both in turn (state/embed_turns.py).
EMBED_THREADS = 1


def new_embed_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(EMBED_THREADS, thread_name_prefix="episodic-embed")


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
    return MemoryService(
        store=a.memories, episodes=a.episodes, agents=a.agents, embedder=a.embedder, index=state.memory_index,
        changes=state.visibility, pii=state.pii, extractor=a.extractor, limits=settings.limits,
        clock=a.clock, new_id=a.new_id, pool=None if settings.extractor == ExtractorKind.OPENAI else pool,
        quota=state.shares, embed_pool=embed_pool, embeddings=embeddings,
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
        workers=settings.digest_workers,
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
) -> Services:
    a, limits, clock = adapters, settings.limits, adapters.clock
    metered = metrics if metrics is not None and metrics.enabled else None
    queries = QueryVectors(a.embedder, embeddings=memories.embeddings)
    memory_search = MemorySearch(
        store=a.memories, agents=a.agents, embedder=a.embedder, index=state.memory_index, limits=limits,
        clock=clock, marks=marks, queries=queries,
    )  # fmt: skip
    episodes = EpisodeService(
        episodes=a.episodes, agents=a.agents, tokens=a.tokens, limits=limits, clock=clock,
        new_id=a.new_episode_id, changes=state.visibility, digests=digester, pii=state.pii,
        fixed_facts=state.fixed_facts, tracing=tracing, live=LiveEpisodes(state.watch, a.drafts),
    )  # fmt: skip
    knowledge = KnowledgeService(
        store=a.knowledge, agents=a.agents, embedder=a.embedder, index=state.knowledge_index,
        words=state.knowledge_words, changes=state.visibility, limits=limits, clock=clock,
        embed_pool=memories.embed_pool, embeddings=memories.embeddings, queries=queries,
        timed=metered.knowledge_searched if metered else None, monotonic=a.monotonic, chunks=state.chunks,
        quota=state.shares,
    )  # fmt: skip
    passages = Passages(messages=a.context, cache=state.spoken)
    recall = RecallService(
        digests=RememberedDigestReads(a.digests, state.versions, clock=a.monotonic), agents=a.agents,
        embedder=a.embedder, index=state.index, limits=limits,
        clock=clock, passages=passages, tracing=tracing, queries=queries,
        timed=metered.recall_finished if metered else None,
    )  # fmt: skip
    searches = TurnSearches(
        past=recall, memo=RecencyMemo(state.versions, clock=a.monotonic), transcripts=passages,
        memories=memory_search, memory_store=a.memories, sessions=a.sessions, queries=queries,
        knowledge=knowledge, reads=a.reads, earlier=EarlierRecall(
            embedder=a.embedder, queries=queries, embeddings=memories.embeddings
        ),
        tracing=tracing,
    )  # fmt: skip
    context = ContextService(
        store=a.context, episodes=episodes, tokens=a.tokens, summarizer=a.inline_summarizer,
        limits=limits, clock=clock, new_id=a.new_id, cache=state.working_sets, pii=state.pii,
        summary_pool=pool, background=compactor, tracing=tracing, searches=searches,
        rendered=metered.context_rendered if metered else _unmetered, compacted=live,
    )  # fmt: skip
    model_calls = ModelCallService(store=a.context, episodes=episodes, limits=limits, clock=clock)
    agents = AgentService(
        store=a.agents, tokens=a.tokens, limits=limits, clock=clock, changes=state.visibility
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
        erasure=EraseService(
            eraser=a.eraser, changes=state.visibility, clock=clock, new_id=a.new_id, ledger=a.erasure_ledger
        ),
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
            watch_limits=settings.watch_limits,
            draft_limits=settings.draft_limits,
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
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Core:
    """Everything above the adapters: state, use cases and workers, built, nothing started."""

    state: State
    services: Services
    workers: Workers


def build_core(
    settings: Settings,
    adapters: Adapters,
    *,
    pool: Executor,
    embed_pool: Executor | None = None,
    tracing: Tracing | None = None,
    metrics: Metrics | None = None,
) -> Core:
    """The pure wiring over the ports, the same for the server (over SQL) and the unit tests
    (over fakes): no database opened, no thread, no task started; `pool` runs summaries and
    extractions, `embed_pool` bulk embeddings; tenants take the embedding threads in turn."""
    state = build_state(settings, adapters)
    embeddings = FairEmbeddings(adapters.embedder, embed_pool)
    memories = build_memory_service(settings, adapters, state, pool, embed_pool, embeddings)
    digester = build_digester(settings, adapters, state, pool, memories, metrics, embed_pool, embeddings)
    live = LiveMemories(memories=memories)  # memories from compacted turns, while episodes are open
    compactor = build_compactor(settings, adapters, state, live)
    marks = RecallMarks(store=adapters.memories)
    services = build_services(
        settings, adapters, state, digester=digester, compactor=compactor, pool=pool,
        tracing=tracing if tracing is not None else no_tracing(), memories=memories, marks=marks,
        metrics=metrics, live=live,
    )  # fmt: skip
    workers = build_workers(settings, adapters, state, services, digester, compactor, marks, live)
    return Core(state, services, workers)


def load_tracing(settings: Settings) -> Tracing:
    """The SDK, from the OTEL_* variables config captured with the settings."""
    try:
        return tracing_from_env(settings.otel_environ)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


@dataclass(frozen=True, slots=True)
class Replacements:
    """What a lab or a test may swap in the composition root: the one in-process door."""

    index: VectorIndex | None = None  # a pre-built whole index instead of per-scope caches of SQL
    background: bool = True  # False: no digester, idle reaper or retention job running


@asynccontextmanager
async def open_app(
    settings: Settings, *, tracing: Tracing | None = None, replace: Replacements = Replacements()
) -> AsyncIterator[App]:
    """Opens the store (migrating if asked), yields the wired app, closes it all. Tracing
    comes from the OTEL_* variables unless given (tests); what it builds, it shuts down."""
    verify_assets()
    keys = load_keys(settings)
    tls = settings.tls_material()  # before the database opens, so a bad file fails fast
    owns_tracing = tracing is None
    tracing = load_tracing(settings) if tracing is None else tracing
    metrics = build_metrics(settings.metrics_address, settings.otel_environ)
    timeouts = Timeouts(settings.db_statement_timeout_seconds, settings.db_connect_timeout_seconds)
    database = open_database(settings.database_url, pool_size=settings.db_pool_size, timeouts=timeouts)
    lease: SqliteLease | None = None
    try:
        lease = hold_database(database)  # before the schema is read: no restore swaps the file under us
        await ensure_schema(database, settings.migrate_on_start)
        on_batch = metrics.writer_batch if metrics.enabled else None
        writer = GroupCommitWriter(database, workers=settings.db_writers, on_batch=on_batch)
        writer.start()
        access_log: AccessLog = JsonLinesAccessLog() if settings.access_log else NoAccessLog()
        if metrics.enabled:  # RPC metrics ride on the access log's one record per RPC
            access_log = MeteredAccessLog(access_log, metrics)
        try:
            async with _wired(settings, database, writer, tracing, replace, metrics) as (
                adapters,
                state,
                services,
                workers,
            ):
                metrics.watch(watched_state(adapters, state))
                yield App(
                    settings, database, keys, adapters, state, services, workers, access_log, tracing, tls,
                    metrics,
                )  # fmt: skip
        finally:
            await writer.stop()
            access_log.close()
    finally:
        await database.dispose()
        if lease is not None:
            lease.release()
        metrics.shutdown()
        if owns_tracing:
            tracing.shutdown()  # exports the spans still queued


def watched_state(adapters: SqlAdapters, state: State) -> Watched:
    """What metrics read at scrape time."""
    return Watched(
        working_sets=state.working_sets,
        indexes={"episodes": state.index, "memories": state.memory_index, "knowledge": state.knowledge_index},
        pools=adapters.database.pool_use,
        digest_queue=adapters.sql_digests.waiting,
        clock=adapters.clock,
        knowledge_counts=adapters.knowledge.counts,
        knowledge_cache_bytes=lambda: state.chunks.held_bytes,
    )


@asynccontextmanager
async def _wired(
    settings: Settings,
    database: Database,
    writer: GroupCommitWriter,
    tracing: Tracing,
    replace: Replacements,
    metrics: Metrics,
) -> AsyncIterator[tuple[SqlAdapters, State, Services, Workers]]:
    """Everything above the database (`build_core`, over the SQL adapters); the change
    feed's tail and the background workers run beside the RPCs until the block ends.
    Nothing is loaded into the indexes here: each scope loads on first use."""
    adapters = build_adapters(settings, database, writer, replace.index)
    # Off the loop and not awaited: start-up does not wait, and a first turn that comes sooner
    # waits only for the encoding it needs (the counter builds each once, under a lock).
    threading.Thread(target=adapters.tiktoken.warm, name="episodic-token-warm-up", daemon=True).start()
    pool, embed_pool = new_summary_pool(), new_embed_pool()
    core = build_core(settings, adapters, pool=pool, embed_pool=embed_pool, tracing=tracing, metrics=metrics)
    state, services, workers = core.state, core.services, core.workers
    database.health.listen(state.health.part("database"))
    await note_stale_vectors(adapters)
    try:  # before anything is served or any worker runs: no erased user is seen again
        await replay_ledger(adapters, services.erasure)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        embed_pool.shutdown(wait=False, cancel_futures=True)
        raise
    state.tail.listen()
    await adapters.replica_signals.start()
    await state.tail.start()
    if replace.background:
        workers.start()
    try:
        yield adapters, state, services, workers
    finally:
        await within(WORKER_STOP_SECONDS, state.watch.close(), "end live watches")
        await within(WORKER_STOP_SECONDS, state.chunks.close(), "stop reading chunks in")
        await workers.stop()
        await within(WORKER_STOP_SECONDS, state.tail.stop(), "stop the change feed tail")
        await within(WORKER_STOP_SECONDS, adapters.replica_signals.stop(), "close the signal connection")
        await within(WORKER_STOP_SECONDS, adapters.replica_leadership.close(), "release leadership")
        pool.shutdown(wait=False, cancel_futures=True)
        embed_pool.shutdown(wait=False, cancel_futures=True)


async def note_stale_vectors(adapters: Adapters) -> None:
    model = indexed_with(adapters.embedder.model_id)
    stale = await adapters.digests.count_stale(model)
    if stale:
        log.warning("model or index recipe changed: re-embedding in the background", extra={"digests": stale})


def build_ledger(settings: Settings) -> ErasureLedger:
    """A ledger whose directory is missing fails the start, not the first erasure."""
    path = ledger_path(settings.erasure_ledger, settings.database_url)
    if path is None:  # INFO, not WARNING: a supported setup (the erasure itself is complete), said once
        log.info(
            "no erasure ledger: restoring an older backup of this database would bring back users "
            "erased since; set EPISODIC_ERASURE_LEDGER to a file every replica shares"
        )
        return NoErasureLedger()
    if not path.parent.is_dir():
        raise ConfigError(f"erasure_ledger: the directory of {path} does not exist")
    return FileErasureLedger(path)


def hold_database(database: Database) -> SqliteLease | None:
    """A SQLite file is leased (shared) for as long as this process has it open, so
    `episodic restore` refuses to replace it meanwhile (store/lease.py)."""
    file = file_of(database.url)
    if file is None:
        return None
    problem = sqlite_path_problem(database.url)
    if problem is not None:
        raise DatabaseNotReady(f"database_url: {problem}")
    try:
        return SqliteLease(file, exclusive=False)
    except DatabaseInUse as exc:
        raise DatabaseNotReady(f"database_url: {exc.message}") from exc


async def replay_ledger(adapters: SqlAdapters, erasure: EraseService) -> Replayed:
    """Erases again every user the ledger says was erased and the database does not: the
    database is an older backup, restored (service/erasure_replay.py). Logged in one line,
    counts only."""
    ledger = adapters.erasure_ledger
    if not ledger.where:
        return Replayed()
    report = await ErasureReplay(ledger=ledger, records=adapters.erasure_records, erasure=erasure).run()
    if report.pending:
        replayed = {"erasures": report.pending, "users": report.users, "nothing_left": report.nothing_left}
        erased = {kind: report.counts[kind] for kind in ("episodes", "messages", "memories")}
        log.info(f"restore: {report.summary()}", extra=replayed | erased)
    if report.adopted:
        log.info("erasure ledger: added the erasures only the database held", extra={"added": report.adopted})
    if report.unreadable_lines:
        log.warning(
            "erasure ledger: lines that are no entry skipped", extra={"lines": report.unreadable_lines}
        )
    return report


async def replay_offline(settings: Settings) -> Replayed:
    """The ledger's replay without serving (`episodic restore`, on the restored copy before
    it is put in place): the server's own wiring over SQL, nothing started. No model is
    loaded: erasing embeds and summarizes nothing."""
    quiet = dataclasses.replace(
        settings, embedder=EmbedderKind.HASHING, summarizer=SummarizerKind.EXTRACTIVE,
        extractor=ExtractorKind.EXTRACTIVE,
    )  # fmt: skip
    database = open_database(quiet.database_url)
    writer = GroupCommitWriter(database)
    writer.start()
    try:
        with explained_startup_failures(database), ThreadPoolExecutor(1) as pool:
            adapters = build_adapters(quiet, database, writer, None)
            core = build_core(quiet, adapters, pool=pool)
            return await replay_ledger(adapters, core.services.erasure)
    finally:
        await writer.stop()
        await database.dispose()


def share_refusals(metrics: Metrics, tenant_labels: bool) -> Refused | None:
    """Refusals counted by share; tenant ids appear only where the operator opted in."""
    if not metrics.enabled:
        return None
    if tenant_labels:
        return metrics.share_refused
    return lambda share, _tenant: metrics.share_refused(share)


@asynccontextmanager
async def serve_app(
    app: App, *, grace_seconds: float | None = None, settle_seconds: float = QUIET_SECONDS
) -> AsyncIterator[GrpcServer]:
    """The gRPC server of an open app on its settings' address, SERVING until the block ends;
    then NOT_SERVING, calls already sent are taken (until none arrived for `settle_seconds`;
    0: not waited for, as tests whose calls have all returned do), and calls in flight get
    the grace (default: the shutdown grace).
    Metrics and the inspector (when on) are served from before SERVING until the calls have
    drained."""
    async with (
        serving_metrics(app.metrics, app.settings.metrics_address, HttpLimits.of(app.settings)),
        serving_inspector(app.settings, app.services.inspection, app.keys, app.state.shares),
    ):
        grpc_server = await build_server(
            app.settings,
            app.services,
            app.keys,
            app.access_log,
            [server_interceptor(app.tracing)],  # outermost: calls refused inside are traced too
            app.tls,
            app.state.health,
            app.state.shares,
            share_refusals(app.metrics, app.settings.metrics_tenant_labels),
        )
        await grpc_server.server.start()
        await grpc_server.set_serving(True)
        try:
            yield grpc_server
        finally:
            await grpc_server.set_serving(False)
            # watches never finish on their own: end them now (UNAVAILABLE: watch another replica)
            await within(WORKER_STOP_SECONDS, app.state.watch.close(), "end live watches")
            grace = app.settings.shutdown_grace_seconds if grace_seconds is None else grace_seconds
            if grace > 0 and settle_seconds > 0:  # to finish in the grace, not be cancelled
                await grpc_server.arrivals.settle(settle_seconds)
            # gRPC cancels what is still running after the grace; a handler that then does not
            # finish must not hold the process
            await within(grace + WORKER_STOP_SECONDS, grpc_server.server.stop(grace), "stop gRPC server")
