"""The contract suites' one fixture: `world`, every store port implemented three times (the
in-memory fakes of tests/fakes.py, SQLite, PostgreSQL), so each test states a port's
behaviour once and every implementation is held to it. SQL is the truth: where a fake
disagrees, the fake is wrong.

The SQL worlds share one migrated database per run and backend (migrating per test would
cost most of the suite's time); tests keep apart by unique tenant ids, as on PostgreSQL
elsewhere. Stores are built directly, not through the composition root: these suites test
the ports, not the wiring.

Sweeps (the digest queue and its staleness listing, retention, the idle and expiry
sweeps) read every tenant's rows: they are cluster-wide by design (one queue, one reaper,
one retention job for the cluster, see `Leadership`), so on the shared database they would
meet other tests' rows. A test marked `own_database` runs its SQL worlds over a second
database per run and backend, kept for such tests and emptied before each one, so it can
state exactly what a sweep takes, across the tenants it made."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Connection

from episodic.domain.changes import NO_CHANGES
from episodic.domain.chunking import DocumentFormat, chunk_document
from episodic.domain.episodes import OpenRequest
from episodic.domain.knowledge import MAX_CHUNK_CHARS, MIN_CHUNK_CHARS, Document, DocumentChunk, content_hash
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
from episodic.domain.ports.digests import DigestStore
from episodic.domain.ports.episodes import AgentStore, ContextStore, DraftStore, EpisodeStore, RetentionStore
from episodic.domain.ports.indexes import ScopeVectorSource, StoredVectorKeys
from episodic.domain.ports.knowledge import DocumentWrite, KnowledgeStore
from episodic.domain.ports.memories import MemoryStore, MemoryWrite, SessionDataStore
from episodic.domain.ports.users import Eraser
from episodic.domain.recall import Digest, DigestState, Scope, Vector
from episodic.store import schema
from episodic.store.agents import SqlAgentStore
from episodic.store.context import SqlContextStore
from episodic.store.database import Database, open_database
from episodic.store.digests import SqlDigestStore
from episodic.store.drafts import SqlDraftStore
from episodic.store.episodes import SqlEpisodeStore
from episodic.store.erasure import SqlEraser
from episodic.store.knowledge import SqlKnowledgeStore
from episodic.store.memories import SqlMemoryStore
from episodic.store.retention import SqlRetention
from episodic.store.session_data import SqlSessionDataStore
from episodic.store.vector_sources import SqlKnowledgeVectors
from episodic.store.writer import GroupCommitWriter
from tests.conftest import POSTGRES_ADMIN_URL, _admin, _create_migrated, unique
from tests.fakes import (
    START,
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
    FixedClock,
    Tables,
)

IMPLEMENTATIONS = ["fake", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
MODEL = "contract-model"  # the embedding model every memory store records
ENCODING = "o200k_base"
own_database = pytest.mark.own_database  # see the module docstring; registered in pyproject.toml
OWN_DATABASE = own_database.name


@pytest.fixture(scope="session")
def contract_sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One migrated SQLite file for every contract test of the run."""
    url = f"sqlite:///{tmp_path_factory.mktemp('contracts') / 'episodic.db'}"
    asyncio.run(_create_migrated(url))
    return url


@pytest.fixture(scope="session")
def own_sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The SQLite file of the tests marked own_database, migrated once per run."""
    url = f"sqlite:///{tmp_path_factory.mktemp('own') / 'episodic.db'}"
    asyncio.run(_create_migrated(url))
    return url


@pytest.fixture(scope="session")
def own_postgres_url() -> Iterator[str]:
    """The PostgreSQL database of the tests marked own_database: made and migrated once per
    run, dropped afterwards."""
    name = f"episodic_own_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    url = POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    try:
        asyncio.run(_create_migrated(url))
        yield url
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


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
    digest_keys: StoredVectorKeys  # the digest store again, as the index checker reads it
    drafts: DraftStore
    eraser: Eraser
    sessions: SessionDataStore
    memories: MemoryStore
    retention_capped: Callable[[Mapping[str, int]], RetentionStore]  # tenant -> at most so many days
    knowledge: KnowledgeStore
    knowledge_vectors: ScopeVectorSource  # agent knowledge's vectors of MODEL
    tenant: str = field(default_factory=lambda: unique("tenant"))
    database: Database | None = None  # the SQL worlds' (for what only SQL holds: full-text rows)
    writer: GroupCommitWriter | None = None  # the SQL worlds' writer, for ports built per suite
    tables: Tables | None = None  # the fake world's tables, for fakes built per suite

    @property
    def retention(self) -> RetentionStore:
        """The `RetentionStore` with no tenant capped: each agent's retention_days rules."""
        return self.retention_capped({})

    async def agent(self, tenant_id: str = "", agent_id: str = "", **memory: object) -> Agent:
        """A new agent (of the test's tenant unless named; a new id unless given), created
        through the port."""
        config = MemoryConfig(**memory)  # type: ignore[arg-type]
        at = self.clock()
        agent = Agent(
            tenant_id or self.tenant, agent_id or unique("agent"), "Agent", "Be brief.", "gpt-4o", ENCODING,
            False, config, at, at,
        )  # fmt: skip
        return await self.agents.create_agent(agent)

    async def episode(self, agent: Agent | None = None, user_id: str = "u1", episode_id: str = "") -> Episode:
        """A new open episode (of a new agent unless given; a new id unless given), opened
        through the port."""
        owner = agent or await self.agent()
        request = OpenRequest(owner.agent_id, user_id, episode_id or unique("ep"), {}, self.clock())
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

    async def digested(
        self, episode: Episode, chunks: int = 2, body: str = "what was said", model: str = MODEL
    ) -> Digest:
        """Closes the episode and saves its digest READY with `chunks` vectors of `model` and
        a body."""
        pending = (await self.close(episode)).digest
        assert pending is not None
        ready = dataclasses.replace(
            pending,
            state=DigestState.READY,
            summary="summary",
            embedding_model=model,
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

    def document(
        self,
        agent_id: str,
        text: str,
        *,
        fmt: DocumentFormat = DocumentFormat.MARKDOWN,
        title: str = "",
        max_chars: int = MAX_CHUNK_CHARS,
        embedded: bool = True,
        **changes: Any,
    ) -> DocumentWrite:
        """A write of a new document of `agent_id` in the test's tenant (a new id; made and
        updated now), cut by `chunk_document` (`max_chars` per chunk) and, when `embedded`,
        each chunk with a vector of MODEL: [1, its index]. `changes` replace the document's
        fields (tenant_id, document_id, metadata, expires_at, ...)."""
        at = self.clock()
        pieces = chunk_document(text, fmt, max_chars, min(MIN_CHUNK_CHARS, max_chars // 2))
        d = Document(
            self.tenant, agent_id, unique("doc"), title, "", fmt, text, (), content_hash(fmt, title, text),
            len(pieces), at, at,
        )  # fmt: skip
        d = dataclasses.replace(d, **changes)
        chunks = [
            DocumentChunk(d.document_id, c.index, c.text, c.start, c.end, c.heading_path) for c in pieces
        ]
        vectors = [[1.0, float(c.index)] for c in pieces] if embedded else None
        return DocumentWrite(d, chunks, vectors, MODEL)

    async def learn(self, *writes: DocumentWrite) -> list[Document]:
        """Creates the documents in one call; each must be new."""
        created = (await self.knowledge.create(list(writes), NO_CHANGES)).result
        assert all(made for _, made in created)
        return [d for d, _ in created]


def _fake_world(clock: FixedClock) -> World:
    t = Tables()
    digests = FakeDigestStore(t)
    knowledge = FakeKnowledgeStore(t, MODEL)
    return World(
        "fake",
        clock,
        agents=FakeAgentStore(t),
        episodes=FakeEpisodeStore(t, clock),
        context=FakeContextStore(t),
        digests=digests,
        digest_keys=digests,
        drafts=FakeDraftStore(t),
        eraser=FakeEraser(t),
        sessions=FakeSessionDataStore(t, clock),
        memories=FakeMemoryStore(t, MODEL, clock),
        retention_capped=lambda caps: FakeRetentionStore(t, caps),
        knowledge=knowledge,
        knowledge_vectors=knowledge,
        tables=t,
    )


@pytest.fixture(params=IMPLEMENTATIONS)
def implementation(request: pytest.FixtureRequest) -> tuple[str, str, bool]:
    """(kind, database url, whether it must be emptied first): the databases are made here,
    outside the test's event loop."""
    if request.param == "fake":
        return "fake", "", False  # a new `Tables` each time
    own = request.node.get_closest_marker(OWN_DATABASE) is not None
    shared = "contract_sqlite_url" if request.param == "sqlite" else "postgres_url"
    name = f"own_{request.param}_url" if own else shared
    return request.param, str(request.getfixturevalue(name)), own


@pytest.fixture
async def world(implementation: tuple[str, str, bool]) -> AsyncIterator[World]:
    """Runs the test once per implementation: the fakes, SQLite, PostgreSQL."""
    kind, url, own = implementation
    clock = FixedClock(START)
    if kind == "fake":
        yield _fake_world(clock)
        return
    database = open_database(url)
    writer = GroupCommitWriter(database, workers=1 if database.is_sqlite else 2)
    writer.start()
    try:
        if own:
            await writer.run(_delete_every_row)
        digests = SqlDigestStore(database, writer)
        yield World(
            kind,
            clock,
            agents=SqlAgentStore(database, writer),
            episodes=SqlEpisodeStore(database, writer, clock),
            context=SqlContextStore(database, writer),
            digests=digests,
            digest_keys=digests,
            drafts=SqlDraftStore(database, writer),
            eraser=SqlEraser(database, writer),
            sessions=SqlSessionDataStore(database, writer, clock),
            memories=SqlMemoryStore(database, writer, embedding_model=MODEL, clock=clock),
            retention_capped=lambda caps: SqlRetention(database, writer, caps),
            knowledge=SqlKnowledgeStore(database, writer),
            knowledge_vectors=SqlKnowledgeVectors(database, MODEL),
            database=database,
            writer=writer,
        )
    finally:
        await writer.stop()
        await database.dispose()


def _delete_every_row(conn: Connection) -> None:
    """Children first; SQLite's full-text index follows its table by triggers."""
    for table in reversed(schema.metadata.sorted_tables):
        conn.execute(table.delete())
