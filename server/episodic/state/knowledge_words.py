"""Each agent's word index (index/words.py) as a cache of SQL: built from the agent's chunk
texts the first time a search needs it, kept while searched, dropped least recently used
first beyond its byte budget. Start-up reads nothing.

Kept right by the change owner's changes, here or on another replica: a document rewritten
(KnowledgeVectors) or removed (DocumentsRemoved) leaves the index at once and is marked to
be read again; the next search reads the marked documents' chunks (none, if deleted) before
it ranks. A read that raced a change to the same document is not applied (the document is
marked again and read by the next search), so the index converges on SQL whatever order
changes and reads land in. A tenant's caches going stale drops its agents.

An agent whose index alone is larger than the whole budget is not kept: the search that
built it is answered from it, and the agent's later searches find nothing by words (hybrid
is then its meaning half) until one of its documents is deleted or the tenant's caches go
stale, when one build tries again. Kept, it would evict every other agent's index and be
evicted by the next one's load, so each search rebuilt it (131k chunks: 47-51 s of CPU a
search, issue 43) and every other agent's too. Likewise, an agent holding more than half of
the budget that is evicted for another agent's words rests: its searches find nothing by
words for REST_SECONDS, then one builds it again. Two such agents, or one and the others'
working set, cannot both be held: they are rebuilt once per rest, not at every search."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol

from episodic.domain.changes import CachesStale, Change, DocumentsRemoved, KnowledgeVectors
from episodic.domain.knowledge import split_chunk_key
from episodic.domain.ports.indexes import WordIndex
from episodic.domain.recall import Hit

Agent = tuple[str, str]  # (tenant, agent)
# An index of at most this many chunks is searched on the event loop. Its scoring loop runs
# in C without the GIL (index/_postings.c), so the vector half runs beside it on its thread;
# the loop is held ~0.2/1 ms p50/p99 at 100k chunks (bench-knowledge's queries, in process),
# ~0.06 ms of it in Python. Searched on a thread of its own instead, through gRPC, it measured
# no better (one more hop; docs/knowledge.md, Performance). Larger indexes are searched off
# the loop, so that one search never holds it for long.
INLINE_SEARCH_CHUNKS = 200_000
INLINE_ADD_CHUNKS = 64  # rewritten chunks analysed on the loop (~50 µs each); more, off it
READ_TRIES = 3
REST_SHARE = 0.5  # an agent holding more than this share of the budget rests once evicted
REST_SECONDS = 600.0
_log = logging.getLogger(__name__)


class ChunkTexts(Protocol):
    async def texts(
        self, tenant_id: str, agent_id: str, document_ids: Sequence[str] | None = None
    ) -> list[tuple[str, str]]: ...


class ResidentWords:
    """Implements the `KnowledgeWords` port (domain/ports/indexes.py)."""

    def __init__(
        self,
        source: ChunkTexts,
        new_index: Callable[[], WordIndex],
        max_bytes: int,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source = source
        self._monotonic = monotonic
        self._new_index = new_index
        self._max_bytes = max_bytes
        self._indexes: OrderedDict[Agent, WordIndex] = OrderedDict()  # least recently used first
        self._stale: dict[Agent, set[str]] = {}  # documents to read again, per agent
        self._loading: dict[Agent, asyncio.Task[WordIndex]] = {}
        self._too_large: set[Agent] = set()  # built once larger than the budget: not built again
        self._resting: dict[Agent, float] = {}  # large agents evicted: when they may be built again
        self.loads = 0
        self.evictions = 0

    async def search(self, tenant_id: str, agent_id: str, query: str, limit: int) -> list[Hit]:
        if not query.strip() or not self._by_words((tenant_id, agent_id)):
            return []
        index = await self._current((tenant_id, agent_id))
        if len(index) <= INLINE_SEARCH_CHUNKS:
            return index.search(query, limit)
        return await asyncio.to_thread(index.search, query, limit)

    def loaded(self) -> tuple[int, int, int]:
        """(agents held, their chunks, bytes): for metrics."""
        held = list(self._indexes.values())
        return len(held), sum(len(i) for i in held), sum(i.held_bytes for i in held)

    # --- the change owner's side -----------------------------------------------------------

    def changed(self, change: Change) -> None:
        if isinstance(change, KnowledgeVectors):
            self._mark((change.scope.tenant_id, change.scope.agent_id), [change.document_id])
        elif isinstance(change, DocumentsRemoved):
            for scope, document_id in change.documents:
                self._too_large.discard((scope.tenant_id, scope.agent_id))  # it may fit now
                self._mark((scope.tenant_id, scope.agent_id), [document_id])
        elif isinstance(change, CachesStale):
            self._too_large = {a for a in self._too_large if change.tenant_id not in (None, a[0])}
            for agent in [a for a in self._resting if change.tenant_id in (None, a[0])]:
                del self._resting[agent]
            for agent in [a for a in (*self._indexes, *self._loading) if change.tenant_id in (None, a[0])]:
                self._indexes.pop(agent, None)
                self._stale.pop(agent, None)
                # a load in flight may have read before the change: it is not kept, and the
                # next search loads again
                self._loading.pop(agent, None)

    def _mark(self, agent: Agent, document_ids: Sequence[str]) -> None:
        index = self._indexes.get(agent)
        if index is not None:
            index.remove_documents(document_ids)
        if index is not None or agent in self._loading:
            self._stale.setdefault(agent, set()).update(document_ids)

    # --- internals -------------------------------------------------------------------------

    async def _current(self, agent: Agent) -> WordIndex:
        """The agent's index, loaded if need be, with its stale documents read again."""
        index = self._indexes.get(agent)
        if index is None:
            task = self._loading.get(agent)
            if task is None:
                task = self._loading[agent] = asyncio.create_task(self._load(agent))
            index = await asyncio.shield(task)
        else:
            self._indexes.move_to_end(agent)
        for _ in range(READ_TRIES):
            stale = self._stale.pop(agent, None)
            if not stale:
                break
            await self._read_again(agent, index, stale)
        return index

    async def _load(self, agent: Agent) -> WordIndex:
        try:
            self._stale.pop(agent, None)  # the whole agent is read now
            texts = await self._source.texts(*agent)
            index = self._new_index()
            await asyncio.to_thread(index.add, texts)  # seconds at 100k chunks: off the loop
            if self._loading.get(agent) is asyncio.current_task():  # not dropped meanwhile
                self.loads += 1
                self._keep(agent, index)
            return index
        finally:
            if self._loading.get(agent) is asyncio.current_task():
                del self._loading[agent]

    def _by_words(self, agent: Agent) -> bool:
        """False while the agent is too large to hold, or rests."""
        if agent in self._too_large:
            return False
        until = self._resting.get(agent)
        if until is None:
            return True
        if self._monotonic() < until:
            return False
        del self._resting[agent]
        return True

    def _keep(self, agent: Agent, index: WordIndex) -> None:
        if index.held_bytes <= self._max_bytes:
            self._indexes[agent] = index
            self._evict_over_budget(keep=agent)
            return
        self._too_large.add(agent)
        self._stale.pop(agent, None)
        _log.warning(
            "an agent's word index is larger than the whole word budget, so it is not kept and the "
            "agent is searched by meaning only; raise index_cache_bytes (a tenth of it holds words)",
            extra=_sizes(index, self._max_bytes),
        )

    async def _read_again(self, agent: Agent, index: WordIndex, documents: set[str]) -> None:
        texts = await self._source.texts(*agent, sorted(documents))
        raced = self._stale.get(agent, set())  # changed again while read: read by a later search
        fresh = [(key, text) for key, text in texts if split_chunk_key(key)[0] not in raced]
        index.remove_documents(documents - raced)
        if len(fresh) > INLINE_ADD_CHUNKS:
            await asyncio.to_thread(index.add, fresh)
        else:
            index.add(fresh)
        if agent in self._indexes:
            self._evict_over_budget(keep=agent)

    def _evict_over_budget(self, keep: Agent) -> None:
        held = sum(i.held_bytes for i in self._indexes.values())
        for agent in list(self._indexes):
            if held <= self._max_bytes:
                break
            if agent != keep:
                evicted = self._indexes.pop(agent)
                held -= evicted.held_bytes
                self._stale.pop(agent, None)
                self.evictions += 1
                if evicted.held_bytes > self._max_bytes * REST_SHARE:
                    self._rest(agent, evicted)

    def _rest(self, agent: Agent, evicted: WordIndex) -> None:
        self._resting[agent] = self._monotonic() + REST_SECONDS
        _log.warning(
            "an agent's word index holding over half of the word budget was evicted for another's: "
            "the agent is searched by meaning only for %d s; raise index_cache_bytes (a tenth holds words)",
            int(REST_SECONDS),
            extra=_sizes(evicted, self._max_bytes),
        )


def _sizes(index: WordIndex, budget: int) -> dict[str, int]:
    """What a warning about an agent's index says of it: sizes, never ids."""
    return {"chunks": len(index), "index_bytes": index.held_bytes, "budget_bytes": budget}
