"""The chunks of agents' documents that turns have rendered, in RAM: a turn's knowledge
search takes its candidates' rows from here, and reads SQL only for the ones it does not
hold, so a warm turn adds no SQL round trip for knowledge.

An LRU bounded by bytes, kept right by the change owner: a document rewritten
(KnowledgeVectors) or removed (DocumentsRemoved), here or on another replica, drops its
entries, and a tenant's caches going stale drops the tenant's. A read from SQL that raced
such a change is not kept (the agent's generation moved while it was read)."""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from episodic.domain.changes import CachesStale, Change, DocumentsRemoved, KnowledgeVectors
from episodic.domain.knowledge import Document, DocumentChunk, split_chunk_key

Agent = tuple[str, str]  # (tenant, agent)
Key = tuple[str, str, str]  # (tenant, agent, chunk key)
DocumentKey = tuple[str, str, str]  # (tenant, agent, document id)
Row = tuple[Document, DocumentChunk]
_ENTRY_BYTES = 600  # the tuple, the two dataclasses and their small fields (tracemalloc)


class ChunkCache:
    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._items: OrderedDict[Key, tuple[Row, int]] = OrderedDict()
        # Each document's keys held: a changed document drops its own entries without a walk
        # over every entry held (a 64 MiB cache holds ~60k; a batch of 100 created documents
        # walked them 100 times).
        self._by_document: dict[DocumentKey, set[Key]] = {}
        self._bytes = 0
        self._generations: dict[Agent, int] = {}

    @property
    def held_bytes(self) -> int:
        """What the entries held count against the budget."""
        return self._bytes

    def generation(self, tenant_id: str, agent_id: str) -> int:
        """Read before a SQL read whose rows are to be kept (see `put`)."""
        return self._generations.get((tenant_id, agent_id), 0)

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
            found[key] = entry[0]
        return found, missing

    def put(self, tenant_id: str, agent_id: str, rows: dict[str, Row], generation: int) -> None:
        """Keeps rows read from SQL, unless the agent's documents changed since `generation`."""
        if generation != self.generation(tenant_id, agent_id):
            return
        for key, row in rows.items():
            size = _ENTRY_BYTES + sys.getsizeof(row[1].text) + sys.getsizeof(row[0].title)
            held = (tenant_id, agent_id, key)
            self._discard(held)
            self._items[held] = (row, size)
            self._by_document.setdefault(_document_of(held), set()).add(held)
            self._bytes += size
        while self._bytes > self._max_bytes and self._items:
            self._discard(next(iter(self._items)))  # the least recently used

    def changed(self, change: Change) -> None:
        if isinstance(change, KnowledgeVectors):
            self._drop_documents([(change.scope.tenant_id, change.scope.agent_id, change.document_id)])
        elif isinstance(change, DocumentsRemoved):
            self._drop_documents([(s.tenant_id, s.agent_id, d) for s, d in change.documents])
        elif isinstance(change, CachesStale):
            stale = [k for k in self._items if change.tenant_id is None or k[0] == change.tenant_id]
            for agent in {k[:2] for k in stale}:
                self._bump(agent)
            for key in stale:
                self._discard(key)

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
        self._bytes -= entry[1]
        document = _document_of(key)
        keys = self._by_document[document]
        keys.discard(key)
        if not keys:
            del self._by_document[document]


def _document_of(key: Key) -> DocumentKey:
    return key[0], key[1], split_chunk_key(key[2])[0]
