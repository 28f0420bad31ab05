"""The real use cases over the fakes of tests/fakes.py, wired by the composition root itself:
this module only builds the fake `Adapters` (fake clock and ids included) and calls
`episodic.bootstrap.build_core`, the same pure wiring the server runs over SQL (every cache
registered with the one change owner, the real `Visibility`, over whole fake indexes). No
database, no gRPC, no threads of its own: a use-case test runs in milliseconds."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TypeVar

from episodic import config
from episodic.bootstrap.containers import Adapters, State, Workers
from episodic.bootstrap.wiring import build_core
from episodic.config.values import retention_caps
from episodic.domain.agents import AgentDraft, MemoryDraft
from episodic.domain.model import Caller, Episode, NewMessage, PiiPolicy, Role
from episodic.domain.ports.changes import Signals
from episodic.domain.ports.compaction import BackgroundCompactions
from episodic.service.agents import AgentService
from episodic.service.context import ContextService
from episodic.service.episodes import EpisodeService
from episodic.service.erasure import EraseService
from episodic.service.index_check import IndexChecker
from episodic.service.knowledge import KnowledgeService
from episodic.service.live_memories import LiveMemories
from episodic.service.memories import MemoryService
from episodic.service.memory_search import MemorySearch
from episodic.service.model_calls import ModelCallService
from episodic.service.privacy import PiiGuard
from episodic.service.recall import RecallService
from episodic.service.services import Services
from episodic.service.session_data import SessionDataService
from episodic.service.watch import WatchService
from episodic.state.fixed_facts import FixedFactsCache
from episodic.state.recall_memo import ScopeVersions
from episodic.state.visibility import Visibility
from episodic.state.watch_hub import WatchHub
from episodic.state.working_set import WorkingSetCache
from episodic.store.signals import LocalSignals
from episodic.summarize.memories import ExtractiveMemoryExtractor
from episodic.workers.digester import Digester
from episodic.workers.loops import SoleReplica
from episodic.workers.reaper import IdleReaper
from episodic.workers.retention import RetentionJob
from tests.fakes import (
    CountingIds,
    FakeAgentStore,
    FakeContextStore,
    FakeDigestStore,
    FakeDraftStore,
    FakeEpisodeStore,
    FakeEraser,
    FakeKnowledgeStore,
    FakeMemoryStore,
    FakeRetentionStore,
    FakeSessionDataStore,
    FakeVectorIndex,
    FirstSentenceSummarizer,
    FixedClock,
    FrozenMonotonic,
    InlineExecutor,
    RecordingDigestWaiter,
    SeparateReads,
    Tables,
    WordEmbedder,
    WordTokenCounter,
)
from tests.fakes_feed import FakeChangeFeed

F = TypeVar("F")
TENANT = "acme"
CALLER = Caller(TENANT)


@dataclass
class Settings:
    """The few settings these tests vary, turned into `episodic.config.Settings`."""

    pii_default: PiiPolicy = PiiPolicy.OFF
    pii_tenants: Mapping[str, PiiPolicy] = field(default_factory=dict)
    retention_caps: Mapping[str, int] = field(default_factory=dict)  # days, by tenant
    retention_grace: timedelta = timedelta(days=7)
    working_set_max_bytes: int = 64 * 1024 * 1024
    background: BackgroundCompactions | None = None  # a spy; None: extractive-style inline compaction
    watch_buffer_events: int | None = None  # events a watcher may have waiting; None: the server's

    def settings(self) -> config.Settings:
        wired = config.Settings(
            pii_policy=self.pii_default,
            pii_tenant_policies=_per_tenant({t: str(p) for t, p in self.pii_tenants.items()}),
            retention_tenant_days=_per_tenant({t: str(days) for t, days in self.retention_caps.items()}),
            retention_grace_days=self.retention_grace / timedelta(days=1),
            working_set_max_bytes=self.working_set_max_bytes,
        )
        if self.watch_buffer_events is not None:
            wired = dataclasses.replace(wired, watch_buffer_events=self.watch_buffer_events)
        return wired


def _per_tenant(values: Mapping[str, str]) -> str:
    return ",".join(f"{tenant}={value}" for tenant, value in values.items())


@dataclass
class UseCases:
    """The adapters (fakes), the in-RAM state, the use cases and the workers of one process,
    as `bootstrap.build_core` wires them; the fakes and the services under short names."""

    tables: Tables
    clock: FixedClock
    monotonic: FrozenMonotonic
    adapters: Adapters
    state: State
    services: Services
    workers: Workers
    waiter: RecordingDigestWaiter  # the episodes' digest waiter: counts wakes, then the digester's

    # the fakes, as built
    @property
    def tokens(self) -> WordTokenCounter:
        return _fake(self.adapters.tokens, WordTokenCounter)

    @property
    def embedder(self) -> WordEmbedder:
        return _fake(self.adapters.embedder, WordEmbedder)

    @property
    def summarizer(self) -> FirstSentenceSummarizer:
        return _fake(self.adapters.summarizer, FirstSentenceSummarizer)

    @property
    def index(self) -> FakeVectorIndex:
        return _fake(self.adapters.index, FakeVectorIndex)

    @property
    def memory_index(self) -> FakeVectorIndex:
        return _fake(self.adapters.memory_index, FakeVectorIndex)

    @property
    def agent_store(self) -> FakeAgentStore:
        return _fake(self.adapters.agents, FakeAgentStore)

    @property
    def episode_store(self) -> FakeEpisodeStore:
        return _fake(self.adapters.episodes, FakeEpisodeStore)

    @property
    def digest_store(self) -> FakeDigestStore:
        return _fake(self.adapters.digests, FakeDigestStore)

    @property
    def context_store(self) -> FakeContextStore:
        return _fake(self.adapters.context, FakeContextStore)

    @property
    def memory_store(self) -> FakeMemoryStore:
        return _fake(self.adapters.memories, FakeMemoryStore)

    @property
    def eraser(self) -> FakeEraser:
        return _fake(self.adapters.eraser, FakeEraser)

    @property
    def draft_store(self) -> FakeDraftStore:
        return _fake(self.adapters.drafts, FakeDraftStore)

    # the state
    @property
    def visibility(self) -> Visibility:
        return self.state.visibility

    @property
    def working_sets(self) -> WorkingSetCache:
        return self.state.working_sets

    @property
    def versions(self) -> ScopeVersions:
        return self.state.versions

    @property
    def fixed_facts(self) -> FixedFactsCache:
        return self.state.fixed_facts

    @property
    def pii(self) -> PiiGuard:
        return self.state.pii

    @property
    def watch_hub(self) -> WatchHub:
        return self.state.watch

    # the use cases and workers
    @property
    def episodes(self) -> EpisodeService:
        return self.services.episodes

    @property
    def agents(self) -> AgentService:
        return self.services.agents

    @property
    def recall(self) -> RecallService:
        return self.services.recall

    @property
    def context(self) -> ContextService:
        return self.services.context

    @property
    def model_calls(self) -> ModelCallService:
        return self.services.model_calls

    @property
    def knowledge(self) -> KnowledgeService:
        return self.services.knowledge

    @property
    def erasure(self) -> EraseService:
        return self.services.erasure

    @property
    def index_checker(self) -> IndexChecker:
        return self.services.index_checker

    @property
    def memories(self) -> MemoryService:
        return self.services.memories

    @property
    def memory_search(self) -> MemorySearch:
        return self.services.memory_search

    @property
    def sessions(self) -> SessionDataService:
        return self.services.sessions

    @property
    def watch(self) -> WatchService:
        return self.services.watch

    @property
    def digester(self) -> Digester:
        return self.workers.digester

    @property
    def retention(self) -> RetentionJob:
        return self.workers.retention

    @property
    def reaper(self) -> IdleReaper:
        return self.workers.reaper

    @property
    def live_memories(self) -> LiveMemories:
        return self.workers.live_memories

    async def new_agent(
        self, agent_id: str = "helper", memory: MemoryDraft | None = None, system_prompt: str = "Be brief."
    ) -> str:
        draft = AgentDraft(
            agent_id, system_prompt=system_prompt, model="gpt-4", memory=memory or MemoryDraft()
        )
        await self.agents.create_agent(CALLER, draft)
        return agent_id

    async def open(self, agent_id: str = "helper", user_id: str = "mary", episode_id: str = "") -> str:
        episode, _ = await self.episodes.open_episode(
            CALLER, agent_id=agent_id, user_id=user_id, episode_id=episode_id
        )
        return episode.episode_id

    async def say(self, episode_id: str, *lines: str) -> None:
        """Appends `lines` as alternating user and assistant turns, user first."""
        roles = [Role.USER, Role.ASSISTANT]
        messages = [NewMessage(roles[i % 2], line) for i, line in enumerate(lines)]
        await self.episodes.add_messages(CALLER, episode_id, messages)

    async def close(self, episode_id: str) -> Episode:
        return await self.episodes.close_episode(CALLER, episode_id)

    async def remembered(self, episode_id: str, *lines: str, user_id: str = "mary") -> str:
        """A past conversation of `user_id` with the agent "helper": opened, said, closed,
        digested and indexed."""
        await self.open(user_id=user_id, episode_id=episode_id)
        await self.say(episode_id, *lines)
        await self.close(episode_id)
        await self.digester.run_once()
        return episode_id


def _fake(port: object, kind: type[F]) -> F:
    assert isinstance(port, kind), f"{type(port).__name__} is not the fake {kind.__name__}"
    return port


def fake_adapters(
    settings: config.Settings,
    tables: Tables,
    clock: FixedClock,
    monotonic: FrozenMonotonic,
    signals: Signals | None = None,
) -> Adapters:
    """One fake of each port, over one set of tables (and one process's signals, unless
    `signals` are shared with another replica)."""
    embedder, episodes, digests, feed = (
        WordEmbedder(),
        FakeEpisodeStore(tables, clock),
        FakeDigestStore(tables),
        FakeChangeFeed(origin="unit"),  # a process alone: nothing to read, nobody to wake
    )
    summarizer = FirstSentenceSummarizer()
    memories = FakeMemoryStore(tables, embedder.model_id, clock)
    return Adapters(
        tokens=WordTokenCounter(), agents=FakeAgentStore(tables), episodes=episodes, users=episodes,
        digests=digests, digest_keys=digests, context=FakeContextStore(tables), embedder=embedder,
        summarizer=summarizer, inline_summarizer=summarizer, index=FakeVectorIndex(), memories=memories,
        sessions=FakeSessionDataStore(tables, clock), memory_index=FakeVectorIndex(),
        knowledge=FakeKnowledgeStore(tables, embedder.model_id), knowledge_index=FakeVectorIndex(),
        extractor=ExtractiveMemoryExtractor(), eraser=FakeEraser(tables), transfer=None,
        retention=FakeRetentionStore(tables, retention_caps(settings)), leadership=SoleReplica(),
        signals=signals or LocalSignals(), feed=feed, change_log=feed, drafts=FakeDraftStore(tables),
        sources=None,  # whole indexes: the fakes hold every scope
        clock=clock, monotonic=monotonic, new_episode_id=CountingIds("ep_"), new_id=CountingIds(),
        reads=SeparateReads(),
        cluster_now=None,
    )  # fmt: skip


def use_cases(settings: Settings | None = None, *, replica_of: UseCases | None = None) -> UseCases:
    """One process; `replica_of`: another replica beside that one's process, over the same
    tables (one database) and signals (one LISTEN/NOTIFY), with RAM of its own."""
    s = settings or Settings()
    tables, clock, monotonic = Tables(), FixedClock(), FrozenMonotonic()
    signals: Signals | None = None
    if replica_of is not None:
        tables, signals = replica_of.tables, replica_of.adapters.signals
    wired = s.settings()
    adapters = fake_adapters(wired, tables, clock, monotonic, signals)
    core = build_core(wired, adapters, pool=InlineExecutor())
    # spies, swapped in after the wiring: they pass everything on to what they replace
    waiter = RecordingDigestWaiter(_fake(adapters.digests, FakeDigestStore), core.workers.digester)
    core.services.episodes.digests = waiter
    core.workers.reaper.on_closed = waiter.wake
    if s.background is not None:
        core.services.context.compaction.background = s.background
    return UseCases(tables, clock, monotonic, adapters, core.state, core.services, core.workers, waiter)
