"""Ports the domain needs from the outside world. Adapters live in store/ and tokens/;
fakes for tests live in tests/fakes.py; tests/contracts/ holds each store port to one
behaviour on the fake, SQLite and PostgreSQL.

Sweeps take no tenant and serve the whole cluster (one leader runs them, see Leadership):
`idle_episodes`, `claim_due`, the `stale` and `count_stale` methods, `soft_delete_due`,
`purge_due` and `MemoryStore.expired`. Each judges a tenant's rows by that tenant's own
agents and caps, and never takes a row of one tenant for another's of the same ids."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

from episodic.domain.changes import Change, Committed, Declared, Recorded
from episodic.domain.context import ModelCall, ModelReply, Summary
from episodic.domain.drafts import DraftLimits, Push, Pushed
from episodic.domain.episodes import OpenRequest
from episodic.domain.erasure import Audit, Erased
from episodic.domain.erasure_ledger import LedgerEntry
from episodic.domain.inspection import UserSummary
from episodic.domain.knowledge import Document, DocumentChunk, KnowledgeFilter
from episodic.domain.log import PreparedMessage
from episodic.domain.memories import ExtractedMemory, Memory, MemoryKind, MemoryState, SessionData
from episodic.domain.model import Agent, CloseReason, Episode, EpisodeState, Message
from episodic.domain.recall import Digest, DigestText, Hit, Scope, Vector
from episodic.domain.retention import SoftDeleted
from episodic.domain.transfer import EpisodeImported, EpisodeRows, ErasureWatch
from episodic.domain.watch import LiveRead

if TYPE_CHECKING:  # the working set module imports this one
    from episodic.domain.working_set import WorkingSet

T = TypeVar("T")
Clock = Callable[[], datetime]
IdFactory = Callable[[], str]


@dataclass(frozen=True, slots=True)
class EpisodeFilter:
    """`agent_ids`, when given, restricts to those agents (a key's allowed set)."""

    agent_id: str = ""
    user_id: str = ""
    state: EpisodeState | None = None
    agent_ids: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class EpisodeCursor:
    """Keyset position in the newest-first episode listing."""

    started_at: datetime
    episode_id: str


class WriteQuota(Protocol):
    """A tenant's share of costly writes (state/shares.py); raises OverShare when spent."""

    def write_memories(self, tenant_id: str, count: int) -> None: ...

    def write_chunks(self, tenant_id: str, count: int) -> None: ...


class ImportMeter(Protocol):
    """One import's bytes against its tenant's share (state/shares.py)."""

    async def received(self, size: int) -> None:
        """`size` more bytes arrived and are held: waits for the tenant's import rate (at
        most a second), or raises OverShare (over its rate, or holding too much at once)."""
        ...

    def written(self) -> None:
        """What was held is written and let go."""
        ...


class ImportQuota(Protocol):
    def importing(self, tenant_id: str) -> AbstractAsyncContextManager[ImportMeter]:
        """A meter for one import; all it holds is let go when the block ends."""
        ...


class Embedder(Protocol):
    """Turns texts into unit-length vectors. `model_id` and `dimension` are recorded with
    every stored vector, so a change of model is detected."""

    @property
    def model_id(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class TenantEmbeddings(Protocol):
    """The server's embedding threads, taken in turn by tenants (state/embed_turns.py): each
    tenant's jobs wait in a line of their own and a free thread takes the next from the
    tenant served least recently, so one tenant's embeddings never sit in front of a quiet
    tenant's. `query`: texts a call waits for (a turn's query); `bulk`: memories, digests,
    earlier messages, documents' chunks, in a lane of their own (never in front of a query),
    a chunk at a time."""

    async def query(self, tenant_id: str, texts: Sequence[str]) -> list[Vector]: ...

    async def bulk(self, tenant_id: str, texts: Sequence[str]) -> list[Vector]: ...


def embeds_inline(embedder: Embedder, text: str) -> bool:
    """Whether embedding `text` costs less on the calling thread than a hop to another
    (~0.3 ms). An embedder says so with an `inline_chars` attribute (texts up to that many
    characters); a model has none: it is never run on the event loop."""
    chars = getattr(embedder, "inline_chars", 0)
    return isinstance(chars, int) and len(text) <= chars


class MemoryExtractor(Protocol):
    """Finds discrete memories in a closed episode's transcript, each with the seqs that
    state it. `instructions`, when given, replace an LLM extractor's default prompt (the
    agent's memory_extraction_prompt); a deterministic extractor ignores them."""

    @property
    def name(self) -> str: ...

    def extract(self, transcript: Sequence[Message], instructions: str = "") -> list[ExtractedMemory]: ...


class Summarizer(Protocol):
    """Summarizes one episode's transcript into a summary and short key facts."""

    def summarize(self, transcript: Sequence[Message]) -> DigestText: ...


class VectorIndex(Protocol):
    """Nearest-neighbour search, partitioned by scope by construction: a search can only
    ever see the vectors of the scope it names. Scores are cosine similarities."""

    def add(self, scope: Scope, keys: Sequence[str], vectors: Sequence[Sequence[float]]) -> None: ...

    def remove(self, scope: Scope, keys: Sequence[str]) -> None: ...

    def search(self, scope: Scope, vector: Sequence[float], k: int) -> list[Hit]: ...

    def keys(self, scope: Scope) -> set[str]: ...

    def count(self, scope: Scope) -> int: ...

    def scopes(self) -> list[Scope]: ...


class ScopeVectorSource(Protocol):
    """SQL's vectors of one index (digests' or memories'), of the current embedding model:
    what a scope's cache is loaded and refreshed from."""

    async def scope_vectors(self, scope: Scope) -> tuple[list[str], list[Vector]]:
        """(keys, vectors) of the whole scope."""
        ...

    async def item_vectors(self, scope: Scope, items: Sequence[str]) -> tuple[list[str], list[Vector]]:
        """(keys, vectors) of some episodes (digests: every chunk) or memories of the scope."""
        ...


@runtime_checkable
class ScopeVectorPages(Protocol):
    """A `ScopeVectorSource` that also reads a scope a page at a time: how a scope too large
    for its cache is searched without being held (state/index_cache.py)."""

    async def scope_vector_page(self, scope: Scope, after: str, limit: int) -> tuple[list[str], list[Vector]]:
        """At most `limit` (keys, vectors) of the scope, in the source's one order of keys,
        those after the key `after` ("" for the first page). A page shorter than `limit` is
        the last."""
        ...

    async def scope_vectors_upto(self, scope: Scope, limit: int) -> tuple[list[str], list[Vector]]:
        """At most `limit` (keys, vectors) of the scope, in no particular order: the whole
        scope when it holds fewer (how a load finds a scope too large reading no more than fits)."""
        ...


class WordIndex(Protocol):
    """One agent's chunks by their words (index/words.py): BM25 over an inverted index in
    RAM. Thread-safe: searched off the event loop while the change owner writes."""

    def __len__(self) -> int: ...

    @property
    def held_bytes(self) -> int: ...

    def add(self, chunks: Iterable[tuple[str, str]]) -> None:
        """(chunk key, text) each; a key held already is replaced."""
        ...

    def remove_documents(self, document_ids: Iterable[str]) -> None: ...

    def search(self, query: str, k: int) -> list[Hit]:
        """The k best chunks holding the query's words, best first (Hit.episode_id holds
        the chunk key)."""
        ...


class KnowledgeWords(Protocol):
    """Each agent's chunks by their words, loaded from SQL on first use and kept in step by
    the change owner's changes (state/knowledge_words.py)."""

    async def search(self, tenant_id: str, agent_id: str, query: str, limit: int) -> list[Hit]:
        """Chunks holding the query's words, best first by BM25 (Hit.episode_id holds the
        chunk key); expired documents' chunks too (the caller filters)."""
        ...


class ScopeIndex(Protocol):
    """A `VectorIndex` whose scopes are loaded from SQL on first use (state/index_cache.py)."""

    async def ensure(self, scope: Scope) -> None:
        """Makes the scope searchable; call before `search`."""
        ...

    def search(self, scope: Scope, vector: Sequence[float], k: int) -> list[Hit]: ...

    async def nearest(self, scope: Scope, vector: Sequence[float], k: int) -> list[Hit]:
        """`ensure` + `search` off the event loop."""
        ...

    def keys(self, scope: Scope) -> set[str]: ...

    def holds_nothing(self, scope: Scope) -> bool:
        """True when the scope is known to hold no vectors (loaded and empty): a search there
        finds nothing, so its query need not be embedded. Never loads."""
        ...

    def resident(self) -> list[Scope]:
        """The scopes held now."""
        ...

    def too_large(self, scope: Scope) -> bool:
        """True while the scope is known to be larger than its cache: never held, each search
        reads its vectors from SQL (so they are SQL's, whatever the index holds)."""
        ...


@dataclass(frozen=True, slots=True)
class FeedEntry:
    """One row of the change feed: `change` None means this release cannot read it
    (`refused` says why)."""

    seq: int
    origin: str
    change: Change | None
    refused: str = ""


@dataclass(frozen=True, slots=True)
class FeedPage:
    pruned_through: int  # every row up to here is gone
    entries: list[FeedEntry]


class ChangeLog(Protocol):
    """The change feed as the tail and the pruner read it."""

    origin: str  # this process: what it wrote, it has applied already

    async def head(self) -> int: ...

    async def after(self, seq: int, limit: int) -> FeedPage: ...

    async def prune(self, through: int) -> int: ...


class ChangeFeed(Protocol):
    """Where committed changes go for the other replicas (store/feed.py). The writer inserts
    a declared write's rows in the write's own transaction (`Declared`), tagged with `origin`;
    once such a write committed, `published` wakes the other replicas."""

    origin: str  # this process

    def published(self) -> None: ...


class TokenCounter(Protocol):
    """Counts tokens with a named tiktoken-compatible encoding; never downloads anything."""

    def supported_encodings(self) -> frozenset[str]: ...

    def encoding_for_model(self, model: str) -> str: ...

    def known_model_encoding(self, model: str) -> str | None: ...

    def count(self, text: str, encoding: str) -> int: ...

    def prefix(self, text: str, tokens: int, encoding: str) -> str:
        """The longest start of `text` that is the text of its first `tokens` tokens or fewer:
        it ends on a token boundary (and on a whole character), never inside a token."""
        ...


class ReadsTogether(Protocol):
    """Lets one request's concurrent reads share one trip to the database."""

    def together(self) -> AbstractContextManager[None]:
        """Reads submitted together inside the block run on one connection (each in its own
        transaction), never with another request's."""
        ...


class AgentStore(Protocol):
    async def create_agent(self, agent: Agent) -> Agent: ...

    async def get_agent(self, tenant_id: str, agent_id: str) -> Agent: ...

    async def update_agent(
        self, tenant_id: str, agent_id: str, change: Callable[[Agent], Agent], declared: Declared[Agent]
    ) -> Recorded[Agent]: ...

    async def list_agents(
        self, tenant_id: str, after: str | None, limit: int, only: frozenset[str] | None = None
    ) -> list[Agent]:
        """`only`, when given, restricts the listing to those agent ids."""
        ...


class EpisodeStore(Protocol):
    async def open_episode(
        self, tenant_id: str, request: OpenRequest, token_encoding: str
    ) -> tuple[Episode, bool]: ...

    async def append(
        self, tenant_id: str, episode_id: str, batch: Sequence[PreparedMessage]
    ) -> list[tuple[Message, bool]]: ...

    async def append_turn(
        self, tenant_id: str, episode_id: str, message: PreparedMessage, with_pending: bool
    ) -> tuple[Message, bool, list[Memory]]:
        """A BuildContext turn's user message: (stored, replayed, the episode's PENDING
        memories oldest first as of the append's transaction; [] unless `with_pending`)."""
        ...

    async def close_episode(
        self,
        tenant_id: str,
        episode_id: str,
        reason: CloseReason,
        note: str,
        ended_at: datetime,
        declared: Declared[Episode],
    ) -> Recorded[Episode]: ...

    async def retract_message(
        self, tenant_id: str, episode_id: str, seq: int, declared: Declared[Message]
    ) -> Recorded[Message]:
        """`episodes.retract` under the episode's lock, with the latest summary's span end and
        the unretracted results of the message's tool calls."""
        ...

    async def get_episode(self, tenant_id: str, episode_id: str) -> Episode: ...

    async def list_episodes(
        self, tenant_id: str, where: EpisodeFilter, after: EpisodeCursor | None, limit: int
    ) -> list[Episode]: ...

    async def list_messages(
        self, tenant_id: str, episode_id: str, before_seq: int | None, limit: int
    ) -> list[Message]: ...

    async def idle_episodes(self, now: datetime, limit: int) -> list[Episode]: ...


class UserDirectory(Protocol):
    """The users an agent has episodes with (the inspector's navigation)."""

    async def list_users(
        self, tenant_id: str, agent_id: str, after_user_id: str | None, limit: int
    ) -> list[UserSummary]:
        """By user id; episodes soft-deleted by retention or erasure are not counted."""
        ...


class DigestReads(Protocol):
    """What recall reads of digests."""

    async def recent(
        self, scope: Scope, limit: int, after: datetime | None, before: datetime | None
    ) -> list[Digest]: ...

    async def ready_among(
        self, scope: Scope, episode_ids: Sequence[str], after: datetime | None, before: datetime | None
    ) -> dict[str, Digest]: ...

    async def pending_count(self, scope: Scope) -> int: ...

    async def lexical(self, scope: Scope, query: str, limit: int) -> list[Hit]: ...


class DigestStore(DigestReads, Protocol):
    """The digester's work queue, the stored vectors, and the reads recall needs."""

    async def claim_due(self, now: datetime, limit: int, lease: timedelta) -> list[Digest]: ...

    async def stale(self, model: str, limit: int) -> list[Digest]: ...

    async def count_stale(self, model: str) -> int: ...

    async def transcript(self, digest: Digest) -> list[Message]: ...

    async def save_ready(
        self, digest: Digest, vectors: Sequence[Vector], body: str, declared: Declared[bool]
    ) -> Recorded[bool]:
        """Stores a made digest with its vectors and full text; False (nothing written) when
        its row is gone: the episode was erased or deleted while it was being made."""
        ...

    async def save_failed(self, digest: Digest, declared: Declared[bool]) -> Recorded[bool]:
        """Records a failed attempt; False (nothing written) when its row is gone (erased)."""
        ...

    async def get(self, tenant_id: str, episode_id: str) -> Digest | None: ...


@dataclass(frozen=True, slots=True)
class ContextSources:
    """What one read brings for a working set: the episode and its agent, a summary newer
    than the one already known (if any), and the messages after the known seq, oldest
    first. `complete` False: there were more than an allowance of them, and only the
    newest that pass it were read (see reducers.least_tokens); older ones stay in SQL."""

    episode: Episode
    agent: Agent
    summary: Summary | None
    messages: list[Message]
    complete: bool = True
    # a cold read's spoken messages before the tail (the newest MAX_MESSAGES), oldest first
    earlier: list[Message] = field(default_factory=list)


class SpokenMessages(Protocol):
    async def spoken(
        self, tenant_id: str, episode_ids: Sequence[str], per_episode: int
    ) -> dict[str, list[Message]]:
        """The first `per_episode` user and assistant messages of each of these (visible)
        episodes, oldest first: what recall's passages and excerpts are chosen from. Only
        episode id, seq, role, content and time are filled in."""
        ...


class ContextStore(SpokenMessages, Protocol):
    async def sources(
        self, tenant_id: str, episode_id: str, known_summary_to: int, after_seq: int | None, allowance: int
    ) -> ContextSources: ...

    async def save_call(self, call: ModelCall, summary: Summary | None) -> tuple[ModelCall, bool]: ...

    async def save_summary(self, summary: Summary) -> None: ...

    async def call_for_request(
        self, tenant_id: str, episode_id: str, request_id: str
    ) -> ModelCall | None: ...

    async def get_call(self, tenant_id: str, model_call_id: str) -> ModelCall: ...

    async def list_calls(
        self, tenant_id: str, episode_id: str, before: tuple[datetime, str] | None, limit: int
    ) -> list[ModelCall]: ...

    async def record_reply(self, tenant_id: str, model_call_id: str, reply: ModelReply) -> ModelCall: ...


class ChangeOwner(Protocol):
    """The one owner of what recall and BuildContext can see (the vector indexes and every
    cache derived from SQL): every write that changes it commits through here, and what
    other replicas committed arrives here from the change feed."""

    async def commit(
        self,
        write: Callable[[Declared[T]], Awaitable[Recorded[T]]],
        changes: Callable[[T], Iterable[Change]],
        *,
        exclusive: bool = True,
    ) -> Committed[T]:
        """Runs a unit of work: `write` is handed the declared `changes` and passes them with
        its SQL operation to the writer, which records them in the change feed in the
        operation's own transaction; then they are applied here. `exclusive`: atomically with
        respect to every other index writer (writes that touch an index)."""
        ...

    async def apply_foreign(self, changes: Sequence[Change]) -> None:
        """Changes other replicas committed, in feed order."""
        ...

    def resync(self) -> None:
        """Everything held may be stale: reload on next use."""
        ...


class UserTransfer(Protocol):
    """ExportUser / ImportUser's storage (domain/transfer.py is the format): one user's rows
    as export records, read as of one snapshot, and an episode's records written in one
    transaction."""

    def export(
        self, tenant_id: str, user_id: str, agent_ids: Sequence[str] | None
    ) -> AsyncIterator[tuple[str, dict[str, object]]]:
        """(record type, record): each episode and what it owns, then the memories."""
        ...

    async def erasures_of(self, tenant_id: str, user_hash: str) -> frozenset[str]:
        """The ids of the user's erasures committed so far."""
        ...

    def episode_rows(self, part: str, records: Sequence[Mapping[str, object]], user_id: str) -> EpisodeRows:
        """An episode part's records, checked, as the rows to write (under `user_id`)."""
        ...

    def memories(
        self, part: str, records: Sequence[Mapping[str, object]], tenant_id: str, user_id: str
    ) -> list[Memory]: ...

    async def missing_agents(self, tenant_id: str, agent_ids: Iterable[str]) -> list[str]: ...

    async def import_episode(
        self,
        tenant_id: str,
        rows: EpisodeRows,
        now: datetime,
        watch: ErasureWatch,
        declared: Declared[EpisodeImported],
    ) -> Recorded[EpisodeImported]:
        """Writes the episode unless it is held; one held with other content is ALREADY_EXISTS.
        ABORTED (USER_ERASED) if an erasure of the user not in `watch` has committed: checked
        in the write's transaction, ordered with the erasure's."""
        ...


class DigestWaiter(Protocol):
    """The digester as the episode service sees it: nudged after a close, awaited on
    request."""

    def wake(self) -> None: ...

    async def wait_settled(self, tenant_id: str, episode_id: str, timeout: float) -> Digest | None: ...


class Eraser(Protocol):
    """Deletes every row of one user (in one agent, or all), audited; then scrubs the free
    space of what was deleted (`counts`, per receipt kind: all zero needs no scrub)."""

    async def erase(
        self, tenant_id: str, user_id: str, agent_id: str, audit: Audit, declared: Declared[Erased]
    ) -> Recorded[Erased]: ...

    async def scrub(self, counts: Mapping[str, int]) -> bool: ...


class ErasureRecords(Protocol):
    """What the erasure ledger's replay asks the database (the eraser's store, which keeps
    the `erasures` audit table): which erasures it has recorded, which users a tenant has
    rows of, and an audit row recorded alone (for an erasure whose user has nothing left)."""

    async def recorded(self, keys: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """Of these (tenant, erasure id), those the audit table holds."""
        ...

    async def audits(self, after: tuple[str, str] | None, limit: int) -> list[LedgerEntry]:
        """Every audit row as a ledger entry, ordered by (tenant, erasure id), after `after`:
        what the ledger must hold too."""
        ...

    async def user_page(self, tenant_id: str, cursor: str, limit: int) -> tuple[list[str], str]:
        """The user ids the tenant has episodes or memories of, about `limit` at a time from
        `cursor` ("" to begin); the next cursor, "" after the last page. An id may come
        more than once (it has rows under several agents)."""
        ...

    async def record(self, tenant_id: str, audit: Audit) -> bool:
        """Inserts the audit row of an erasure that found nothing to delete; False when the
        row was there already (another replica replayed it first)."""
        ...


class ErasureLedger(Protocol):
    """Every erasure, kept outside the database so that restoring an older backup cannot
    roll it back; append-only."""

    async def append(self, entries: Sequence[LedgerEntry]) -> None:
        """Durable (on disk) when it returns; Unavailable when it cannot be written."""
        ...

    def batches(self, size: int) -> AsyncIterator[list[LedgerEntry]]:
        """Every entry, oldest first, at most `size` at a time. A line that is no entry (torn
        by a crash mid-append: its erasure never went ahead) is skipped and counted in
        `unreadable`."""
        ...

    @property
    def unreadable(self) -> int:
        """Lines skipped by the last full read."""
        ...

    @property
    def where(self) -> str:
        """Where it is kept, for operators ("" when there is none)."""
        ...


class RetentionStore(Protocol):
    async def soft_delete_due(
        self, now: datetime, limit: int, declared: Declared[list[SoftDeleted]]
    ) -> Recorded[list[SoftDeleted]]: ...

    async def purge_due(self, deleted_before: datetime, limit: int) -> int: ...


class StoredVectorKeys(Protocol):
    """(scope, key) of every vector SQL holds, to compare the index with."""

    async def vector_keys(
        self, tenant_id: str, model: str, agent_id: str = ""
    ) -> list[tuple[Scope, str]]: ...


class BackgroundCompactions(Protocol):
    """Summaries made off the request path (an LLM summarizer): a turn schedules one and
    goes on with its reducers and the previous summary."""

    def schedule(self, key: tuple[str, str], working_set: WorkingSet, through: int) -> None: ...


class CompactionListener(Protocol):
    """Told what a new summary of a live episode folded in, so memories can be extracted
    from it while the episode is still open (seed 001's memories awaiting promotion)."""

    def compacted(self, episode: Episode, messages: Sequence[Message]) -> None:
        """Called on the event loop right after the summary is stored, with the messages it
        newly covers (retracted ones left out), oldest first. Must not block: the work runs
        in the background, and a failure there is logged, never raised to the turn."""


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """Which of one scope's memories a listing or search may return. Expired memories are
    never returned; superseded ones only when asked."""

    kinds: frozenset[MemoryKind] = frozenset()
    topics: frozenset[str] = frozenset()  # any of them (exact, as stored)
    entities: frozenset[str] = frozenset()  # any of them (exact, as stored)
    after: datetime | None = None  # created_at (EVENT: event_time) >= after
    before: datetime | None = None  # created_at (EVENT: event_time) < before
    include_superseded: bool = False
    state: MemoryState | None = None
    episode_id: str = ""  # held by (PENDING) or extracted from this episode


@dataclass(frozen=True, slots=True)
class MemoryWrite:
    """One transaction of memory changes, planned by the use case: rows to insert (with
    their vectors), rows to replace whole (merges, promotions, updates, supersessions:
    matched by tenant + memory_id), and ids to delete."""

    insert: Sequence[tuple[Memory, Vector | None]] = ()
    replace: Sequence[tuple[Memory, Vector | None]] = ()  # vector None: keep the stored one
    delete: Sequence[tuple[str, str]] = ()  # (tenant_id, memory_id)
    # (tenant_id, episode_id) this write belongs to (pending memories, a promotion): it applies
    # only if the episode still exists, so an erasure in between leaves no memory behind
    episode: tuple[str, str] | None = None
    # the user's erasures known when the work began (CreateMemories, an import's memories):
    # another one committed since refuses the write, ABORTED (USER_ERASED)
    watch: ErasureWatch | None = None


@dataclass(frozen=True, slots=True)
class DocumentWrite:
    """One document as the store keeps it: the row, its chunks (in order) and each chunk's
    vector of `model` (a write carries every chunk's, or none: None)."""

    document: Document
    chunks: Sequence[DocumentChunk]
    vectors: Sequence[Vector] | None
    model: str


class KnowledgeStore(Protocol):
    """An agent's documents and their chunks: rows, vectors and full text (the FAISS index of
    an agent's knowledge is a cache of the vectors). Every read and write is of one tenant's
    one agent; `expired` is a cluster-wide sweep (see the module docstring)."""

    async def create(
        self, writes: Sequence[DocumentWrite], declared: Declared[list[tuple[Document, bool]]]
    ) -> Recorded[list[tuple[Document, bool]]]:
        """All of them in one transaction, or none. An id already held with the same
        content_hash is a retry: (the stored document, False) and nothing written; with
        another content_hash AlreadyExists, and nothing of the batch is written."""
        ...

    async def replace(self, write: DocumentWrite, declared: Declared[Document]) -> Recorded[Document]:
        """The document's row, chunks, vectors and full text replaced whole (its
        created_at kept); NotFound when it is not held."""
        ...

    async def delete(
        self, tenant_id: str, agent_id: str, document_id: str, declared: Declared[Document]
    ) -> Recorded[Document]:
        """The row with every chunk, vector and full-text row of it; NotFound when not held."""
        ...

    async def get(self, tenant_id: str, agent_id: str, document_id: str, now: datetime) -> Document:
        """NotFound when not held or expired."""
        ...

    async def page(
        self,
        tenant_id: str,
        agent_id: str,
        where: KnowledgeFilter,
        now: datetime,
        after: str | None,
        limit: int,
    ) -> list[Document]:
        """Documents passing `where`, by document_id, those after `after` (exclusive)."""
        ...

    async def chunks(
        self, tenant_id: str, agent_id: str, keys: Sequence[str], where: KnowledgeFilter, now: datetime
    ) -> dict[str, tuple[Document, DocumentChunk]]:
        """The chunks named by key (domain/knowledge.chunk_key) whose document passes `where`,
        each with its document without its text (""); keys not held (or filtered out) are
        left out."""
        ...

    async def texts(
        self, tenant_id: str, agent_id: str, document_ids: Sequence[str] | None = None
    ) -> list[tuple[str, str]]:
        """(chunk key, the text it is matched as: domain/knowledge.embedded_text) of every
        chunk of the agent's documents (of `document_ids` only, when given), expired ones
        too, in key order: what the agent's word index is built from."""
        ...

    async def chunk_page(
        self, tenant_id: str, agent_id: str, after: tuple[str, int] | None, limit: int
    ) -> list[tuple[Document, DocumentChunk]]:
        """At most `limit` of the agent's chunks after (document_id, index) `after`, in that
        order, expired ones too, each with its document without its text (""; one object
        per document in a page): the chunk cache is filled from these."""
        ...

    async def newest(
        self, tenant_id: str, agent_id: str, where: KnowledgeFilter, now: datetime, limit: int
    ) -> list[tuple[Document, DocumentChunk]]:
        """At most `limit` chunks of the most recently updated documents passing `where`,
        newest document first (ties by document_id), each document's chunks in order; each
        with its document without its text ("")."""
        ...

    async def expired(self, now: datetime, limit: int) -> list[Document]:
        """Documents of every tenant past their expires_at, oldest expiry first."""
        ...

    async def counts(self) -> tuple[int, int]:
        """(documents, chunks) held, of every tenant (metrics)."""
        ...

    async def vector_keys(self, tenant_id: str, model: str, agent_id: str = "") -> list[tuple[Scope, str]]:
        """(knowledge scope, chunk key) of every stored chunk vector of `model` in one tenant
        (or one agent of it): what the knowledge index should hold (StoredVectorKeys)."""
        ...


class MemoryStore(Protocol):
    """Long-term memories and their stored vectors (the FAISS index is a cache of them)."""

    async def write(
        self, change: MemoryWrite, declared: Declared[frozenset[str]]
    ) -> Recorded[frozenset[str]]:
        """All of it in one transaction, or none of it; NotFound when `change.episode` is gone;
        the result: the ids of `replace` and `delete` whose row was gone (erased or deleted
        meanwhile: it stays gone, and no change of it reaches the index or the feed);
        ABORTED (USER_ERASED) when the user was erased since `change.watch`. Ordered with an
        erasure of the inserted memories' users: one committing after it is refused."""
        ...

    async def erasure_watch(self, tenant_id: str, user_id: str) -> ErasureWatch:
        """The user's erasures committed so far, for a write's `watch` (taken as its work begins)."""
        ...

    async def get(self, tenant_id: str, memory_id: str) -> Memory | None:
        """Also expired and superseded ones (the caller decides)."""
        ...

    async def get_many(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, Memory]: ...

    async def vectors_of(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, Vector]: ...

    async def page(
        self, scope: Scope, where: MemoryFilter, now: datetime, after: tuple[datetime, str] | None, limit: int
    ) -> list[Memory]:
        """Newest first by (created_at, memory_id); `after` is the last of the previous page."""
        ...

    async def among(
        self, scope: Scope, memory_ids: Sequence[str], where: MemoryFilter, now: datetime
    ) -> dict[str, Memory]:
        """Those of these ids in the scope that pass the filter."""
        ...

    async def same_text(self, scope: Scope, text_keys: Sequence[str]) -> list[Memory]:
        """PROMOTED, not superseded, not expired memories whose text_key is one of these."""
        ...

    async def same_frame(self, scope: Scope, frame_keys: Sequence[str]) -> list[Memory]:
        """PROMOTED, not superseded, not expired memories whose frame_key is one of these."""
        ...

    async def pending(self, tenant_id: str, episode_id: str) -> list[tuple[Memory, Vector | None]]:
        """The PENDING memories an episode holds, oldest first, with their vectors."""
        ...

    async def touch(self, tenant_id: str, memory_ids: Sequence[str], at: datetime) -> None:
        """Records a recall (last_recalled_at) of these memories."""
        ...

    async def stale(self, model: str, limit: int) -> list[Memory]:
        """Memories (any state) whose vector was made with another model or is missing."""
        ...

    async def expired(self, now: datetime, limit: int) -> list[Memory]:
        """Memories past their expiry, or unused (neither updated nor recalled) for longer
        than their agent's retention_days."""
        ...


class SessionDataStore(Protocol):
    async def get(self, tenant_id: str, episode_id: str) -> SessionData:
        """Version 0 when never written."""
        ...

    async def update(
        self, tenant_id: str, episode_id: str, change: Callable[[SessionData], SessionData]
    ) -> SessionData:
        """Reads the row for update, applies `change` (which may raise), writes the result,
        in one transaction."""
        ...


class Signals(Protocol):
    """Wake-ups between replicas (PostgreSQL LISTEN/NOTIFY; in-process on SQLite): a hint
    that something changed, never the change itself, so a lost one costs latency, never
    correctness (whoever listens also polls)."""

    def subscribe(self, channel: str, callback: Callable[[str], None]) -> None:
        """`callback(payload)` runs on the event loop for every notification on `channel`,
        this process's own included."""
        ...

    def notify(self, channel: str, payload: str) -> None:
        """Fire and forget, after the change committed; payload at most 7,000 bytes and
        never user content."""
        ...


class Leadership(Protocol):
    """Who runs a once-per-cluster job (idle reaper, retention, feed pruning): one replica
    at a time, taken over by another when it dies. Decided by the database, never by wall
    clocks, so replicas whose clocks disagree cannot both lead."""

    async def holds(self, job: str) -> bool:
        """True when this replica holds (or has just taken) the cluster-wide lock for `job`;
        False while another replica holds it or the database is out of reach."""
        ...


class DraftStore(Protocol):
    """Assistant replies in progress (drafts: never the log), and the reads that watch an
    episode live. Offsets and lengths count Unicode code points."""

    async def push(
        self, tenant_id: str, episode_id: str, push: Push, now: datetime, limits: DraftLimits
    ) -> Pushed:
        """Plans the push (domain/drafts.py) under the episode's lock and writes it. NotFound
        for a missing episode; FailedPrecondition when it is closed or the draft finalized."""
        ...

    async def text_of(self, tenant_id: str, episode_id: str, draft_id: str) -> str | None: ...

    async def finalized(self, tenant_id: str, episode_id: str, draft_id: str) -> Message | None:
        """The message of the log whose client_message_id is the draft id, if any."""
        ...

    async def remove(self, tenant_id: str, episode_id: str, draft_id: str) -> None: ...

    async def discard_all(self, tenant_id: str, episode_id: str) -> None: ...

    async def read_live(
        self, tenant_id: str, episode_id: str, after_seq: int, known: dict[str, int], limit: int
    ) -> LiveRead:
        """One read, in LiveRead's order; a draft's text only from the length in `known`
        (all of it when unknown or shorter). NotFound once the episode is gone."""
        ...

    async def messages_after(
        self, tenant_id: str, episode_id: str, after_seq: int, through_seq: int, limit: int
    ) -> list[Message]:
        """Oldest first: the replay of a joining watcher, a page at a time."""
        ...
