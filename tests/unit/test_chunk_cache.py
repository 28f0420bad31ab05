"""The chunk rows turns render, cached (state/chunk_cache.py): kept by bytes, least recently
used dropped first, and kept right by the change owner's changes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from episodic.domain.changes import CachesStale, DocumentsRemoved, KnowledgeVectors
from episodic.domain.knowledge import (
    DocumentChunk,
    DocumentDraft,
    knowledge_scope,
    new_document,
    split_chunk_key,
)
from episodic.state import chunk_cache
from episodic.state.chunk_cache import ChunkCache, Row

NOW = datetime(2026, 11, 28, tzinfo=UTC)


def rows_of(tenant_id: str, agent_id: str, document_id: str, chunks: int) -> dict[str, Row]:
    document = new_document(tenant_id, agent_id, DocumentDraft(document_id, "text"), chunks, NOW)
    return {
        f"{document_id}#{i}": (document, DocumentChunk(document_id, i, f"chunk {i}", 0, 4))
        for i in range(chunks)
    }


def fill(cache: ChunkCache, tenant_id: str, agent_id: str, documents: int, chunks: int = 2) -> None:
    for d in range(documents):
        rows = rows_of(tenant_id, agent_id, f"doc-{d}", chunks)
        cache.put(tenant_id, agent_id, rows, cache.generation(tenant_id, agent_id))


def held(cache: ChunkCache, tenant_id: str, agent_id: str, keys: list[str]) -> set[str]:
    found, _ = cache.get(tenant_id, agent_id, keys)
    return set(found)


def rewritten(tenant_id: str, agent_id: str, document_id: str) -> KnowledgeVectors:
    return KnowledgeVectors(knowledge_scope(tenant_id, agent_id), document_id, [], [])


def test_a_rewritten_document_leaves_the_cache_and_no_other_does() -> None:
    cache = ChunkCache(1 << 30)
    fill(cache, "t", "a", 3)
    fill(cache, "t", "b", 3)
    cache.changed(rewritten("t", "a", "doc-1"))
    assert held(cache, "t", "a", ["doc-0#0", "doc-1#0", "doc-1#1", "doc-2#1"]) == {"doc-0#0", "doc-2#1"}
    assert held(cache, "t", "b", ["doc-1#0", "doc-1#1"]) == {"doc-1#0", "doc-1#1"}


def test_removed_documents_leave_the_cache() -> None:
    cache = ChunkCache(1 << 30)
    fill(cache, "t", "a", 3)
    scope = knowledge_scope("t", "a")
    cache.changed(DocumentsRemoved([(scope, "doc-0"), (scope, "doc-2")]))
    assert held(cache, "t", "a", ["doc-0#0", "doc-1#0", "doc-2#0"]) == {"doc-1#0"}


def test_a_read_that_raced_a_change_is_not_kept() -> None:
    cache = ChunkCache(1 << 30)
    generation = cache.generation("t", "a")  # read before the SQL read
    cache.changed(rewritten("t", "a", "doc-0"))
    cache.put("t", "a", rows_of("t", "a", "doc-0", 1), generation)
    assert held(cache, "t", "a", ["doc-0#0"]) == set()


def test_a_tenant_gone_stale_drops_its_entries_only() -> None:
    cache = ChunkCache(1 << 30)
    fill(cache, "t1", "a", 2)
    fill(cache, "t2", "a", 2)
    cache.changed(CachesStale("t1"))
    assert held(cache, "t1", "a", ["doc-0#0", "doc-1#1"]) == set()
    assert held(cache, "t2", "a", ["doc-0#0", "doc-1#1"]) == {"doc-0#0", "doc-1#1"}


def test_the_least_recently_used_go_first_beyond_the_budget_and_their_document_can_change_later() -> None:
    probe = ChunkCache(1 << 30)
    fill(probe, "t", "a", 1, chunks=1)
    one_entry = probe.held_bytes
    cache = ChunkCache(one_entry * 3)
    fill(cache, "t", "a", 3, chunks=1)
    held(cache, "t", "a", ["doc-0#0"])  # used: doc-1 is now the least recently used
    cache.put("t", "a", rows_of("t", "a", "doc-3", 1), cache.generation("t", "a"))
    assert held(cache, "t", "a", [f"doc-{d}#0" for d in range(4)]) == {"doc-0#0", "doc-2#0", "doc-3#0"}
    cache.changed(rewritten("t", "a", "doc-1"))  # evicted already: nothing to drop, no error
    cache.changed(rewritten("t", "a", "doc-2"))
    assert held(cache, "t", "a", [f"doc-{d}#0" for d in range(4)]) == {"doc-0#0", "doc-3#0"}


def test_a_changed_document_looks_at_its_own_entries_not_the_whole_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Counted, not timed: which entries a change reads the document of. A walk over every
    entry per change read all 2,000 for each of the 10 documents."""
    cache = ChunkCache(1 << 30)
    fill(cache, "t", "a", 1_000)
    read: list[str] = []

    def counting(key: str) -> tuple[str, int]:
        read.append(key)
        return split_chunk_key(key)

    monkeypatch.setattr(chunk_cache, "split_chunk_key", counting)
    for d in range(0, 1_000, 100):
        cache.changed(rewritten("t", "a", f"doc-{d}"))
    assert sorted(read) == sorted(f"doc-{d}#{i}" for d in range(0, 1_000, 100) for i in range(2))
