"""The contract suites' one fixture: `world`, every store port implemented three times (the
in-memory fakes of tests/fakes.py, SQLite, PostgreSQL), so each test states a port's
behaviour once and every implementation is held to it. SQL is the truth: where a fake
disagrees, the fake is wrong.

The SQL worlds share one migrated database per run and backend (migrating per test would
cost most of the suite's time); tests keep apart by unique tenant ids, as on PostgreSQL
elsewhere. Stores are built directly, not through the composition root: these suites test
the ports, not the wiring."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from episodic.domain.changes import NO_CHANGES
from episodic.domain.episodes import OpenRequest
from episodic.domain.log import PreparedMessage
from episodic.domain.memories import Memory, MemoryKind, MemoryOrigin, MemoryState, Source
from episodic.domain.model import (
    Agent,
    CloseReason,
    Episode,
    MemoryConfig,
    Message,
    NewMessage,
    Role,
    ToolCall,
    ToolResult,
)
from episodic.domain.ports import (
    AgentStore,
    ContextStore,
    DigestStore,
    DraftStore,
    EpisodeStore,
    Eraser,
    MemoryStore,
    MemoryWrite,
    SessionDataStore,
)
from episodic.domain.recall import Digest, DigestState, Scope, Vector
from episodic.store.agents import SqlAgentStore
from episodic.store.context import SqlContextStore
from episodic.store.database import open_database
from episodic.store.digests import SqlDigestStore
from episodic.store.drafts import SqlDraftStore
from episodic.store.episodes import SqlEpisodeStore
from episodic.store.erasure import SqlEraser
from episodic.store.memories import SqlMemoryStore
from episodic.store.session_data import SqlSessionDataStore
from episodic.store.writer import GroupCommitWriter
from tests.conftest import _create_migrated, unique
from tests.fakes import (
    START,
    FakeAgentStore,
    FakeContextStore,
    FakeDigestStore,
    FakeDraftStore,
    FakeEpisodeStore,
    FakeEraser,
    FakeMemoryStore,
    FakeSessionDataStore,
    FixedClock,
    Tables,
)

IMPLEMENTATIONS = ["fake", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
MODEL = "contract-model"  # the embedding model every memory store records
ENCODING = "o200k_base"


@pytest.fixture(scope="session")
def contract_sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One migrated SQLite file for every contract test of the run."""
    url = f"sqlite:///{tmp_path_factory.mktemp('contracts') / 'episodic.db'}"
    asyncio.run(_create_migrated(url))
    yield url


@dataclass
class World:
    """Every store port of one implementation, over one shared database (or `Tables`), a
    clock the test moves, and a tenant of the test's own."""

    kind: str  # "fake", "sqlite" or "postgres"
    clock: FixedClock
    agents: AgentStore
    episodes: EpisodeStore
    context: ContextStore
    digests: DigestStore
    drafts: DraftStore
    eraser: Eraser
    sessions: SessionDataStore
    memories: MemoryStore
    tenant: str = field(default_factory=lambda: unique("tenant"))

    async def agent(self, tenant_id: str = "", **memory: object) -> Agent:
        """A new agent (of the test's tenant unless named), created through the port."""
        config = MemoryConfig(**memory)  # type: ignore[arg-type]
        at = self.clock()
        agent = Agent(
            tenant_id or self.tenant, unique("agent"), "Agent", "Be brief.", "gpt-4o", ENCODING, False,
            config, at, at,
        )  # fmt: skip
        return await self.agents.create_agent(agent)

    async def episode(self, agent: Agent | None = None, user_id: str = "u1") -> Episode:
        """A new open episode (of a new agent unless given), opened through the port."""
        owner = agent or await self.agent()
        request = OpenRequest(owner.agent_id, user_id, unique("ep"), {}, self.clock())
        episode, created = await self.episodes.open_episode(owner.tenant_id, request, ENCODING)
        assert created
        return episode

    async def say(
        self, episode: Episode, *texts: str, role: Role = Role.USER, tokens: int = 3
    ) -> list[Message]:
        """Appends one message per text, of `tokens` tokens each."""
        batch = [PreparedMessage(NewMessage(role, t), tokens, ENCODING) for t in texts]
        appended = await self.episodes.append(episode.tenant_id, episode.episode_id, batch)
        return [m for m, _ in appended]

    async def tool_round(self, episode: Episode, call_id: str) -> None:
        """An assistant tool call and its result: two messages, one tool-call row."""
        call = NewMessage(Role.ASSISTANT, "", tool_calls=(ToolCall(call_id, "lookup", {"q": 1}),))
        result = NewMessage(Role.TOOL, "42", tool_result=ToolResult(call_id, {"a": 42}, succeeded=True))
        batch = [PreparedMessage(call, 3, ENCODING), PreparedMessage(result, 3, ENCODING)]
        await self.episodes.append(episode.tenant_id, episode.episode_id, batch)

    async def close(self, episode: Episode) -> Episode:
        recorded = await self.episodes.close_episode(
            episode.tenant_id, episode.episode_id, CloseReason.USER_ENDED, "", self.clock(), NO_CHANGES
        )
        return recorded.result

    async def digested(self, episode: Episode, chunks: int = 2, body: str = "what was said") -> Digest:
        """Closes the episode and saves its digest READY with `chunks` vectors and a body."""
        pending = (await self.close(episode)).digest
        assert pending is not None
        ready = dataclasses.replace(
            pending,
            state=DigestState.READY,
            summary="summary",
            embedding_model=MODEL,
            updated_at=self.clock(),
        )
        vectors = [[1.0, float(n)] for n in range(chunks)]
        await self.digests.save_ready(ready, vectors, body, NO_CHANGES)
        return ready

    async def remember(self, *rows: Memory | tuple[Memory, Vector | None]) -> None:
        pairs = [r if isinstance(r, tuple) else (r, None) for r in rows]
        await self.memories.write(MemoryWrite(insert=pairs), NO_CHANGES)

    def memory(self, scope: Scope, text: str = "", **changes: Any) -> Memory:
        """A PROMOTED client FACT of `scope`, made now, with a unique id."""
        at = self.clock()
        m = Memory(
            scope.tenant_id, unique("mem"), scope.agent_id, scope.user_id, text or unique("text"),
            MemoryKind.FACT, Source(MemoryOrigin.CLIENT), MemoryState.PROMOTED, at, at,
        )  # fmt: skip
        return dataclasses.replace(m, **changes)

    def later(self, by: timedelta = timedelta(seconds=1)) -> None:
        self.clock.advance(by)


def _fake_world(clock: FixedClock) -> World:
    t = Tables()
    return World(
        "fake",
        clock,
        agents=FakeAgentStore(t),
        episodes=FakeEpisodeStore(t, clock),
        context=FakeContextStore(t),
        digests=FakeDigestStore(t),
        drafts=FakeDraftStore(t),
        eraser=FakeEraser(t),
        sessions=FakeSessionDataStore(t, clock),
        memories=FakeMemoryStore(t, MODEL, clock),
    )


@pytest.fixture(params=IMPLEMENTATIONS)
def implementation(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(kind, database url): the databases are made here, outside the test's event loop."""
    if request.param == "fake":
        return "fake", ""
    name = "contract_sqlite_url" if request.param == "sqlite" else "postgres_url"
    return request.param, str(request.getfixturevalue(name))


@pytest.fixture
async def world(implementation: tuple[str, str]) -> AsyncIterator[World]:
    """Runs the test once per implementation: the fakes, SQLite, PostgreSQL."""
    kind, url = implementation
    clock = FixedClock(START)
    if kind == "fake":
        yield _fake_world(clock)
        return
    database = open_database(url)
    writer = GroupCommitWriter(database, workers=1 if database.is_sqlite else 2)
    writer.start()
    try:
        yield World(
            kind,
            clock,
            agents=SqlAgentStore(database, writer),
            episodes=SqlEpisodeStore(database, writer, clock),
            context=SqlContextStore(database, writer),
            digests=SqlDigestStore(database, writer),
            drafts=SqlDraftStore(database, writer),
            eraser=SqlEraser(database, writer),
            sessions=SqlSessionDataStore(database, writer, clock),
            memories=SqlMemoryStore(database, writer, embedding_model=MODEL, clock=clock),
        )
    finally:
        await writer.stop()
        await database.dispose()
