"""KnowledgeService: an agent's documents, cut into chunks (domain/chunking.py), embedded
with the server's embedder, indexed per agent through the change owner (so every replica
sees them through the change feed) and searched by meaning and by words. BuildContext finds
the chunks of a turn through `ranked`."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import datetime

from episodic.domain.access import require_agent
from episodic.domain.changes import DocumentsRemoved, KnowledgeVectors
from episodic.domain.chunking import Chunk
from episodic.domain.knowledge import (
    Document,
    DocumentChunk,
    DocumentDraft,
    KnowledgeFilter,
    KnowledgeHit,
    check_draft,
    check_drafts,
    check_mask,
    check_metadata,
    chunk_documents,
    embedded_text,
    expired,
    knowledge_scope,
    new_document,
    updated,
)
from episodic.domain.model import Caller, Page
from episodic.domain.paging import JsonScalar, decode_token, page_of, read_id
from episodic.domain.ports.changes import ChangeOwner
from episodic.domain.ports.clock import Clock
from episodic.domain.ports.episodes import AgentStore
from episodic.domain.ports.indexes import KnowledgeWords, ScopeIndex
from episodic.domain.ports.knowledge import DocumentWrite, KnowledgeStore
from episodic.domain.ports.models import Embedder, TenantEmbeddings
from episodic.domain.ports.shares import WriteQuota
from episodic.domain.recall import Hit, SearchMode, Signal, Vector, reciprocal_rank_fusion
from episodic.domain.shares import Unmetered
from episodic.domain.validation import (
    Limits,
    Violations,
    check_id,
    check_search,
    check_text,
    resolve_page_size,
)
from episodic.errors import NotFound, PermissionDenied
from episodic.service.known_agents import require_existing_agent
from episodic.service.recall import QueryVectorSource, embed_query
from episodic.state.chunk_cache import ChunkCache

POOL = 50  # candidates each signal brings to the fusion, or top_k when it asks for more


@dataclass(frozen=True, slots=True)
class KnowledgeQuery:
    agent_id: str
    mode: SearchMode | None
    query: str = ""
    top_k: int = 0
    min_score: float | None = None
    where: KnowledgeFilter = KnowledgeFilter()


@dataclass(frozen=True, slots=True)
class ResidentKnowledge:
    """What the process holds of the agents' documents, read here and kept right by the
    change owner (written there): each agent's chunks' vectors, their words, and the rows
    searches render."""

    index: ScopeIndex
    words: KnowledgeWords
    chunks: ChunkCache


@dataclass(frozen=True, slots=True)
class SearchTimings:
    """Where each search's mode and seconds are told (metrics), timed by `clock`."""

    told: Callable[[str, float], None]
    clock: Callable[[], float] = time.monotonic


@dataclass(kw_only=True)
class KnowledgeService:
    store: KnowledgeStore
    agents: AgentStore
    embedder: Embedder
    resident: ResidentKnowledge
    changes: ChangeOwner
    limits: Limits
    clock: Clock
    embed_pool: Executor | None = None  # the server's one thread for bulk work (chunking); None: asyncio's
    embeddings: TenantEmbeddings  # chunks embedded on the bulk threads, tenants in turn
    queries: QueryVectorSource | None = None  # shared with recall: a turn embeds its query once
    timings: SearchTimings | None = None  # None: searches are not timed
    quota: WriteQuota = field(default_factory=Unmetered)  # each chunk written is embedded: metered
    known_agents: set[tuple[str, str]] = field(default_factory=set, init=False)

    # --- writes --------------------------------------------------------------------------

    async def create(
        self, caller: Caller, agent_id: str, drafts: Sequence[DocumentDraft]
    ) -> list[tuple[Document, bool]]:
        """(document, created) in the order given; created False: a retry of the same content."""
        now = self.clock()
        v = Violations()
        check_id(v, "agent_id", agent_id)
        check_drafts(v, drafts, now)
        v.raise_if_any()
        await self._require_writer(caller, agent_id)
        documents = [new_document(caller.tenant_id, agent_id, d, 0, now) for d in drafts]
        pieces = await self._cut([(f"documents[{i}]", d) for i, d in enumerate(documents)])
        self.quota.write_chunks(caller.tenant_id, sum(map(len, pieces)))  # all or none, before embedding
        writes = await self._writes(documents, pieces)
        committed = await self.changes.commit(
            lambda declared: self.store.create(writes, declared),
            lambda results: [_vectors(w) for (_, created), w in zip(results, writes, strict=True) if created],
        )
        return committed.result

    async def update(
        self, caller: Caller, agent_id: str, draft: DocumentDraft, mask: Sequence[str]
    ) -> Document:
        now = self.clock()
        v = Violations()
        check_id(v, "document.agent_id", agent_id)
        check_id(v, "document.document_id", draft.document_id)
        check_mask(v, mask)
        v.raise_if_any()
        await self._require_writer(caller, agent_id)
        current = await self.store.get(caller.tenant_id, agent_id, draft.document_id, now)
        changed = updated(current, draft, mask, now)
        probe = _as_draft(changed)
        if "expire_time" not in mask:  # an expiry set before is not checked again
            probe = dataclasses.replace(probe, expires_at=None)
        v = Violations()
        check_draft(v, "document", probe, now)
        v.raise_if_any()
        [pieces] = await self._cut([("document", changed)])
        self.quota.write_chunks(caller.tenant_id, len(pieces))
        write = await self._write(changed, pieces)
        committed = await self.changes.commit(
            lambda declared: self.store.replace(write, declared), lambda _: [_vectors(write)]
        )
        return committed.result

    async def delete(self, caller: Caller, agent_id: str, document_id: str) -> Document:
        v = Violations()
        check_id(v, "agent_id", agent_id)
        check_id(v, "document_id", document_id)
        v.raise_if_any()
        await self._require_writer(caller, agent_id)
        return await self._delete(caller.tenant_id, agent_id, document_id)

    async def remove_expired(self, limit: int) -> int:
        """Deletes up to `limit` documents of any tenant past their expiry (retention's
        sweep), each with its chunks and vectors; returns how many."""
        gone = 0
        for d in await self.store.expired(self.clock(), limit):
            try:
                await self._delete(d.tenant_id, d.agent_id, d.document_id)
            except NotFound:  # deleted meanwhile by its owner
                continue
            gone += 1
        return gone

    async def _delete(self, tenant_id: str, agent_id: str, document_id: str) -> Document:
        committed = await self.changes.commit(
            lambda declared: self.store.delete(tenant_id, agent_id, document_id, declared),
            lambda gone: [DocumentsRemoved([(gone.scope, gone.document_id)])],
        )
        return committed.result

    async def _require_writer(self, caller: Caller, agent_id: str) -> None:
        require_agent(caller, agent_id)
        await require_existing_agent(self.agents, self.known_agents, caller.tenant_id, agent_id)
        if not caller.writes_knowledge:
            raise PermissionDenied(
                "this API key may read and search knowledge but not write it; "
                "make a key with `episodic keygen --knowledge-write`",
                reason="KNOWLEDGE_READ_ONLY",
            )

    async def _cut(self, documents: Sequence[tuple[str, Document]]) -> list[list[Chunk]]:
        """The documents' chunks, cut on the embed pool: 2 MiB of markdown takes ~0.1-0.2 s,
        and the event loop serves every tenant's calls meanwhile. Bounded, and refused
        naming the text, past MAX_DOCUMENT_CHUNKS (domain/knowledge.py)."""
        texts = [(at, d.text, d.format) for at, d in documents]
        return await asyncio.get_running_loop().run_in_executor(self.embed_pool, chunk_documents, texts)

    async def _write(self, document: Document, pieces: Sequence[Chunk]) -> DocumentWrite:
        [write] = await self._writes([document], [pieces])
        return write

    async def _writes(
        self, documents: Sequence[Document], pieces: Sequence[Sequence[Chunk]]
    ) -> list[DocumentWrite]:
        """The documents (one tenant's) with their chunks, embedded as one bulk job: its
        chunks of texts run on all the bulk threads (bulk_embed_threads), not one document
        at a time on one."""
        chunked = [
            [DocumentChunk(d.document_id, i, c.text, c.start, c.end, c.heading_path) for i, c in enumerate(p)]
            for d, p in zip(documents, pieces, strict=True)
        ]
        texts = [embedded_text(d, c) for d, chunks in zip(documents, chunked, strict=True) for c in chunks]
        vectors = iter(await self._embed(documents[0].tenant_id, texts))
        return [
            DocumentWrite(
                dataclasses.replace(d, chunk_count=len(chunks)),
                chunks,
                [next(vectors) for _ in chunks],
                self.embedder.model_id,
            )
            for d, chunks in zip(documents, chunked, strict=True)
        ]

    async def _embed(self, tenant_id: str, texts: Sequence[str]) -> list[Vector]:
        """On the tenant's bulk turns (a chunk at a time, each taking its turn): a knowledge base
        loaded in bulk holds a bulk thread one chunk at most before another tenant's job goes."""
        return await self.embeddings.bulk(tenant_id, texts)

    # --- reads ---------------------------------------------------------------------------

    async def get(
        self, caller: Caller, agent_id: str, document_id: str, with_chunks: bool
    ) -> tuple[Document, list[DocumentChunk]]:
        v = Violations()
        check_id(v, "agent_id", agent_id)
        check_id(v, "document_id", document_id)
        v.raise_if_any()
        require_agent(caller, agent_id)
        now = self.clock()
        document = await self.store.get(caller.tenant_id, agent_id, document_id, now)
        if not with_chunks:
            return document, []
        keys = [f"{document_id}#{i}" for i in range(document.chunk_count)]
        found = await self.store.chunks(caller.tenant_id, agent_id, keys, KnowledgeFilter(), now)
        return document, [found[k][1] for k in keys if k in found]

    async def list_documents(
        self, caller: Caller, agent_id: str, where: KnowledgeFilter, page_size: int, page_token: str
    ) -> Page[Document]:
        v = Violations()
        check_id(v, "agent_id", agent_id)
        check_metadata(v, "metadata", where.metadata)
        limit = resolve_page_size(v, "page_size", page_size, self.limits)
        v.raise_if_any()
        require_agent(caller, agent_id)
        query: dict[str, JsonScalar] = {"agent_id": agent_id, "metadata": repr(where.metadata)}
        position = decode_token(page_token, query)
        after = read_id(position, "document_id") if position else None
        found = await self.store.page(caller.tenant_id, agent_id, where, self.clock(), after, limit + 1)
        return page_of(found, limit, _position, query)

    async def search(self, caller: Caller, q: KnowledgeQuery) -> list[KnowledgeHit]:
        mode, top_k = self._check(q)
        require_agent(caller, q.agent_id)
        await require_existing_agent(self.agents, self.known_agents, caller.tenant_id, q.agent_id)
        return await self.ranked(caller.tenant_id, q, mode, top_k)

    async def for_turn(
        self, tenant_id: str, agent_id: str, query: str, top_k: int, min_score: float | None
    ) -> list[KnowledgeHit]:
        """BuildContext's search: SearchKnowledge's hybrid, unfiltered (so its rows come from
        the chunk cache). Words are matched over all of the agent's chunks, not only the
        semantic pool: matching within the pool found 0.62 against 0.72 of the gold answer
        words rendered (eval-knowledge)."""
        q = KnowledgeQuery(agent_id, SearchMode.HYBRID, query, top_k, min_score)
        return await self.ranked(tenant_id, q, SearchMode.HYBRID, top_k, read_ahead=True)

    async def _cached_rows(
        self, tenant_id: str, agent_id: str, keys: Sequence[str]
    ) -> dict[str, tuple[Document, DocumentChunk]]:
        """Rows of unexpired documents: held ones from the cache, the rest read and kept."""
        now = self.clock()
        held, missing = self.resident.chunks.get(tenant_id, agent_id, keys)
        if missing:
            self.resident.chunks.missed(tenant_id, agent_id)
            generation = self.resident.chunks.generation(tenant_id, agent_id)
            read = await self.store.chunks(tenant_id, agent_id, missing, KnowledgeFilter(), now)
            self.resident.chunks.put(tenant_id, agent_id, read, generation)
            held |= read
        return {k: row for k, row in held.items() if not expired(row[0], now)}

    def may_find_by_meaning(self, tenant_id: str, agent_id: str) -> bool:
        """False when the agent is known to hold no chunks: its query need not be embedded."""
        return not self.resident.index.holds_nothing(knowledge_scope(tenant_id, agent_id))

    async def ranked(
        self, tenant_id: str, q: KnowledgeQuery, mode: SearchMode, top_k: int, read_ahead: bool = False
    ) -> list[KnowledgeHit]:
        """`read_ahead`: the rows of every candidate are read (and kept) at once, not only of
        those returned: a turn's next questions then find theirs in the chunk cache, so a
        warm turn adds no trip to the database."""
        timings = self.timings
        if timings is None:
            return await self._ranked(tenant_id, q, mode, top_k, read_ahead)
        started = timings.clock()
        try:
            return await self._ranked(tenant_id, q, mode, top_k, read_ahead)
        finally:
            timings.told(mode.value, timings.clock() - started)

    async def _ranked(
        self, tenant_id: str, q: KnowledgeQuery, mode: SearchMode, top_k: int, read_ahead: bool
    ) -> list[KnowledgeHit]:
        now = self.clock()
        if mode is SearchMode.RECENCY:
            newest = await self.store.newest(tenant_id, q.agent_id, q.where, now, top_k)
            return [
                KnowledgeHit(d, c, 1.0 / rank, (Signal.RECENCY.value,))
                for rank, (d, c) in enumerate(newest, 1)
            ]
        pool = max(POOL, top_k)  # top_k 100 by meaning found only 50 (SciFact R@100, eval-knowledge)
        if mode is SearchMode.SEMANTIC:
            semantic = await self._semantic(tenant_id, q, pool)
            ranked = [(h, (Signal.SEMANTIC,)) for h in semantic]
            return await self._hits(tenant_id, q, ranked, top_k, now, read_ahead)
        async with asyncio.TaskGroup() as both:  # side by side: a large agent's vectors on a thread
            by_meaning = both.create_task(self._semantic(tenant_id, q, pool))
            by_words = both.create_task(self.resident.words.search(tenant_id, q.agent_id, q.query, pool))
        fused = reciprocal_rank_fusion(
            {Signal.SEMANTIC: by_meaning.result(), Signal.LEXICAL: by_words.result()},
            limit=max(pool, top_k * 4),
        )
        return await self._hits(tenant_id, q, fused, top_k, now, read_ahead)

    async def _hits(
        self,
        tenant_id: str,
        q: KnowledgeQuery,
        ranked: Sequence[tuple[Hit, tuple[Signal, ...]]],
        top_k: int,
        now: datetime,
        read_ahead: bool,
    ) -> list[KnowledgeHit]:
        """The first `top_k` ranked chunks whose document passes the filter, with their rows
        (from the chunk cache when nothing is filtered). Unless `read_ahead`, rows are read
        for the first top_k candidates (2 x top_k when filtered), and for the rest only if
        too few of those pass: a search's rows cost what it returns, not its candidate pool
        (~1 ms at 100k chunks). Unfiltered, only an expired document's chunks fail, rarely."""
        kept: list[KnowledgeHit] = []
        unfiltered = q.where == KnowledgeFilter()
        first = len(ranked) if read_ahead else top_k * (1 if unfiltered else 2)
        for batch in (ranked[:first], ranked[first:]):
            if len(kept) >= top_k or not batch:
                break
            keys = [h.episode_id for h, _ in batch]
            if unfiltered:
                rows = await self._cached_rows(tenant_id, q.agent_id, keys)
            else:
                rows = await self.store.chunks(tenant_id, q.agent_id, keys, q.where, now)
            kept += [
                KnowledgeHit(rows[h.episode_id][0], rows[h.episode_id][1], h.score, tuple(x.value for x in s))
                for h, s in batch
                if h.episode_id in rows
            ]
        return kept[:top_k]

    async def _semantic(self, tenant_id: str, q: KnowledgeQuery, pool: int = POOL) -> list[Hit]:
        scope = knowledge_scope(tenant_id, q.agent_id)
        await self.resident.index.ensure(scope)
        if self.resident.index.holds_nothing(scope):
            return []
        vector = await embed_query(self.embedder, self.queries, q.query)
        nearest = await self.resident.index.nearest(scope, vector, pool)
        return [h for h in nearest if q.min_score is None or h.score >= q.min_score]

    def _check(self, q: KnowledgeQuery) -> tuple[SearchMode, int]:
        v = Violations()
        check_id(v, "agent_id", q.agent_id)
        check_text(v, "query", q.query, self.limits.max_content_bytes)
        check_metadata(v, "metadata", q.where.metadata)
        top_k = check_search(v, q.mode, q.query, q.top_k)
        if q.min_score is not None and not 0.0 <= q.min_score <= 1.0:
            v.add("min_score", "must be between 0 and 1")
        where = q.where
        if where.updated_after and where.updated_before and where.updated_after >= where.updated_before:
            v.add("updated_before", "must be later than updated_after")
        v.raise_if_any()
        assert q.mode is not None
        return q.mode, top_k


def _vectors(w: DocumentWrite) -> KnowledgeVectors:
    d = w.document
    return KnowledgeVectors(d.scope, d.document_id, [c.key for c in w.chunks], list(w.vectors or ()))


def _as_draft(d: Document) -> DocumentDraft:
    return DocumentDraft(d.document_id, d.text, d.format, d.title, d.uri, d.metadata, d.expires_at)


def _position(last: Document) -> dict[str, JsonScalar]:
    return {"document_id": last.document_id}
