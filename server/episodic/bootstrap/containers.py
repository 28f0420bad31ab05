"""What the composition root hands out: the adapters (typed by the domain's ports), the in-RAM
state, the workers, the core and the running app."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime

from episodic.bounded import within
from episodic.config import Settings, TlsMaterial
from episodic.domain.ports.changes import ChangeFeed, ChangeLog, Leadership, Signals
from episodic.domain.ports.clock import Clock, IdFactory
from episodic.domain.ports.digests import DigestStore
from episodic.domain.ports.episodes import (
    AgentStore,
    ContextStore,
    DraftStore,
    EpisodeStore,
    ReadsTogether,
    RecentlyActive,
    RetentionStore,
    UserDirectory,
)
from episodic.domain.ports.indexes import ScopeVectorSource, StoredVectorKeys, VectorIndex
from episodic.domain.ports.knowledge import KnowledgeStore
from episodic.domain.ports.memories import MemoryStore, SessionDataStore
from episodic.domain.ports.models import Embedder, MemoryExtractor, Summarizer, TokenCounter
from episodic.domain.ports.users import Eraser, ErasureLedger, ErasureRecords, UserTransfer
from episodic.edges.grpc.access_log import AccessLog
from episodic.edges.keys import KeyRing
from episodic.service.live_memories import LiveMemories
from episodic.service.privacy import PiiGuard
from episodic.service.services import Services
from episodic.service.turn_searches import EarlierMessages
from episodic.state.chunk_cache import ChunkCache
from episodic.state.fixed_facts import FixedFactsCache
from episodic.state.health import Health
from episodic.state.index_cache import IndexCache
from episodic.state.knowledge_words import ResidentWords
from episodic.state.recall_memo import ScopeVersions
from episodic.state.shares import TenantShares
from episodic.state.spoken_cache import SpokenCache
from episodic.state.visibility import Visibility
from episodic.state.watch_hub import WatchHub
from episodic.state.working_set import WorkingSetCache
from episodic.store.database import Database
from episodic.store.digests import SqlDigestStore
from episodic.store.leadership import PgLeadership
from episodic.store.ledger import NoErasureLedger
from episodic.store.signals import LocalSignals, PgSignals
from episodic.store.writer import GroupCommitWriter
from episodic.telemetry.metrics import Metrics
from episodic.telemetry.tracing import Tracing
from episodic.tokens import TiktokenCounter
from episodic.workers.compactor import BackgroundCompactor
from episodic.workers.digester import Digester
from episodic.workers.feed import FeedPruner, FeedTail
from episodic.workers.loops import SoleReplica
from episodic.workers.reaper import IdleReaper
from episodic.workers.recall_marks import RecallMarks
from episodic.workers.retention import RetentionJob
from episodic.workers.warm_start import WarmStart


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
    # the open episodes last written to, for the warm start (none: the fakes' world has none)
    recently_active: RecentlyActive | None = field(default=None, kw_only=True)


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
    warm_start: WarmStart | None = None  # None: no warm start (the fakes' world)

    def start(self) -> None:
        self.digester.start()
        self.live_memories.start()
        self.reaper.start()
        self.retention.start()
        self.marks.start()
        self.pruner.start()
        if self.warm_start is not None:
            self.warm_start.start()

    async def stop(self) -> None:
        """Each loop is cancelled and awaited for a bounded time (see `within`)."""
        if self.warm_start is not None:
            await within(WORKER_STOP_SECONDS, self.warm_start.stop(), "stop warm start")
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


@dataclass(frozen=True, slots=True)
class Core:
    """Everything above the adapters: state, use cases and workers, built, nothing started."""

    state: State
    services: Services
    workers: Workers


@dataclass(frozen=True, slots=True)
class OpenCore:
    """The core over SQL as `open_core` yields it: the database open, the concrete adapters
    built, the state, use cases and workers wired; no loop started, nothing served."""

    settings: Settings
    database: Database
    adapters: SqlAdapters
    core: Core


@dataclass(frozen=True, slots=True)
class Replacements:
    """What a lab or a test may swap in the composition root: the one in-process door."""

    index: VectorIndex | None = None  # a pre-built whole index instead of per-scope caches of SQL
    background: bool = True  # False: no digester, idle reaper or retention job running


NO_REPLACEMENTS = Replacements()
