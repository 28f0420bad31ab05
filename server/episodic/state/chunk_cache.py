"""The chunks of agents' documents that searches return, in RAM: a knowledge search takes
its candidates' rows from here, and reads SQL only for the ones it does not hold, so a warm
turn adds no SQL round trip for knowledge.

The first search of an agent that misses starts reading all of its chunks in (`missed`), a
page at a time, off the event loop, while they fit in a share of the budget: an agent's
searches then read no SQL at all, where filled by use a large agent's searches kept missing
(100k chunks, random queries: ~0.4 ms of a ~1.5 ms search went to reading its 5 rows, and
~1 ms of its p99; bench-knowledge).

Entries hold no object the garbage collector tracks (a tuple of strings and numbers, which it
stops tracking once it has seen it; each document's fields are held once, apart): 100k
entries as (Document, DocumentChunk) pairs were ~300k tracked objects, and the full
collections reading them in set off stalled every call for up to ~240 ms.

An LRU bounded by bytes, kept right by the change owner: a document rewritten
(KnowledgeVectors) or removed (DocumentsRemoved), here or on another replica, drops its
entries, and a tenant's caches going stale drops the tenant's. A read from SQL that raced
such a change is not kept (the agent's generation moved while it was read)."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from episodic.domain.changes import CachesStale, Change, DocumentsRemoved, KnowledgeVectors
from episodic.domain.knowledge import Document, DocumentChunk

Agent = tuple[str, str]  # (tenant, agent)
Key = tuple[str, str, str]  # (tenant, agent, chunk key)
DocumentKey = tuple[str, str, str]  # (tenant, agent, document id)
Row = tuple[Document, DocumentChunk]
# (bytes counted, document id, index, text, start, end, heading path): a chunk's fields
_Entry = tuple[int, str, int, str, int, int, tuple[str, ...]]
# An entry's cost beyond its text and title: tracemalloc's for a (Document, DocumentChunk) pair;
# an entry's tuple, key and share of its document take less, so the budget errs on the safe side.
_ENTRY_BYTES = 600
# Rows read (and kept) at a time while an agent's chunks are read in: keeping a page costs
# the event loop ~0.5 ms, and other calls run between pages.
FILL_PAGE = 256
FILL_SHARE = 0.5  # an agent's chunks are read in while they take at most this share of the budget
FILL_AGAIN_SECONDS = 600.0  # an agent is read in at most this often (evicted since, or not all kept)
_log = logging.getLogger(__name__)


class ChunkPages(Protocol):
    async def chunk_page(
        self, tenant_id: str, agent_id: str, after: tuple[str, int] | None, limit: int
    ) -> list[Row]: ...


class ChunkCache:
    def __init__(
        self,
        max_bytes: int,
        source: ChunkPages | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max_bytes = max_bytes
        self._source = source  # None: filled by use only
        self._monotonic = monotonic
        self._filled_at: dict[Agent, float] = {}  # when a fill of the agent last started
        self._filling: dict[Agent, asyncio.Task[int]] = {}
        self._items: OrderedDict[Key, _Entry] = OrderedDict()
        self._documents: dict[DocumentKey, Document] = {}  # of the entries held
        # Each document's keys held: a changed document drops its own entries without a walk
        # over every entry held (a 64 MiB cache holds ~60k; a batch of 100 created documents
        # walked them 100 times).
        self._by_document: dict[DocumentKey, set[Key]] = {}
        self._bytes = 0
        self._generations: dict[Agent, int] = {}
        # Times a tenant's caches (or all tenants', `_all_stale`) went stale: part of every
        # generation, so a read in flight then is not kept, for any of its agents.
        self._tenant_stale: dict[str, int] = {}
        self._all_stale = 0

    @property
    def held_bytes(self) -> int:
        """What the entries held count against the budget."""
        return self._bytes

    def generation(self, tenant_id: str, agent_id: str) -> tuple[int, int, int]:
        """Read before a SQL read whose rows are to be kept (see `put`)."""
        stale = self._tenant_stale.get(tenant_id, 0)
        return self._all_stale, stale, self._generations.get((tenant_id, agent_id), 0)

    def get(self, tenant_id: str, agent_id: str, keys: Sequence[str]) -> tuple[dict[str, Row], list[str]]:
        """(rows held, keys not held)."""
        found: dict[str, Row] = {}
        missing: list[str] = []
        for key in keys:
            entry = self._items.get((tenant_id, agent_id, key))
            if entry is None:
                missing.append(key)
                continue
            self._items.move_to_end((tenant_id, agent_id, key))
            _, document_id, index, text, start, end, heading_path = entry
            document = self._documents[(tenant_id, agent_id, document_id)]
            found[key] = (document, DocumentChunk(document_id, index, text, start, end, heading_path))
        return found, missing

    def put(
        self, tenant_id: str, agent_id: str, rows: dict[str, Row], generation: tuple[int, int, int]
    ) -> None:
        """Keeps rows read from SQL, unless the agent's documents changed since `generation`."""
        if generation == self.generation(tenant_id, agent_id):
            self._keep(tenant_id, agent_id, _sized(rows))

    def missed(self, tenant_id: str, agent_id: str) -> None:
        """A search read rows of this agent from SQL: its chunks are read in, in the
        background, unless that started less than FILL_AGAIN_SECONDS ago."""
        agent = (tenant_id, agent_id)
        if self._source is None or agent in self._filling:
            return
        started = self._filled_at.get(agent)
        now = self._monotonic()
        if started is not None and now - started < FILL_AGAIN_SECONDS:
            return
        self._filled_at[agent] = now
        self._filling[agent] = asyncio.create_task(self._fill_quietly(agent), name="episodic-chunk-fill")

    async def fill(self, tenant_id: str, agent_id: str) -> int:
        """Reads the agent's chunks into the cache, FILL_PAGE at a time, until all are held or
        the next page would take them past FILL_SHARE of the budget; returns how many were
        kept. A page that raced a change to the agent's documents is not kept, and the fill
        stops there (searches read what they miss, and a later miss fills again)."""
        assert self._source is not None
        after: tuple[str, int] | None = None
        kept, kept_bytes = 0, 0
        while True:
            generation = self.generation(tenant_id, agent_id)
            page = await self._source.chunk_page(tenant_id, agent_id, after, FILL_PAGE)
            sized = _sized({chunk.key: (document, chunk) for document, chunk in page})
            size = sum(entry[0] for _, _, entry in sized)
            if generation != self.generation(tenant_id, agent_id):
                return kept
            if kept_bytes + size > self._max_bytes * FILL_SHARE:
                return kept
            self._keep(tenant_id, agent_id, sized)
            kept, kept_bytes = kept + len(sized), kept_bytes + size
            if len(page) < FILL_PAGE:
                return kept
            after = (page[-1][1].document_id, page[-1][1].index)

    async def close(self) -> None:
        """Stops the fills in flight (before the database closes under them)."""
        fills = list(self._filling.values())
        for task in fills:
            task.cancel()
        await asyncio.gather(*fills, return_exceptions=True)

    async def _fill_quietly(self, agent: Agent) -> int:
        try:
            return await self.fill(*agent)
        except Exception as exc:  # the cache is filled by use meanwhile; health reports the database
            _log.warning("reading an agent's chunks into the cache failed: %s", type(exc).__name__)
            return 0
        finally:
            self._filling.pop(agent, None)

    def changed(self, change: Change) -> None:
        if isinstance(change, KnowledgeVectors):
            self._drop_documents([(change.scope.tenant_id, change.scope.agent_id, change.document_id)])
        elif isinstance(change, DocumentsRemoved):
            self._drop_documents([(s.tenant_id, s.agent_id, d) for s, d in change.documents])
        elif isinstance(change, CachesStale):
            self._went_stale(change.tenant_id)

    def _went_stale(self, tenant_id: str | None) -> None:
        """The tenant's entries go (found by document, not by a walk over every entry), no
        read in flight of any of its agents is kept (one of an agent holding nothing was), and
        its agents are read in again at their next miss. None: every tenant's."""
        if tenant_id is None:
            self._all_stale += 1
        else:
            self._tenant_stale[tenant_id] = self._tenant_stale.get(tenant_id, 0) + 1
        self._drop_documents([d for d in self._by_document if tenant_id in (None, d[0])])
        for agent in [a for a in self._filled_at if tenant_id in (None, a[0])]:
            del self._filled_at[agent]

    def _keep(self, tenant_id: str, agent_id: str, sized: list[tuple[str, Document, _Entry]]) -> None:
        for key, document, entry in sized:
            held = (tenant_id, agent_id, key)
            self._discard(held)
            self._items[held] = entry
            of = (tenant_id, agent_id, entry[1])
            self._by_document.setdefault(of, set()).add(held)
            self._documents[of] = document
            self._bytes += entry[0]
        while self._bytes > self._max_bytes and self._items:
            self._discard(next(iter(self._items)))  # the least recently used

    def _drop_documents(self, documents: Iterable[DocumentKey]) -> None:
        for document in set(documents):
            self._bump(document[:2])
            for key in list(self._by_document.get(document, ())):
                self._discard(key)

    def _bump(self, agent: Agent) -> None:
        self._generations[agent] = self._generations.get(agent, 0) + 1

    def _discard(self, key: Key) -> None:
        entry = self._items.pop(key, None)
        if entry is None:
            return
        self._bytes -= entry[0]
        document = (key[0], key[1], entry[1])
        keys = self._by_document[document]
        keys.discard(key)
        if not keys:
            del self._by_document[document]
            del self._documents[document]


def _sized(rows: dict[str, Row]) -> list[tuple[str, Document, _Entry]]:
    """Each row as (key, document, entry), its size counted once."""
    return [
        (key, d, (_ENTRY_BYTES + sys.getsizeof(c.text) + sys.getsizeof(d.title), c.document_id, c.index,
                  c.text, c.start, c.end, c.heading_path))
        for key, (d, c) in rows.items()
    ]  # fmt: skip
