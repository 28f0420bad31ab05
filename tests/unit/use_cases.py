"""The real use cases wired over the fakes of tests/fakes.py, the way
`episodic.bootstrap` wires them over SQL (build_state, build_digester, build_services,
build_workers): keyword constructors, one token counter, every cache registered with the
one change owner (the real `Visibility`, over a fake index). No database, no gRPC, no
threads of its own: a use-case test runs in milliseconds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from episodic.domain.agents import AgentDraft, MemoryDraft
from episodic.domain.model import Caller, Episode, NewMessage, PiiPolicy, Role
from episodic.domain.ports import BackgroundCompactions
from episodic.domain.validation import Limits
from episodic.service.agents import AgentService
from episodic.service.context import ContextService
from episodic.service.episodes import EpisodeService
from episodic.service.erasure import EraseService
from episodic.service.index_check import IndexChecker
from episodic.service.memories import MemoryService
from episodic.service.memory_search import MemorySearch
from episodic.service.passages import Passages
from episodic.service.privacy import PiiGuard
from episodic.service.recall import RecallService
from episodic.service.session_data import SessionDataService
from episodic.state.digest_memo import RememberedDigestReads
from episodic.state.fixed_facts import FixedFactsCache
from episodic.state.index_cache import WholeIndex
from episodic.state.query_vectors import QueryVectors
from episodic.state.recall_memo import RecencyMemo, ScopeVersions
from episodic.state.spoken_cache import SpokenCache
from episodic.state.visibility import Visibility
from episodic.state.working_set import WorkingSetCache
from episodic.summarize.memories import ExtractiveMemoryExtractor
from episodic.workers.digester import Digester
from episodic.workers.reaper import IdleReaper
from episodic.workers.retention import RetentionJob
from tests.fakes import (
    CountingIds,
    FakeAgentStore,
    FakeContextStore,
    FakeDigestStore,
    FakeEpisodeStore,
    FakeEraser,
    FakeMemoryStore,
    FakeRetentionStore,
    FakeSessionDataStore,
    FakeVectorIndex,
    FirstSentenceSummarizer,
    FixedClock,
    FrozenMonotonic,
    InlineExecutor,
    RecordingDigestWaiter,
    Tables,
    WordEmbedder,
    WordTokenCounter,
)

TENANT = "acme"
CALLER = Caller(TENANT)


@dataclass
class Settings:
    """The few settings the wiring reads (episodic.config.Settings, for these tests)."""

    pii_default: PiiPolicy = PiiPolicy.OFF
    pii_tenants: Mapping[str, PiiPolicy] = field(default_factory=dict)
    retention_caps: Mapping[str, int] = field(default_factory=dict)
    retention_grace: timedelta = timedelta(days=7)
    working_set_max_bytes: int = 64 * 1024 * 1024
    background: BackgroundCompactions | None = None  # None: extractive-style inline compaction


@dataclass
class UseCases:
    """The adapters (fakes), the in-RAM state, the use cases and the workers of one process."""

    tables: Tables
    clock: FixedClock
    monotonic: FrozenMonotonic
    tokens: WordTokenCounter
    embedder: WordEmbedder
    summarizer: FirstSentenceSummarizer
    index: FakeVectorIndex
    agent_store: FakeAgentStore
    episode_store: FakeEpisodeStore
    digest_store: FakeDigestStore
    context_store: FakeContextStore
    eraser: FakeEraser
    visibility: Visibility
    working_sets: WorkingSetCache
    versions: ScopeVersions
    fixed_facts: FixedFactsCache
    pii: PiiGuard
    waiter: RecordingDigestWaiter
    digester: Digester
    episodes: EpisodeService
    agents: AgentService
    recall: RecallService
    context: ContextService
    erasure: EraseService
    index_checker: IndexChecker
    retention: RetentionJob
    reaper: IdleReaper
    memory_index: FakeVectorIndex
    memory_store: FakeMemoryStore
    memories: MemoryService
    memory_search: MemorySearch
    sessions: SessionDataService

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


def use_cases(settings: Settings | None = None) -> UseCases:
    s = settings or Settings()
    tables, clock, monotonic = Tables(), FixedClock(), FrozenMonotonic()
    tokens, embedder, summarizer = WordTokenCounter(), WordEmbedder(), FirstSentenceSummarizer()
    index, limits, pool = FakeVectorIndex(), Limits(), InlineExecutor()
    agent_store, digest_store = FakeAgentStore(tables), FakeDigestStore(tables)
    episode_store, context_store = FakeEpisodeStore(tables, clock), FakeContextStore(tables)
    eraser = FakeEraser(tables)

    memory_index, memory_store = FakeVectorIndex(), FakeMemoryStore(tables, embedder.model_id, clock)
    cached, cached_memories = WholeIndex(index), WholeIndex(memory_index)
    visibility = Visibility(index=cached, memory_index=cached_memories)
    working_sets = WorkingSetCache(s.working_set_max_bytes)
    versions = ScopeVersions()
    fixed_facts = FixedFactsCache()
    spoken_cache = SpokenCache()
    pii = PiiGuard(agents=agent_store, default=s.pii_default, tenants=dict(s.pii_tenants), clock=monotonic)
    for watcher in (working_sets, versions, fixed_facts, spoken_cache, pii):
        visibility.watch(watcher)

    memories = MemoryService(
        store=memory_store, episodes=episode_store, agents=agent_store, embedder=embedder,
        index=cached_memories,
        changes=visibility, pii=pii, extractor=ExtractiveMemoryExtractor(), limits=limits, clock=clock,
        new_id=CountingIds(), pool=pool,
    )  # fmt: skip
    queries = QueryVectors(embedder)
    memory_search = MemorySearch(
        store=memory_store, agents=agent_store, embedder=embedder, index=cached_memories, limits=limits,
        clock=clock, queries=queries,
    )  # fmt: skip
    sessions = FakeSessionDataStore(tables, clock)
    digester = Digester(
        store=digest_store, summarizer=summarizer, embedder=embedder, changes=visibility, clock=clock,
        summary_pool=pool, promote=memories.promote_closed,
    )  # fmt: skip
    waiter = RecordingDigestWaiter(digest_store, digester)
    episodes = EpisodeService(
        episodes=episode_store, agents=agent_store, tokens=tokens, limits=limits, clock=clock,
        new_id=CountingIds("ep_"), changes=visibility, digests=waiter, pii=pii, fixed_facts=fixed_facts,
    )  # fmt: skip
    passages = Passages(messages=context_store, cache=spoken_cache)
    recall = RecallService(
        digests=RememberedDigestReads(digest_store, versions, clock=monotonic),
        agents=agent_store, embedder=embedder, index=cached, limits=limits,
        clock=clock, passages=passages, queries=queries,
    )  # fmt: skip
    context = ContextService(
        store=context_store, episodes=episodes, recall=recall, tokens=tokens, summarizer=summarizer,
        limits=limits, clock=clock, new_id=CountingIds(), cache=working_sets,
        memo=RecencyMemo(versions, clock=monotonic), passages=passages, pii=pii, summary_pool=pool,
        background=s.background, memories=memory_search, memory_store=memory_store, sessions=sessions,
        queries=queries,
    )  # fmt: skip
    return UseCases(
        tables=tables, clock=clock, monotonic=monotonic, tokens=tokens, embedder=embedder,
        summarizer=summarizer, index=index, agent_store=agent_store, episode_store=episode_store,
        digest_store=digest_store, context_store=context_store, eraser=eraser, visibility=visibility,
        working_sets=working_sets, versions=versions, fixed_facts=fixed_facts, pii=pii, waiter=waiter,
        digester=digester, episodes=episodes,
        agents=AgentService(store=agent_store, tokens=tokens, limits=limits, clock=clock, changes=visibility),
        recall=recall, context=context,
        erasure=EraseService(eraser=eraser, changes=visibility, clock=clock, new_id=CountingIds()),
        index_checker=IndexChecker(store=digest_store, index=cached, model=embedder.model_id),
        retention=RetentionJob(
            store=FakeRetentionStore(tables, s.retention_caps), changes=visibility, clock=clock,
            grace=s.retention_grace, expire_memories=memories.remove_expired,
        ),
        reaper=IdleReaper(episodes=episode_store, service=episodes, clock=clock, on_closed=waiter.wake),
        memory_index=memory_index, memory_store=memory_store, memories=memories, memory_search=memory_search,
        sessions=SessionDataService(
            store=sessions, episodes=episode_store, pii=pii, limits=limits, clock=clock
        ),
    )  # fmt: skip
