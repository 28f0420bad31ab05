"""In-memory fakes of every port in `episodic.domain.ports`, for fast tests of the use cases.

The SQL stores share one database; these share one `Tables`, so a close seen by the
episode store is a pending digest for the digest store, an erasure empties every store,
and so on. Each fake keeps the contract its SQL twin keeps (read `episodic.store.*`), and
uses the domain's own rules (`plan_append`, `new_episode`, `reopen`, `close`,
`pending_digest`, `TailReach`) instead of restating them. Where a fake cannot keep part of
a contract, its docstring says so. The ChangeOwner port has no fake: tests use the real
`episodic.state.visibility.Visibility` over `FakeVectorIndex`. A fake store's declared
write (`Declared`) records its changes without a feed (`recorded`): there is no other replica.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Executor, Future
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import ParamSpec, TypeVar

from episodic.domain import episodes as episode_rules
from episodic.domain.agent_deletion import AgentHoldings, AgentRemoved, holds_data
from episodic.domain.changes import Declared, Recorded
from episodic.domain.context import ModelCall, ModelReply, Summary
from episodic.domain.digests import pending_digest
from episodic.domain.drafts import (
    DraftLimits,
    DraftRow,
    Push,
    Pushed,
    episode_closed_error,
    finalized_error,
    plan_push,
)
from episodic.domain.earlier import MAX_MESSAGES as EARLIER_MESSAGES
from episodic.domain.episodes import OpenRequest
from episodic.domain.erasure import KINDS as ERASURE_KINDS
from episodic.domain.erasure import Audit, Erased, user_hash
from episodic.domain.erasure_ledger import LedgerEntry
from episodic.domain.inspection import UserSummary
from episodic.domain.knowledge import (
    Document,
    DocumentChunk,
    KnowledgeFilter,
    embedded_text,
    knowledge_scope,
    split_chunk_key,
)
from episodic.domain.knowledge import expired as document_expired
from episodic.domain.knowledge import passes as document_passes
from episodic.domain.log import AppendContext, AppendPlan, PreparedMessage, StoredMessage, plan_append
from episodic.domain.memories import Memory, MemoryState, SessionData, text_key
from episodic.domain.memory_filter import expired, passes
from episodic.domain.memory_merge import frame_key
from episodic.domain.model import (
    Agent,
    CloseReason,
    Episode,
    EpisodeState,
    Message,
    Role,
    ToolCallRecord,
)
from episodic.domain.ports.digests import DigestWaiter
from episodic.domain.ports.episodes import ContextSources, EpisodeCursor, EpisodeFilter, ReadBatch
from episodic.domain.ports.knowledge import DocumentWrite
from episodic.domain.ports.memories import MemoryFilter, MemoryWrite
from episodic.domain.recall import (
    Digest,
    DigestState,
    DigestText,
    Hit,
    Scope,
    Vector,
    vector_key,
)
from episodic.domain.reducers import TailReach
from episodic.domain.retention import SoftDeleted
from episodic.domain.transfer import ErasureWatch
from episodic.domain.watch import DraftChange, LiveRead
from episodic.domain.working_set import WorkingSet
from episodic.errors import Aborted, AlreadyExists, InvalidArgument, NotFound, Unavailable
from episodic.store.lexical import terms
from episodic.store.retention import effective_days
from tests.fakes_tokens import WordTokenCounter

__all__ = [
    "CountingIds",
    "FakeAgentStore",
    "FakeBackgroundCompactions",
    "FakeContextStore",
    "FakeDigestStore",
    "FakeEpisodeStore",
    "FakeEraser",
    "FakeKnowledgeStore",
    "FakeMemoryStore",
    "FakeRetentionStore",
    "FakeSessionDataStore",
    "FakeVectorIndex",
    "FirstSentenceSummarizer",
    "FixedClock",
    "FrozenMonotonic",
    "InlineExecutor",
    "RecordingDigestWaiter",
    "Tables",
    "WordEmbedder",
    "WordTokenCounter",
]

EpisodeKey = tuple[str, str]  # (tenant, episode)
DocumentKey = tuple[str, str, str]  # (tenant, agent, document)
START = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
P = ParamSpec("P")
R = TypeVar("R")


def recorded(result: R, declared: Declared[R]) -> Recorded[R]:
    """A fake store's unit of work, done: the changes it declared, computed from its result
    (SQL's writer also inserts them into the change feed; a fake has none)."""
    return Recorded(result, list(declared.of(result)), in_feed=False)


# --- time, ids, threads ---------------------------------------------------------------


@dataclass
class FixedClock:
    """The `Clock` port: stands still until a test moves it."""

    now: datetime = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, by: timedelta) -> datetime:
        self.now += by
        return self.now


@dataclass
class FrozenMonotonic:
    """A `time.monotonic` stand-in for the caches' TTLs (PII policies, recency answers): a
    remembered answer expires only when a test moves this clock, never by chance."""

    seconds: float = 0.0

    def __call__(self) -> float:
        return self.seconds

    def advance(self, seconds: float) -> None:
        self.seconds += seconds


@dataclass
class CountingIds:
    """The `IdFactory` port: "<prefix>1", "<prefix>2", ..."""

    prefix: str = "id"
    issued: int = 0

    def __call__(self) -> str:
        self.issued += 1
        return f"{self.prefix}{self.issued}"


class SeparateReads:
    """The `ReadsTogether` port of stores without a database: each read is its own (the
    fakes take the batch and have no trip to share)."""

    def together(self) -> AbstractContextManager[ReadBatch]:
        return contextlib.nullcontext(object())


class InlineExecutor(Executor):
    """Runs submitted work at once, on the caller's thread: summaries made "in the pool"
    are done by the time the submit returns, with no thread to wait for."""

    def submit(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Future[R]:
        future: Future[R] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:
            future.set_exception(exc)
        return future


# --- models ---------------------------------------------------------------------------

_WORD = re.compile(r"\w+")


class WordEmbedder:
    """The `Embedder` port: a bag of lower-cased words hashed into `dimension` buckets,
    L2-normalised (like `episodic.embed.hashing`, without numpy). Texts sharing words score
    higher than texts that do not; there is no meaning beyond that. `embedded` records
    every text asked for, in order."""

    def __init__(self, dimension: int = 64) -> None:
        self._dimension = dimension
        self.embedded: list[str] = []

    @property
    def model_id(self) -> str:
        return f"fake-words-{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.embedded.extend(texts)
        return [self._vector(text) for text in texts]

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self._dimension
        for word in _WORD.findall(text.lower()) or ["\x00empty"]:
            vector[_bucket(word, self._dimension)] += 1.0
        norm = math.sqrt(sum(x * x for x in vector))
        return [x / norm for x in vector]


def _bucket(word: str, dimension: int) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big") % dimension


_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


class FirstSentenceSummarizer:
    """The `Summarizer` port: the summary is the first sentence of the first user message;
    the key facts are the first three distinct spoken messages that contain a digit. `fail_next`
    makes that many coming calls raise RuntimeError (a model endpoint down); `calls`
    counts every call."""

    def __init__(self) -> None:
        self.fail_next = 0
        self.calls = 0

    def summarize(self, transcript: Sequence[Message]) -> DigestText:
        self.calls += 1
        if self.fail_next > 0:
            self.fail_next -= 1
            raise RuntimeError("summarizer unavailable")
        spoken = [m for m in transcript if m.role in (Role.USER, Role.ASSISTANT) and m.content]
        first = next((m.content for m in spoken if m.role is Role.USER), "")
        summary = _SENTENCE_END.split(first, maxsplit=1)[0]
        with_digits = (m.content for m in spoken if any(c.isdigit() for c in m.content))
        facts = tuple(dict.fromkeys(with_digits))[:3]
        return DigestText(summary, facts)


# --- the shared "database" ------------------------------------------------------------


@dataclass
class StoredVectors:
    model: str
    vectors: list[Vector]


@dataclass
class StoredMemory:
    memory: Memory
    model: str = ""  # of `vector`; "" when there is none
    vector: Vector | None = None


@dataclass
class StoredDraft:
    text: str
    updated_at: datetime


@dataclass
class StoredChunk:
    chunk: DocumentChunk
    model: str | None = None  # of `vector`; None when there is none
    vector: Vector | None = None


@dataclass
class Tables:
    """What the SQL schema holds, as dicts keyed like its primary keys. Every store fake
    reads and writes these, so they see each other's writes as the SQL stores do."""

    agents: dict[tuple[str, str], Agent] = field(default_factory=dict)
    episodes: dict[EpisodeKey, Episode] = field(default_factory=dict)
    deleted_at: dict[EpisodeKey, datetime] = field(default_factory=dict)  # soft-deleted (retention)
    messages: dict[EpisodeKey, list[Message]] = field(default_factory=dict)
    fingerprints: dict[tuple[str, str, int], str] = field(default_factory=dict)  # (tenant, episode, seq)
    tool_calls: dict[EpisodeKey, dict[str, ToolCallRecord]] = field(default_factory=dict)
    digests: dict[EpisodeKey, Digest] = field(default_factory=dict)
    vectors: dict[EpisodeKey, StoredVectors] = field(default_factory=dict)
    texts: dict[EpisodeKey, str] = field(default_factory=dict)  # full-text bodies
    summaries: dict[EpisodeKey, list[Summary]] = field(default_factory=dict)
    model_calls: dict[tuple[str, str], ModelCall] = field(default_factory=dict)  # (tenant, call id)
    erasures: list[tuple[str, Audit, dict[str, int]]] = field(default_factory=list)
    memories: dict[tuple[str, str], StoredMemory] = field(default_factory=dict)  # (tenant, memory id)
    session_data: dict[EpisodeKey, SessionData] = field(default_factory=dict)
    drafts: dict[EpisodeKey, dict[str, StoredDraft]] = field(default_factory=dict)  # draft id -> draft
    documents: dict[DocumentKey, Document] = field(default_factory=dict)  # agent knowledge
    chunks: dict[DocumentKey, list[StoredChunk]] = field(default_factory=dict)  # each document's, in order

    def visible(self, tenant_id: str, episode_id: str) -> Episode:
        """The episode, unless it does not exist in this tenant or retention deleted it."""
        key = (tenant_id, episode_id)
        found = self.episodes.get(key)
        if found is None or key in self.deleted_at:
            raise NotFound("episode", episode_id)
        return found

    def drop_digest(self, key: EpisodeKey) -> None:
        """A digest row goes with its vectors and full text (foreign keys cascade)."""
        for table in (self.digests, self.vectors, self.texts):
            table.pop(key, None)

    def drop_episode(self, key: EpisodeKey) -> None:
        """An episode row goes with every row it owns (foreign keys cascade)."""
        self.drop_digest(key)
        for table in (
            self.episodes,
            self.deleted_at,
            self.messages,
            self.tool_calls,
            self.summaries,
            self.session_data,
            self.drafts,
        ):
            table.pop(key, None)
        for seq_key in [k for k in self.fingerprints if k[:2] == key]:
            del self.fingerprints[seq_key]
        for call_key in [k for k, c in self.model_calls.items() if (c.tenant_id, c.episode_id) == key]:
            del self.model_calls[call_key]


# --- stores ---------------------------------------------------------------------------


class FakeAgentStore:
    """The `AgentStore` port. `reads` counts get_agent calls (caches are meant to save them)."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables
        self.reads = 0

    async def create_agent(self, agent: Agent) -> Agent:
        key = (agent.tenant_id, agent.agent_id)
        if key in self._t.agents:
            raise AlreadyExists(f"agent {agent.agent_id!r} already exists", reason="AGENT_EXISTS")
        self._t.agents[key] = agent
        return agent

    async def get_agent(self, tenant_id: str, agent_id: str) -> Agent:
        self.reads += 1
        return self._agent(tenant_id, agent_id)

    async def update_agent(
        self, tenant_id: str, agent_id: str, change: Callable[[Agent], Agent], declared: Declared[Agent]
    ) -> Recorded[Agent]:
        changed = change(self._agent(tenant_id, agent_id))
        self._t.agents[(tenant_id, agent_id)] = changed
        return recorded(changed, declared)

    async def list_agents(
        self, tenant_id: str, after: str | None, limit: int, only: frozenset[str] | None = None
    ) -> list[Agent]:
        found = [
            a
            for (tenant, agent_id), a in sorted(self._t.agents.items())
            if tenant == tenant_id
            and (only is None or agent_id in only)
            and (after is None or agent_id > after)
        ]
        return found[:limit]

    async def holdings(self, tenant_id: str, agent_id: str) -> AgentHoldings:
        episodes = [e for (t, _), e in self._t.episodes.items() if (t, e.agent_id) == (tenant_id, agent_id)]
        memories = [m for (t, _), m in self._memories() if (t, m.agent_id) == (tenant_id, agent_id)]
        documents = [k for k in self._t.documents if k[:2] == (tenant_id, agent_id)]
        users = {e.user_id for e in episodes} | {m.user_id for m in memories}
        return AgentHoldings(len(users), len(episodes), len(memories), len(documents))

    async def user_ids(self, tenant_id: str, agent_id: str, after: str | None, limit: int) -> list[str]:
        users = {
            e.user_id for (t, _), e in self._t.episodes.items() if (t, e.agent_id) == (tenant_id, agent_id)
        }
        users |= {m.user_id for (t, _), m in self._memories() if (t, m.agent_id) == (tenant_id, agent_id)}
        return sorted(u for u in users if after is None or u > after)[:limit]

    async def delete_agent(
        self, tenant_id: str, agent_id: str, declared: Declared[AgentRemoved]
    ) -> Recorded[AgentRemoved]:
        agent = self._agent(tenant_id, agent_id)
        held = await self.holdings(tenant_id, agent_id)
        if held.episodes or held.memories:
            raise holds_data(agent_id, held, meanwhile=True)
        documents = sorted(k for k in self._t.documents if k[:2] == (tenant_id, agent_id))
        for key in documents:
            del self._t.documents[key]
            self._t.chunks.pop(key, None)
        del self._t.agents[(tenant_id, agent_id)]
        return recorded(AgentRemoved(agent, [k[2] for k in documents]), declared)

    def _memories(self) -> list[tuple[tuple[str, str], Memory]]:
        return [(k, stored.memory) for k, stored in self._t.memories.items()]

    def _agent(self, tenant_id: str, agent_id: str) -> Agent:
        found = self._t.agents.get((tenant_id, agent_id))
        if found is None:
            raise NotFound("agent", agent_id)
        return found


class FakeEpisodeStore:
    """The `EpisodeStore` port. Appends are planned by the domain's `plan_append`, so seqs
    are dense, retries dedupe by client message id and tool results join their calls
    exactly as in SQL. Calls run one at a time (nothing here awaits), which is the
    serialisation SQL's row locks give."""

    def __init__(self, tables: Tables, clock: Callable[[], datetime]) -> None:
        self._t = tables
        self._clock = clock

    async def open_episode(
        self, tenant_id: str, request: OpenRequest, token_encoding: str
    ) -> tuple[Episode, bool]:
        if (tenant_id, request.agent_id) not in self._t.agents:  # SQL holds the agent's row
            raise NotFound("agent", request.agent_id)
        key = (tenant_id, request.episode_id)
        existing = self._t.episodes.get(key)  # soft-deleted ones too: their ids stay taken
        if existing is not None:
            return episode_rules.reopen(existing, request), False
        fresh = episode_rules.new_episode(tenant_id, request, token_encoding, opened_at=self._clock())
        self._t.episodes[key] = fresh
        self._t.messages[key] = []
        return fresh, True

    async def append(
        self, tenant_id: str, episode_id: str, batch: Sequence[PreparedMessage]
    ) -> list[tuple[Message, bool]]:
        episode = self._t.visible(tenant_id, episode_id)
        key = (tenant_id, episode_id)
        context = AppendContext(episode, self._by_client_id(key), dict(self._t.tool_calls.get(key, {})))
        now = self._clock()
        plan = plan_append(context, batch, now)
        if plan.inserts:
            self._write(key, episode, plan, now)
        return plan.results

    async def append_turn(
        self, tenant_id: str, episode_id: str, message: PreparedMessage, with_pending: bool
    ) -> tuple[Message, bool, list[Memory], Awaitable[None]]:
        ((stored, replayed),) = await self.append(tenant_id, episode_id, [message])
        if not with_pending:
            return stored, replayed, [], _committed()
        held = [
            m.memory
            for (tenant, _), m in self._t.memories.items()
            if (tenant, m.memory.episode_id) == (tenant_id, episode_id)
            and m.memory.state is MemoryState.PENDING
        ]
        held.sort(key=lambda m: (m.created_at, m.memory_id))
        return stored, replayed, held, _committed()

    def _by_client_id(self, key: EpisodeKey) -> dict[str, StoredMessage]:
        return {
            m.client_message_id: StoredMessage(m, self._t.fingerprints[(*key, m.seq)])
            for m in self._t.messages.get(key, [])
            if m.client_message_id
        }

    def _write(self, key: EpisodeKey, episode: Episode, plan: AppendPlan, now: datetime) -> None:
        for message, fingerprint in plan.inserts:
            self._t.messages[key].append(message)
            self._t.fingerprints[(*key, message.seq)] = fingerprint
        calls = self._t.tool_calls.setdefault(key, {})
        for record in [*plan.new_tool_calls, *plan.tool_results]:
            calls[record.tool_call_id] = record
        self._t.episodes[key] = dataclasses.replace(
            episode,
            message_count=plan.last_seq,
            token_count=episode.token_count + plan.token_delta,
            last_activity_at=now,
        )

    async def close_episode(
        self,
        tenant_id: str,
        episode_id: str,
        reason: CloseReason,
        note: str,
        ended_at: datetime,
        declared: Declared[Episode],
    ) -> Recorded[Episode]:
        episode = self._t.visible(tenant_id, episode_id)
        closed = episode_rules.close(episode, reason, note, ended_at)
        if closed is episode:
            return recorded(self._with_digest(closed), declared)
        digest = pending_digest(closed, self._clock())
        self._t.episodes[(tenant_id, episode_id)] = closed
        self._t.digests[(tenant_id, episode_id)] = digest
        return recorded(dataclasses.replace(closed, digest=digest), declared)

    async def retract_message(
        self, tenant_id: str, episode_id: str, seq: int, declared: Declared[Message]
    ) -> Recorded[Message]:
        episode = self._t.visible(tenant_id, episode_id)
        log = self._t.messages[(tenant_id, episode_id)]
        found = next((i for i, m in enumerate(log) if m.seq == seq), None)
        if found is None:
            raise NotFound("message", f"{episode_id}#{seq}")
        message = log[found]
        through = max((s.to_seq for s in self._t.summaries.get((tenant_id, episode_id), [])), default=0)
        calls = {c.tool_call_id for c in message.tool_calls}
        live = [
            m.seq
            for m in log
            if m.tool_result is not None and m.tool_result.tool_call_id in calls and m.retracted_at is None
        ]
        retracted = episode_rules.retract(episode, message, through, live, self._clock())
        if retracted is not message:
            self._unregister_tools(tenant_id, episode_id, retracted)
        log[found] = retracted
        return recorded(retracted, declared)

    def _unregister_tools(self, tenant_id: str, episode_id: str, message: Message) -> None:
        calls = self._t.tool_calls.get((tenant_id, episode_id), {})
        for call in message.tool_calls:
            calls.pop(call.tool_call_id, None)
        if message.tool_result is not None and message.tool_result.tool_call_id in calls:
            record = calls[message.tool_result.tool_call_id]
            calls[record.tool_call_id] = dataclasses.replace(record, result=None, result_seq=0)

    async def get_episode(self, tenant_id: str, episode_id: str) -> Episode:
        return self._with_digest(self._t.visible(tenant_id, episode_id))

    async def list_episodes(
        self, tenant_id: str, where: EpisodeFilter, after: EpisodeCursor | None, limit: int
    ) -> list[Episode]:
        found = [
            e
            for key, e in self._t.episodes.items()
            if e.tenant_id == tenant_id and key not in self._t.deleted_at and _matches(e, where, after)
        ]
        found.sort(key=lambda e: (e.started_at, e.episode_id), reverse=True)
        return [self._with_digest(e) for e in found[:limit]]

    async def list_users(
        self, tenant_id: str, agent_id: str, after_user_id: str | None, limit: int
    ) -> list[UserSummary]:
        users: dict[str, UserSummary] = {}

        def later(user_id: str) -> bool:
            return after_user_id is None or user_id > after_user_id

        for key, e in self._t.episodes.items():
            if (e.tenant_id, e.agent_id) != (tenant_id, agent_id) or key in self._t.deleted_at:
                continue
            if not later(e.user_id):
                continue
            seen = users.get(e.user_id) or UserSummary(e.user_id, 0, e.last_activity_at)
            users[e.user_id] = dataclasses.replace(
                seen,
                episodes=seen.episodes + 1,
                open_episodes=seen.open_episodes + (e.state is EpisodeState.OPEN),
                last_activity_at=max(seen.last_activity_at, e.last_activity_at),
            )
        for stored in self._t.memories.values():
            m = stored.memory
            if (m.tenant_id, m.agent_id) != (tenant_id, agent_id) or m.superseded_by or not later(m.user_id):
                continue
            if expired(m, self._clock()):
                continue
            seen = users.get(m.user_id) or UserSummary(m.user_id, 0, m.updated_at)
            users[m.user_id] = dataclasses.replace(
                seen, memories=seen.memories + 1, last_activity_at=max(seen.last_activity_at, m.updated_at)
            )
        return [users[u] for u in sorted(users)][:limit]

    async def list_messages(
        self, tenant_id: str, episode_id: str, before_seq: int | None, limit: int
    ) -> list[Message]:
        self._t.visible(tenant_id, episode_id)
        log = self._t.messages[(tenant_id, episode_id)]
        older = [m for m in log if before_seq is None or m.seq < before_seq]
        return older[::-1][:limit]

    async def idle_episodes(self, now: datetime, limit: int) -> list[Episode]:
        """Open episodes idle past their agent's idle timeout, agent by agent, oldest first."""
        found: list[Episode] = []
        for (tenant_id, agent_id), agent in sorted(self._t.agents.items()):
            cutoff = now - agent.memory.idle_timeout
            idle = [
                e
                for e in self._t.episodes.values()
                if (e.tenant_id, e.agent_id) == (tenant_id, agent_id)
                and e.state is EpisodeState.OPEN
                and e.last_activity_at < cutoff
            ]
            found += sorted(idle, key=lambda e: e.last_activity_at)[: limit - len(found)]
            if len(found) >= limit:
                break
        return found

    def _with_digest(self, episode: Episode) -> Episode:
        digest = self._t.digests.get((episode.tenant_id, episode.episode_id))
        return episode if digest is None else dataclasses.replace(episode, digest=digest)


def _matches(e: Episode, where: EpisodeFilter, after: EpisodeCursor | None) -> bool:
    if where.agent_id and e.agent_id != where.agent_id:
        return False
    if where.agent_ids is not None and e.agent_id not in where.agent_ids:
        return False
    if where.user_id and e.user_id != where.user_id:
        return False
    if where.state is not None and e.state is not where.state:
        return False
    return after is None or (e.started_at, e.episode_id) < (after.started_at, after.episode_id)


_WAITING = (DigestState.PENDING, DigestState.FAILED)


class FakeDigestStore:
    """The `DigestStore` port, and `StoredVectorKeys` (as SqlDigestStore is both).

    Cannot honour: `lexical` is not BM25 / ts_rank_cd; it scores an episode by how many
    times the query's terms (the same stop-word-free terms SQL uses) occur in its text, so
    only "matches or not" and "more matches rank higher" hold. A claim's lease is honoured
    (claimed work is not due again before it ends), but there are no competing replicas. As
    in SQL, a digest never claimed since its episode closed (its next attempt still its
    update time) is due whatever `now` says: the closing replica's clock may run ahead."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    async def claim_due(self, now: datetime, limit: int, lease: timedelta) -> list[Digest]:
        due = [
            d
            for d in self._t.digests.values()
            if d.state in _WAITING and (d.next_attempt_at <= now or d.next_attempt_at == d.updated_at)
        ]
        claimed = sorted(due, key=lambda d: d.next_attempt_at)[:limit]
        for d in claimed:
            self._t.digests[(d.tenant_id, d.episode_id)] = dataclasses.replace(d, next_attempt_at=now + lease)
        return claimed

    async def stale(self, model: str, limit: int) -> list[Digest]:
        return self._stale(model)[:limit]

    async def count_stale(self, model: str) -> int:
        return len(self._stale(model))

    def _stale(self, model: str) -> list[Digest]:
        return [
            d for d in self._t.digests.values() if d.state is DigestState.READY and d.embedding_model != model
        ]

    async def transcript(self, digest: Digest) -> list[Message]:
        return list(self._t.messages.get((digest.tenant_id, digest.episode_id), []))

    async def save_ready(
        self, digest: Digest, vectors: Sequence[Vector], body: str, declared: Declared[bool]
    ) -> Recorded[bool]:
        """Like SQL's UPDATE, writes nothing for a digest whose row is gone (erased meanwhile)."""
        key = (digest.tenant_id, digest.episode_id)
        saved = key in self._t.digests
        if saved:
            self._t.digests[key] = digest
            self._t.vectors[key] = StoredVectors(digest.embedding_model, list(vectors))
            self._t.texts[key] = body
        return recorded(saved, declared)

    async def save_failed(self, digest: Digest, declared: Declared[bool]) -> Recorded[bool]:
        key = (digest.tenant_id, digest.episode_id)
        if key in self._t.digests:
            self._t.digests[key] = digest
        return recorded(key in self._t.digests, declared)

    async def get(self, tenant_id: str, episode_id: str) -> Digest | None:
        return self._t.digests.get((tenant_id, episode_id))

    async def vector_keys(self, tenant_id: str, model: str, agent_id: str = "") -> list[tuple[Scope, str]]:
        return [
            (self._t.digests[key].scope, vector_key(key[1], chunk))
            for key, stored in self._t.vectors.items()
            if key[0] == tenant_id and stored.model == model
            and (not agent_id or self._t.digests[key].agent_id == agent_id)
            for chunk in range(len(stored.vectors))
        ]  # fmt: skip

    async def recent(
        self,
        scope: Scope,
        limit: int,
        after: datetime | None,
        before: datetime | None,
        batch: ReadBatch | None = None,
    ) -> list[Digest]:
        ready = self._ready_in(scope, after, before)
        ready.sort(key=lambda d: d.episode_id)
        ready.sort(key=lambda d: d.ended_at, reverse=True)
        return ready[:limit]

    async def ready_among(
        self,
        scope: Scope,
        episode_ids: Sequence[str],
        after: datetime | None,
        before: datetime | None,
        batch: ReadBatch | None = None,
    ) -> dict[str, Digest]:
        wanted = set(episode_ids)
        return {d.episode_id: d for d in self._ready_in(scope, after, before) if d.episode_id in wanted}

    async def pending_count(self, scope: Scope, batch: ReadBatch | None = None) -> int:
        return sum(d.scope == scope and d.state in _WAITING for d in self._t.digests.values())

    async def lexical(
        self, scope: Scope, query: str, limit: int, batch: ReadBatch | None = None
    ) -> list[Hit]:
        wanted = terms(query)
        hits = []
        for key, body in self._t.texts.items():
            if self._t.digests[key].scope != scope:
                continue
            words = [w.lower() for w in _WORD.findall(body)]
            score = sum(words.count(term) for term in wanted)
            if score:
                hits.append(Hit(key[1], float(score)))
        hits.sort(key=lambda h: (-h.score, h.episode_id))
        return hits[:limit]

    def _ready_in(self, scope: Scope, after: datetime | None, before: datetime | None) -> list[Digest]:
        return [
            d
            for d in self._t.digests.values()
            if d.scope == scope and d.state is DigestState.READY
            and (after is None or d.ended_at >= after) and (before is None or d.ended_at < before)
        ]  # fmt: skip


class FakeContextStore:
    """The `ContextStore` port: working-set sources read as SQL reads them (only what is
    new; at most what `TailReach` says an allowance needs), model calls unique per
    (episode, request_id), summaries keyed by their span end."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables
        self.source_reads = 0

    async def sources(
        self, tenant_id: str, episode_id: str, known_summary_to: int, after_seq: int | None, allowance: int
    ) -> ContextSources:
        self.source_reads += 1
        episode = self._t.visible(tenant_id, episode_id)
        agent = self._t.agents[(tenant_id, episode.agent_id)]
        summary = self._latest_summary(tenant_id, episode_id, known_summary_to)
        since = after_seq if after_seq is not None else (summary.to_seq if summary else 0)
        newest: list[Message] = []
        complete = True
        if episode.message_count > since:
            reach = TailReach(max(allowance, agent.memory.max_working_memory_tokens))
            newest, complete = self._newest_within(tenant_id, episode_id, since, reach)
        before = newest[0].seq if newest else episode.message_count + 1
        earlier = self._spoken_before(tenant_id, episode_id, before) if after_seq is None else []
        return ContextSources(episode, agent, summary, newest, complete, earlier)

    def _spoken_before(self, tenant_id: str, episode_id: str, before: int) -> list[Message]:
        spoken = (Role.USER, Role.ASSISTANT)
        found = [
            m
            for m in self._t.messages[(tenant_id, episode_id)]
            if m.seq < before and m.role in spoken and m.retracted_at is None
        ]
        return found[-EARLIER_MESSAGES:]

    def _latest_summary(self, tenant_id: str, episode_id: str, known: int) -> Summary | None:
        newer = [s for s in self._t.summaries.get((tenant_id, episode_id), []) if s.to_seq > known]
        return max(newer, key=lambda s: s.to_seq) if newer else None

    def _newest_within(
        self, tenant_id: str, episode_id: str, since: int, reach: TailReach
    ) -> tuple[list[Message], bool]:
        newest: list[Message] = []
        for m in reversed(self._t.messages[(tenant_id, episode_id)]):
            if m.seq <= since:
                break
            newest.append(m)
            if reach.reached_with(m):
                return newest[::-1], m.seq == since + 1
        return newest[::-1], True

    async def save_call(self, call: ModelCall, summary: Summary | None) -> tuple[ModelCall, bool]:
        """NOT_FOUND when the episode was erased while the turn was built (SQL's foreign key)."""
        key = (call.tenant_id, call.episode_id)
        if key not in self._t.episodes:
            raise NotFound("episode", call.episode_id)
        if summary is not None:
            self._insert_summary(summary)
        replayed = (
            self._call_for(call.tenant_id, call.episode_id, call.request_id) if call.request_id else None
        )
        if replayed is not None:
            return replayed, False
        self._t.model_calls[(call.tenant_id, call.model_call_id)] = call
        return call, True

    async def save_summary(self, summary: Summary) -> None:
        self._insert_summary(summary)

    async def spoken(
        self, tenant_id: str, episode_ids: Sequence[str], per_episode: int
    ) -> dict[str, list[Message]]:
        found: dict[str, list[Message]] = {}
        for episode_id in sorted(set(episode_ids)):
            key = (tenant_id, episode_id)
            if key in self._t.episodes and key not in self._t.deleted_at:
                said = [m for m in self._t.messages.get(key, []) if m.role in (Role.USER, Role.ASSISTANT)]
                if said:
                    found[episode_id] = said[:per_episode]
        return found

    def _insert_summary(self, summary: Summary) -> None:
        """Ignores a second summary with the same span end, as SQL's insert does."""
        held = self._t.summaries.setdefault((summary.tenant_id, summary.episode_id), [])
        if all(s.to_seq != summary.to_seq for s in held):
            held.append(summary)

    async def call_for_request(self, tenant_id: str, episode_id: str, request_id: str) -> ModelCall | None:
        if (tenant_id, episode_id) in self._t.deleted_at:
            return None
        return self._call_for(tenant_id, episode_id, request_id)

    def _call_for(self, tenant_id: str, episode_id: str, request_id: str) -> ModelCall | None:
        return next(
            (
                c
                for c in self._t.model_calls.values()
                if (c.tenant_id, c.episode_id, c.request_id) == (tenant_id, episode_id, request_id)
            ),
            None,
        )

    async def get_call(self, tenant_id: str, model_call_id: str) -> ModelCall:
        call = self._t.model_calls.get((tenant_id, model_call_id))
        if call is None or (tenant_id, call.episode_id) in self._t.deleted_at:
            raise NotFound("model call", model_call_id)
        return call

    async def list_calls(
        self, tenant_id: str, episode_id: str, before: tuple[datetime, str] | None, limit: int
    ) -> list[ModelCall]:
        self._t.visible(tenant_id, episode_id)
        calls = [
            c
            for c in self._t.model_calls.values()
            if (c.tenant_id, c.episode_id) == (tenant_id, episode_id)
            and (before is None or (c.created_at, c.model_call_id) < before)
        ]
        calls.sort(key=lambda c: (c.created_at, c.model_call_id), reverse=True)
        return calls[:limit]

    async def record_reply(self, tenant_id: str, model_call_id: str, reply: ModelReply) -> ModelCall:
        call = await self.get_call(tenant_id, model_call_id)
        if call.reply is not None:
            return _same_reply(call, reply)
        if reply.assistant_message_seq:
            self._require_assistant_message(call, reply.assistant_message_seq)
        replied = dataclasses.replace(call, reply=reply)
        self._t.model_calls[(tenant_id, model_call_id)] = replied
        return replied

    def _require_assistant_message(self, call: ModelCall, seq: int) -> None:
        log = self._t.messages.get((call.tenant_id, call.episode_id), [])
        if not any(m.seq == seq and m.role is Role.ASSISTANT for m in log):
            raise InvalidArgument.of(
                "assistant_message_seq", f"episode {call.episode_id} has no assistant message with seq {seq}"
            )


def _same_reply(call: ModelCall, reply: ModelReply) -> ModelCall:
    stored = call.reply
    assert stored is not None
    if dataclasses.replace(stored, recorded_at=None) == dataclasses.replace(reply, recorded_at=None):
        return call
    raise AlreadyExists(
        f"model call {call.model_call_id} already has a different reply", reason="REPLY_ALREADY_RECORDED"
    )


class FakeEraser:
    """The `Eraser` port: deletes one user's episodes (soft-deleted ones too) with every row
    they own, counted per receipt kind, and audits the erasure. `scrub` does nothing (there
    are no files) and answers `scrubbed`."""

    def __init__(self, tables: Tables, scrubbed: bool = True) -> None:
        self._t = tables
        self.scrubbed = scrubbed
        self.scrubs: list[dict[str, int]] = []

    async def erase(
        self, tenant_id: str, user_id: str, agent_id: str, audit: Audit, declared: Declared[Erased]
    ) -> Recorded[Erased]:
        mine = [
            key
            for key, e in self._t.episodes.items()
            if key[0] == tenant_id and e.user_id == user_id and (not agent_id or e.agent_id == agent_id)
        ]
        counts = {"episodes": len(mine)} | _owned_counts(self._t, mine)
        erased = [(self._t.episodes[key].agent_id, key[1]) for key in mine]
        for key in mine:
            self._t.drop_episode(key)
        memories, memory_vectors = self._erase_memories(tenant_id, user_id, agent_id)
        counts["memories"] = len(memories)
        self._t.erasures.append((tenant_id, audit, counts))
        return recorded(Erased(counts, erased, memories, memory_vectors), declared)

    def _erase_memories(
        self, tenant_id: str, user_id: str, agent_id: str
    ) -> tuple[list[tuple[Scope, str]], int]:
        mine = [
            stored
            for stored in self._t.memories.values()
            if (m := stored.memory).tenant_id == tenant_id
            and m.user_id == user_id
            and (not agent_id or m.agent_id == agent_id)
        ]
        for stored in mine:
            del self._t.memories[(stored.memory.tenant_id, stored.memory.memory_id)]
        indexed = sum(1 for s in mine if s.vector is not None and s.memory.state is MemoryState.PROMOTED)
        return [(s.memory.scope, s.memory.memory_id) for s in mine], indexed

    async def scrub(self, counts: Mapping[str, int]) -> bool:
        self.scrubs.append(dict(counts))
        return self.scrubbed


def _owned_counts(t: Tables, keys: Sequence[EpisodeKey]) -> dict[str, int]:
    chosen = set(keys)
    return {
        "messages": sum(len(t.messages.get(k, [])) for k in chosen),
        "tool_calls": sum(len(t.tool_calls.get(k, {})) for k in chosen),
        "summaries": sum(len(t.summaries.get(k, [])) for k in chosen),
        "digests": sum(k in t.digests for k in chosen),
        "digest_vectors": sum(len(t.vectors[k].vectors) for k in chosen if k in t.vectors),
        "text_rows": sum(k in t.texts for k in chosen),
        "model_calls": sum((c.tenant_id, c.episode_id) in chosen for c in t.model_calls.values()),
        "session_data": sum(k in t.session_data for k in chosen),
    }


class FakeRetentionStore:
    """The `RetentionStore` port: closed episodes past their agent's retention (capped per
    tenant by `tenant_caps`, as configured) are soft-deleted, their digests, vectors and
    full text dropped; soft-deleted ones are purged with every row after the cut-off."""

    def __init__(self, tables: Tables, tenant_caps: Mapping[str, int] | None = None) -> None:
        self._t = tables
        self._caps = dict(tenant_caps or {})

    async def soft_delete_due(
        self, now: datetime, limit: int, declared: Declared[list[SoftDeleted]]
    ) -> Recorded[list[SoftDeleted]]:
        due: list[SoftDeleted] = []
        for (tenant_id, agent_id), agent in sorted(self._t.agents.items()):
            days = effective_days(agent.memory.retention_days, self._caps.get(tenant_id, 0))
            if days:
                due += self._expired(tenant_id, agent_id, now - timedelta(days=days))[: limit - len(due)]
            if len(due) >= limit:
                break
        for d in due:
            self._t.deleted_at[(d.tenant_id, d.episode_id)] = now
            self._t.drop_digest((d.tenant_id, d.episode_id))
        return recorded(due, declared)

    def _expired(self, tenant_id: str, agent_id: str, cut: datetime) -> list[SoftDeleted]:
        expired = [
            e
            for key, e in self._t.episodes.items()
            if (e.tenant_id, e.agent_id) == (tenant_id, agent_id) and e.state is EpisodeState.CLOSED
            and e.ended_at is not None and e.ended_at < cut and key not in self._t.deleted_at
        ]  # fmt: skip
        expired.sort(key=lambda e: e.ended_at or cut)
        return [SoftDeleted(tenant_id, agent_id, e.user_id, e.episode_id) for e in expired]

    async def purge_due(self, deleted_before: datetime, limit: int) -> int:
        due = sorted((at, key) for key, at in self._t.deleted_at.items() if at < deleted_before)[:limit]
        for _, key in due:
            self._t.drop_episode(key)
        return len(due)


# --- the index ------------------------------------------------------------------------


class FakeVectorIndex:
    """The `VectorIndex` port: brute-force cosine per scope, keys upserted (adding a key
    again replaces its vector), removing an unknown key ignored, scopes holding no vector
    not listed. Ties rank by key, so results are deterministic."""

    def __init__(self) -> None:
        self._scopes: dict[Scope, dict[str, list[float]]] = {}

    def add(self, scope: Scope, keys: Sequence[str], vectors: Sequence[Sequence[float]]) -> None:
        if len(keys) != len(vectors):
            raise ValueError(f"{len(keys)} keys for {len(vectors)} vectors")
        held = self._scopes.setdefault(scope, {})
        for key, vector in zip(keys, vectors, strict=True):
            held[key] = [float(x) for x in vector]

    def remove(self, scope: Scope, keys: Sequence[str]) -> None:
        held = self._scopes.get(scope, {})
        for key in keys:
            held.pop(key, None)

    def search(self, scope: Scope, vector: Sequence[float], k: int) -> list[Hit]:
        held = self._scopes.get(scope, {})
        hits = [Hit(key, _cosine(vector, v)) for key, v in held.items()]
        hits.sort(key=lambda h: (-h.score, h.episode_id))
        return hits[: max(k, 0)]

    def keys(self, scope: Scope) -> set[str]:
        return set(self._scopes.get(scope, {}))

    def count(self, scope: Scope) -> int:
        return len(self._scopes.get(scope, {}))

    def scopes(self) -> list[Scope]:
        held = [scope for scope, vectors in self._scopes.items() if vectors]
        return sorted(held, key=lambda s: (s.tenant_id, s.agent_id, s.user_id))

    def __len__(self) -> int:
        return sum(len(vectors) for vectors in self._scopes.values())


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norms if norms else 0.0


# --- the digester and background compactions, as the use cases see them ----------------


class RecordingDigestWaiter:
    """The `DigestWaiter` port: counts wakes; waiting is handed to `inner` (the real
    digester), or, without one, answers the digest as it is now."""

    def __init__(self, digests: FakeDigestStore, inner: DigestWaiter | None = None) -> None:
        self._digests = digests
        self._inner = inner
        self.wakes = 0

    def wake(self) -> None:
        self.wakes += 1
        if self._inner is not None:
            self._inner.wake()

    async def wait_settled(self, tenant_id: str, episode_id: str, timeout: float) -> Digest | None:
        if self._inner is not None:
            return await self._inner.wait_settled(tenant_id, episode_id, timeout)
        return await self._digests.get(tenant_id, episode_id)


@dataclass
class FakeBackgroundCompactions:
    """The `BackgroundCompactions` port: records what was scheduled, summarizes nothing."""

    scheduled: list[tuple[tuple[str, str], int]] = field(default_factory=list)

    def schedule(self, key: tuple[str, str], working_set: WorkingSet, through: int) -> None:
        self.scheduled.append((key, through))


# --- long-term memories and session data ------------------------------------------------


def _system_clock() -> datetime:
    return datetime.now(UTC)


class FakeMemoryStore:
    """The `MemoryStore` port, like SqlMemoryStore: vectors are recorded with
    `embedding_model`; `clock` decides expiry for same_text / same_frame. A write is
    checked whole before any of it applies. Cannot honour: inserting an id that exists
    raises AlreadyExists here, an IntegrityError (via the writer) in SQL."""

    def __init__(
        self,
        tables: Tables,
        embedding_model: str = "fake-words-64",
        clock: Callable[[], datetime] = _system_clock,
    ) -> None:
        self._t = tables
        self._model = embedding_model
        self._clock = clock

    async def write(
        self, change: MemoryWrite, declared: Declared[frozenset[str]]
    ) -> Recorded[frozenset[str]]:
        if change.episode is not None and change.episode not in self._t.episodes:
            raise NotFound("episode", change.episode[1])
        if change.watch is not None:
            self._refuse_if_erased(change.watch, [*change.insert, *change.replace])
        rows = dict(self._t.memories)
        for m, v in change.insert:
            if (m.tenant_id, m.memory_id) in rows:
                raise AlreadyExists(f"memory {m.memory_id!r} already exists", reason="MEMORY_EXISTS")
            rows[(m.tenant_id, m.memory_id)] = self._stored(m, v)
        gone = set()
        for m, v in change.replace:
            old = rows.get((m.tenant_id, m.memory_id))
            if old is None:  # a row gone meanwhile (erased) stays gone
                gone.add(m.memory_id)
                continue
            rows[(m.tenant_id, m.memory_id)] = (
                self._stored(m, v) if v is not None else dataclasses.replace(old, memory=m)
            )
        for key in change.delete:
            if rows.pop(key, None) is None:
                gone.add(key[1])
        self._t.memories = rows
        return recorded(frozenset(gone), declared)

    async def erasure_watch(self, tenant_id: str, user_id: str) -> ErasureWatch:
        hashed = user_hash(tenant_id, user_id)
        return ErasureWatch(
            hashed,
            frozenset(
                a.erasure_id for t, a, _ in self._t.erasures if (t, a.user_hash) == (tenant_id, hashed)
            ),
        )

    def _refuse_if_erased(self, watch: ErasureWatch, insert: Sequence[tuple[Memory, Vector | None]]) -> None:
        """As store/erasure.py refuse_if_erased: an erasure of an inserted memory's user (and
        agent, or every agent) not in `watch`."""
        for m, _ in insert:
            if user_hash(m.tenant_id, m.user_id) != watch.user_hash:
                continue
            for tenant_id, audit, _ in self._t.erasures:
                if (
                    tenant_id == m.tenant_id
                    and audit.user_hash == watch.user_hash
                    and audit.agent_id in ("", m.agent_id)
                    and audit.erasure_id not in watch.known
                ):
                    raise Aborted("the user was erased while this write was in flight", reason="USER_ERASED")

    async def get(self, tenant_id: str, memory_id: str) -> Memory | None:
        stored = self._t.memories.get((tenant_id, memory_id))
        return stored.memory if stored else None

    async def get_many(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, Memory]:
        found = (self._t.memories.get((tenant_id, i)) for i in memory_ids)
        return {s.memory.memory_id: s.memory for s in found if s is not None}

    async def vectors_of(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, Vector]:
        found = (self._t.memories.get((tenant_id, i)) for i in memory_ids)
        return {s.memory.memory_id: s.vector for s in found if s is not None and s.vector is not None}

    async def page(
        self,
        scope: Scope,
        where: MemoryFilter,
        now: datetime,
        after: tuple[datetime, str] | None,
        limit: int,
        batch: ReadBatch | None = None,
    ) -> list[Memory]:
        passing = [m for m in self._in(scope) if passes(m, scope, where, now)]
        passing.sort(key=lambda m: (m.created_at, m.memory_id), reverse=True)
        return [m for m in passing if after is None or (m.created_at, m.memory_id) < after][:limit]

    async def among(
        self,
        scope: Scope,
        memory_ids: Sequence[str],
        where: MemoryFilter,
        now: datetime,
        batch: ReadBatch | None = None,
    ) -> dict[str, Memory]:
        wanted = set(memory_ids)
        found = (m for m in self._in(scope) if m.memory_id in wanted)
        return {m.memory_id: m for m in found if passes(m, scope, where, now)}

    async def same_text(self, scope: Scope, text_keys: Sequence[str]) -> list[Memory]:
        keys = set(text_keys)
        return self._live(scope, lambda m: text_key(m.text) in keys)

    async def same_frame(self, scope: Scope, frame_keys: Sequence[str]) -> list[Memory]:
        keys = set(frame_keys)
        return self._live(scope, lambda m: frame_key(m.kind.value, m.text, m.entities) in keys)

    async def pending(
        self, tenant_id: str, episode_id: str, batch: ReadBatch | None = None
    ) -> list[tuple[Memory, Vector | None]]:
        held = [
            s
            for (tenant, _), s in self._t.memories.items()
            if tenant == tenant_id
            and s.memory.state is MemoryState.PENDING
            and s.memory.episode_id == episode_id
        ]
        held.sort(key=lambda s: (s.memory.created_at, s.memory.memory_id))
        return [(s.memory, s.vector) for s in held]

    async def touch(self, tenant_id: str, memory_ids: Sequence[str], at: datetime) -> None:
        for memory_id in memory_ids:
            stored = self._t.memories.get((tenant_id, memory_id))
            if stored is not None:
                stored.memory = dataclasses.replace(stored.memory, last_recalled_at=at)

    async def scope_vectors(self, scope: Scope) -> tuple[list[str], list[Vector]]:
        """The `ScopeVectorSource` port over the promoted memories of this store's model."""
        return self._indexed(scope, None)

    async def item_vectors(self, scope: Scope, items: Sequence[str]) -> tuple[list[str], list[Vector]]:
        return self._indexed(scope, set(items))

    def _indexed(self, scope: Scope, ids: set[str] | None) -> tuple[list[str], list[Vector]]:
        found = [
            (s.memory.memory_id, s.vector)
            for _, s in sorted(self._t.memories.items())
            if s.memory.scope == scope
            and s.model == self._model
            and s.vector is not None
            and s.memory.state is MemoryState.PROMOTED
            and (ids is None or s.memory.memory_id in ids)
        ]
        return [k for k, _ in found], [v for _, v in found]

    async def stale(self, model: str, limit: int) -> list[Memory]:
        found = [
            s.memory for _, s in sorted(self._t.memories.items()) if s.model != model or s.vector is None
        ]
        return found[:limit]

    async def expired(self, now: datetime, limit: int) -> list[Memory]:
        memories = [s.memory for s in self._t.memories.values()]
        past = sorted((m for m in memories if m.expires_at is not None and m.expires_at <= now), key=_expiry)
        found = {(m.tenant_id, m.memory_id): m for m in past[:limit]}
        for (tenant_id, agent_id), agent in sorted(self._t.agents.items()):
            days = agent.memory.retention_days
            if days <= 0 or len(found) >= limit:
                continue
            cut = now - timedelta(days=days)
            unused = [
                m for m in memories if (m.tenant_id, m.agent_id) == (tenant_id, agent_id) and _unused(m, cut)
            ]
            for m in sorted(unused, key=lambda m: (m.updated_at, m.memory_id))[:limit]:
                found.setdefault((m.tenant_id, m.memory_id), m)
        return list(found.values())[:limit]

    def _in(self, scope: Scope) -> list[Memory]:
        return [s.memory for s in self._t.memories.values() if s.memory.scope == scope]

    def _live(self, scope: Scope, match: Callable[[Memory], bool]) -> list[Memory]:
        now = self._clock()
        live = [
            m
            for m in self._in(scope)
            if m.state is MemoryState.PROMOTED and not m.superseded_by and not expired(m, now) and match(m)
        ]
        return sorted(live, key=lambda m: (m.created_at, m.memory_id))

    def _stored(self, m: Memory, vector: Vector | None) -> StoredMemory:
        if vector is None:
            return StoredMemory(m)
        return StoredMemory(m, self._model, [float(x) for x in vector])


def _expiry(m: Memory) -> tuple[datetime, str]:
    assert m.expires_at is not None
    return m.expires_at, m.memory_id


def _unused(m: Memory, cut: datetime) -> bool:
    return m.updated_at < cut and (m.last_recalled_at is None or m.last_recalled_at < cut)


# --- agent knowledge ------------------------------------------------------------------------


class FakeKnowledgeStore:
    """The `KnowledgeStore` port, and `ScopeVectorSource` over the chunks' vectors of
    `embedding_model` (as SqlKnowledgeVectors). A create is checked whole before any of it
    applies.

    Holds to everything the contract suite asks (tests/contracts/test_knowledge_store.py)."""

    def __init__(self, tables: Tables, embedding_model: str = "fake-words-64") -> None:
        self._t = tables
        self._model = embedding_model

    async def create(
        self, writes: Sequence[DocumentWrite], declared: Declared[list[tuple[Document, bool]]]
    ) -> Recorded[list[tuple[Document, bool]]]:
        held = dict(self._t.documents)
        outcomes: list[tuple[Document, bool]] = []
        new: list[DocumentWrite] = []
        for w in writes:
            d = w.document
            stored = held.get(_document_key(d))
            if stored is None:
                held[_document_key(d)] = d
                outcomes.append((d, True))
                new.append(w)
            elif stored.content_hash == d.content_hash:
                outcomes.append((stored, False))
            else:
                raise AlreadyExists(
                    f"document {d.document_id!r} already exists with other content", reason="DOCUMENT_EXISTS"
                )
        for w in new:
            self._store(w)
        return recorded(outcomes, declared)

    async def replace(self, write: DocumentWrite, declared: Declared[Document]) -> Recorded[Document]:
        d = write.document
        stored = self._t.documents.get(_document_key(d))
        if stored is None:
            raise NotFound("document", d.document_id)
        kept = dataclasses.replace(d, created_at=stored.created_at)
        self._store(dataclasses.replace(write, document=kept))
        return recorded(kept, declared)

    async def delete(
        self, tenant_id: str, agent_id: str, document_id: str, declared: Declared[Document]
    ) -> Recorded[Document]:
        key = (tenant_id, agent_id, document_id)
        stored = self._t.documents.pop(key, None)
        if stored is None:
            raise NotFound("document", document_id)
        self._t.chunks.pop(key, None)
        return recorded(stored, declared)

    async def get(self, tenant_id: str, agent_id: str, document_id: str, now: datetime) -> Document:
        found = self._t.documents.get((tenant_id, agent_id, document_id))
        if found is None or document_expired(found, now):
            raise NotFound("document", document_id)
        return found

    async def page(
        self,
        tenant_id: str,
        agent_id: str,
        where: KnowledgeFilter,
        now: datetime,
        after: str | None,
        limit: int,
    ) -> list[Document]:
        passing = self._passing(tenant_id, agent_id, where, now)
        return [d for d in passing if after is None or d.document_id > after][:limit]

    async def chunks(
        self, tenant_id: str, agent_id: str, keys: Sequence[str], where: KnowledgeFilter, now: datetime
    ) -> dict[str, tuple[Document, DocumentChunk]]:
        found: dict[str, tuple[Document, DocumentChunk]] = {}
        for key in keys:
            try:
                document_id, index = split_chunk_key(key)
            except ValueError:
                continue
            d = self._t.documents.get((tenant_id, agent_id, document_id))
            if d is None or not document_passes(d, where, now):
                continue
            for stored in self._t.chunks.get(_document_key(d), []):
                if stored.chunk.index == index:
                    found.setdefault(stored.chunk.key, (dataclasses.replace(d, text=""), stored.chunk))
        return found

    async def texts(
        self, tenant_id: str, agent_id: str, document_ids: Sequence[str] | None = None
    ) -> list[tuple[str, str]]:
        wanted = None if document_ids is None else set(document_ids)
        found = []
        for (tenant, agent, document_id), stored in sorted(self._t.chunks.items()):
            if (tenant, agent) != (tenant_id, agent_id) or (wanted is not None and document_id not in wanted):
                continue
            d = self._t.documents[(tenant, agent, document_id)]
            found += [(c.chunk.key, embedded_text(d, c.chunk)) for c in stored]
        return sorted(found, key=lambda pair: split_chunk_key(pair[0]))

    async def chunk_page(
        self, tenant_id: str, agent_id: str, after: tuple[str, int] | None, limit: int
    ) -> list[tuple[Document, DocumentChunk]]:
        found = []
        for (tenant, agent, document_id), stored in sorted(self._t.chunks.items()):
            if (tenant, agent) != (tenant_id, agent_id):
                continue
            d = dataclasses.replace(self._t.documents[(tenant, agent, document_id)], text="")
            found += [(d, c.chunk) for c in stored if after is None or (document_id, c.chunk.index) > after]
        found.sort(key=lambda row: (row[1].document_id, row[1].index))
        return found[:limit]

    async def newest(
        self, tenant_id: str, agent_id: str, where: KnowledgeFilter, now: datetime, limit: int
    ) -> list[tuple[Document, DocumentChunk]]:
        documents = self._passing(tenant_id, agent_id, where, now)
        documents.sort(key=lambda d: d.updated_at, reverse=True)  # stable: ties by document_id
        found = [
            (dataclasses.replace(d, text=""), c.chunk)
            for d in documents
            for c in self._t.chunks.get(_document_key(d), [])
        ]
        return found[:limit]

    async def expired(self, now: datetime, limit: int) -> list[Document]:
        past = [d for d in self._t.documents.values() if document_expired(d, now)]
        past.sort(key=lambda d: (d.expires_at or now, *_document_key(d)))
        return past[:limit]

    async def counts(self) -> tuple[int, int]:
        return len(self._t.documents), sum(len(c) for c in self._t.chunks.values())

    async def vector_keys(self, tenant_id: str, model: str, agent_id: str = "") -> list[tuple[Scope, str]]:
        return [
            (knowledge_scope(tenant, agent), c.chunk.key)
            for (tenant, agent, _), stored in sorted(self._t.chunks.items())
            if tenant == tenant_id and (not agent_id or agent == agent_id)
            for c in stored
            if c.model == model and c.vector is not None
        ]

    async def scope_vectors(self, scope: Scope) -> tuple[list[str], list[Vector]]:
        return self._indexed(scope, None)

    async def item_vectors(self, scope: Scope, items: Sequence[str]) -> tuple[list[str], list[Vector]]:
        return self._indexed(scope, set(items))

    def _indexed(self, scope: Scope, ids: set[str] | None) -> tuple[list[str], list[Vector]]:
        found = [
            (c.chunk.key, c.vector)
            for (tenant, agent, document_id), stored in sorted(self._t.chunks.items())
            if knowledge_scope(tenant, agent) == scope and (ids is None or document_id in ids)
            for c in stored
            if c.model == self._model and c.vector is not None
        ]
        return [k for k, _ in found], [v for _, v in found]

    def _passing(
        self, tenant_id: str, agent_id: str, where: KnowledgeFilter, now: datetime
    ) -> list[Document]:
        return [
            d
            for key, d in sorted(self._t.documents.items())
            if key[:2] == (tenant_id, agent_id) and document_passes(d, where, now)
        ]

    def _store(self, write: DocumentWrite) -> None:
        d = write.document
        vectors = write.vectors if write.vectors is not None else [None] * len(write.chunks)
        self._t.documents[_document_key(d)] = d
        self._t.chunks[_document_key(d)] = [
            StoredChunk(c, write.model, [float(x) for x in v]) if v is not None else StoredChunk(c)
            for c, v in zip(write.chunks, vectors, strict=True)
        ]


def _document_key(d: Document) -> DocumentKey:
    return d.tenant_id, d.agent_id, d.document_id


class FakeSessionDataStore:
    """The `SessionDataStore` port: expired data reads as the empty version 0; `change`
    runs before anything is stored; a first write for a missing episode is NotFound."""

    def __init__(self, tables: Tables, clock: Callable[[], datetime] = _system_clock) -> None:
        self._t = tables
        self._clock = clock

    async def get(self, tenant_id: str, episode_id: str, batch: ReadBatch | None = None) -> SessionData:
        return self._current(tenant_id, episode_id)

    async def update(
        self, tenant_id: str, episode_id: str, change: Callable[[SessionData], SessionData]
    ) -> SessionData:
        key = (tenant_id, episode_id)
        if key not in self._t.session_data and key not in self._t.episodes:
            raise NotFound("episode", episode_id)
        changed = change(self._current(tenant_id, episode_id))
        stored = dataclasses.replace(
            changed,
            tenant_id=tenant_id,
            episode_id=episode_id,
            updated_at=changed.updated_at or self._clock(),
        )
        self._t.session_data[key] = stored
        return changed

    def _current(self, tenant_id: str, episode_id: str) -> SessionData:
        stored = self._t.session_data.get((tenant_id, episode_id))
        if stored is None or (stored.expires_at is not None and stored.expires_at <= self._clock()):
            return SessionData(tenant_id, episode_id)
        return stored


class FakeLeadership:
    """Leadership decided by the test: `leading` lists the jobs this replica leads (None:
    every job, as on SQLite). Each question is recorded."""

    def __init__(self, leading: set[str] | None = None) -> None:
        self.leading = leading
        self.asked: list[str] = []

    async def holds(self, job: str) -> bool:
        self.asked.append(job)
        return self.leading is None or job in self.leading


class FakeDraftStore:
    """The `DraftStore` port: pushes planned by the domain's `plan_push`; drafts kept in
    `Tables.drafts`, per episode, so they go with it. `reads` counts read_live calls (one
    per reader wake, whatever the number of watchers)."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables
        self.reads = 0

    @property
    def drafts(self) -> dict[EpisodeKey, dict[str, StoredDraft]]:
        """The drafts table: they go with their episode (an erasure, a purge), as in SQL."""
        return self._t.drafts

    async def push(
        self, tenant_id: str, episode_id: str, push: Push, now: datetime, limits: DraftLimits
    ) -> Pushed:
        episode = self._t.visible(tenant_id, episode_id)
        if episode.state is not EpisodeState.OPEN:
            raise episode_closed_error(episode_id)
        done = await self.finalized(tenant_id, episode_id, push.draft_id)
        if done is not None:
            raise finalized_error(push.draft_id, done.seq)
        held = self.drafts.setdefault((tenant_id, episode_id), {})
        rows = [DraftRow(d, len(h.text), len(h.text.encode()), h.updated_at) for d, h in held.items()]
        current = held.get(push.draft_id)
        stored = current.text[push.offset : push.offset + len(push.text)] if current else ""
        plan = plan_push(rows, push, stored, now, limits)
        if plan.replaces is not None:
            del held[plan.replaces]
        if plan.writes:
            held[push.draft_id] = StoredDraft((current.text if current else "") + plan.tail, now)
        return Pushed(plan.length, plan.writes)

    async def text_of(self, tenant_id: str, episode_id: str, draft_id: str) -> str | None:
        held = self.drafts.get((tenant_id, episode_id), {}).get(draft_id)
        return None if held is None else held.text

    async def finalized(self, tenant_id: str, episode_id: str, draft_id: str) -> Message | None:
        log = self._t.messages.get((tenant_id, episode_id), [])
        return next((m for m in log if m.client_message_id == draft_id), None)

    async def remove(self, tenant_id: str, episode_id: str, draft_id: str) -> None:
        self.drafts.get((tenant_id, episode_id), {}).pop(draft_id, None)

    async def discard_all(self, tenant_id: str, episode_id: str) -> None:
        self.drafts.pop((tenant_id, episode_id), None)

    async def read_live(
        self, tenant_id: str, episode_id: str, after_seq: int, known: dict[str, int], limit: int
    ) -> LiveRead:
        self.reads += 1
        key = (tenant_id, episode_id)
        episode = self._t.visible(tenant_id, episode_id)
        digest = self._t.digests.get(key)
        episode = episode if digest is None else dataclasses.replace(episode, digest=digest)
        drafts: dict[str, DraftChange] = {}
        if episode.state is EpisodeState.OPEN:
            drafts = {d: _draft_change(h.text, known.get(d)) for d, h in self.drafts.get(key, {}).items()}
        newer = [m for m in self._t.messages.get(key, []) if m.seq > after_seq]
        return LiveRead(episode, drafts, newer[:limit], complete=len(newer) <= limit)

    async def messages_after(
        self, tenant_id: str, episode_id: str, after_seq: int, through_seq: int, limit: int
    ) -> list[Message]:
        log = self._t.messages.get((tenant_id, episode_id), [])
        return [m for m in log if after_seq < m.seq <= through_seq][:limit]


def _draft_change(text: str, known: int | None) -> DraftChange:
    if known == len(text):
        return DraftChange(len(text))
    start = known if known is not None and known < len(text) else 0
    return DraftChange(len(text), start, text[start:])


class FakeErasureRecords:
    """The `ErasureRecords` port over the tables: the audit rows the fake eraser appends, and
    the users of episodes and memories. A cursor is the last user id handed out."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    @classmethod
    def beside(cls, eraser: FakeEraser) -> FakeErasureRecords:
        """Over the tables of `eraser` (the SQL eraser is its own `ErasureRecords`)."""
        return cls(eraser._t)

    def _keys(self) -> set[tuple[str, str]]:
        return {(tenant, audit.erasure_id) for tenant, audit, _ in self._t.erasures}

    async def recorded(self, keys: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        return set(keys) & self._keys()

    async def audits(self, after: tuple[str, str] | None, limit: int) -> list[LedgerEntry]:
        rows = sorted({(t, a.erasure_id): LedgerEntry.of(t, a) for t, a, _ in self._t.erasures}.items())
        return [entry for key, entry in rows if after is None or key > after][:limit]

    async def user_page(self, tenant_id: str, cursor: str, limit: int) -> tuple[list[str], str]:
        users = {e.user_id for (t, _), e in self._t.episodes.items() if t == tenant_id}
        users |= {s.memory.user_id for (t, _), s in self._t.memories.items() if t == tenant_id}
        page = sorted(u for u in users if u > cursor)[:limit]
        return page, page[-1] if len(page) == limit else ""

    async def record(self, tenant_id: str, audit: Audit) -> bool:
        if (tenant_id, audit.erasure_id) in self._keys():
            return False
        self._t.erasures.append((tenant_id, audit, dict.fromkeys(ERASURE_KINDS, 0)))
        return True


class FakeErasureLedger:
    """The `ErasureLedger` port in memory; `broken` makes every append fail as a full or
    unwritable disk does (Unavailable, nothing kept)."""

    def __init__(self, *entries: LedgerEntry, broken: bool = False) -> None:
        self.entries: list[LedgerEntry] = list(entries)
        self.broken = broken
        self.unreadable = 0
        self.where = "memory"

    async def append(self, entries: Sequence[LedgerEntry]) -> None:
        if self.broken:
            raise Unavailable("the erasure ledger cannot be written", reason="ERASURE_LEDGER_UNAVAILABLE")
        self.entries.extend(entries)

    async def batches(self, size: int) -> AsyncIterator[list[LedgerEntry]]:
        for start in range(0, len(self.entries), size):
            yield self.entries[start : start + size]


async def _committed() -> None:
    """A fake write's commit: done when written (the fakes hold no transactions)."""
