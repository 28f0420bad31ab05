"""The chunk rows searches return, cached (state/chunk_cache.py): kept by bytes, least recently
used dropped first, kept right by the change owner's changes, and an agent read in whole on
its first miss while it fits in half of the budget."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from episodic.domain.changes import CachesStale, DocumentsRemoved, KnowledgeVectors
from episodic.domain.knowledge import (
    DocumentChunk,
    DocumentDraft,
    knowledge_scope,
    new_document,
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


@pytest.mark.parametrize("stale", ["t1", None])
def test_a_read_in_flight_when_its_tenant_went_stale_is_not_kept_even_for_an_agent_holding_nothing(
    stale: str | None,
) -> None:
    cache = ChunkCache(1 << 30)
    before = {t: cache.generation(t, "a") for t in ("t1", "t2")}  # read before the SQL reads
    cache.changed(CachesStale(stale))
    for tenant, generation in before.items():
        cache.put(tenant, "a", rows_of(tenant, "a", "doc-0", 1), generation)
    assert held(cache, "t1", "a", ["doc-0#0"]) == set()
    assert held(cache, "t2", "a", ["doc-0#0"]) == (set() if stale is None else {"doc-0#0"})


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
    """Counted, not timed: which entries a change looks at. A walk over every entry per change
    looked at all 2,000 for each of the 10 documents."""
    cache = ChunkCache(1 << 30)
    fill(cache, "t", "a", 1_000)
    looked_at: list[str] = []
    discard = cache._discard

    def counting(key: chunk_cache.Key) -> None:
        looked_at.append(key[2])
        discard(key)

    monkeypatch.setattr(cache, "_discard", counting)
    for d in range(0, 1_000, 100):
        cache.changed(rewritten("t", "a", f"doc-{d}"))
    assert sorted(looked_at) == sorted(f"doc-{d}#{i}" for d in range(0, 1_000, 100) for i in range(2))


def test_an_entry_gives_back_the_row_it_was_given_and_holds_nothing_the_collector_tracks() -> None:
    cache = ChunkCache(1 << 30)
    rows = rows_of("t", "a", "doc-0", 2)
    chunk = DocumentChunk("doc-0", 1, "chunk 1", 0, 4, ("Guide", "Water"))
    rows["doc-0#1"] = (rows["doc-0#1"][0], chunk)
    cache.put("t", "a", rows, cache.generation("t", "a"))
    found, _ = cache.get("t", "a", ["doc-0#0", "doc-0#1"])
    assert found == rows
    gc.collect()  # a tuple of strings and numbers is untracked once the collector has seen it
    assert not any(gc.is_tracked(entry) for entry in cache._items.values())
    cache.changed(rewritten("t", "a", "doc-0"))
    assert cache._documents == {}  # the last entry of a document takes its fields with it


class Pages:
    """A `ChunkPages` source over rows held here; `during` runs as each page is read."""

    def __init__(self, rows: dict[tuple[str, str], dict[str, Row]]) -> None:
        self.rows = rows
        self.reads = 0
        self.during: Callable[[int], None] = lambda read: None

    async def chunk_page(
        self, tenant_id: str, agent_id: str, after: tuple[str, int] | None, limit: int
    ) -> list[Row]:
        self.reads += 1
        self.during(self.reads)
        ordered = sorted(self.rows.get((tenant_id, agent_id), {}).values(), key=_place)
        return [row for row in ordered if after is None or _place(row) > after][:limit]


def _place(row: Row) -> tuple[str, int]:
    return row[1].document_id, row[1].index


def agent_rows(tenant_id: str, agent_id: str, documents: int, chunks: int = 2) -> dict[str, Row]:
    rows: dict[str, Row] = {}
    for d in range(documents):
        rows |= rows_of(tenant_id, agent_id, f"doc-{d}", chunks)
    return rows


def entry_bytes() -> int:
    probe = ChunkCache(1 << 30)
    fill(probe, "t", "a", 1, chunks=1)
    return probe.held_bytes


async def test_a_fill_reads_all_of_one_agents_chunks_in_a_page_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(chunk_cache, "FILL_PAGE", 4)
    a, b = agent_rows("t", "a", 5), agent_rows("t", "b", 2)
    source = Pages({("t", "a"): a, ("t", "b"): b})
    cache = ChunkCache(1 << 30, source)
    assert await cache.fill("t", "a") == 10
    assert held(cache, "t", "a", list(a)) == set(a)
    assert held(cache, "t", "b", list(b)) == set()
    assert source.reads == 3  # 4 + 4 + 2


async def test_a_fill_stops_before_the_agent_takes_more_than_half_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(chunk_cache, "FILL_PAGE", 2)
    rows = agent_rows("t", "a", 10)
    cache = ChunkCache(entry_bytes() * 9, Pages({("t", "a"): rows}))
    assert await cache.fill("t", "a") == 4  # a third page would make 6 entries: over 4.5
    assert len(held(cache, "t", "a", list(rows))) == 4


async def test_a_page_that_raced_a_change_is_not_kept_and_the_fill_stops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(chunk_cache, "FILL_PAGE", 2)
    rows = agent_rows("t", "a", 3)
    source = Pages({("t", "a"): rows})
    cache = ChunkCache(1 << 30, source)
    source.during = lambda read: cache.changed(rewritten("t", "a", "doc-2")) if read == 2 else None
    assert await cache.fill("t", "a") == 2
    assert held(cache, "t", "a", list(rows)) == {"doc-0#0", "doc-0#1"}
    assert source.reads == 2


async def test_a_miss_starts_one_fill_and_the_next_only_after_the_interval() -> None:
    now = [0.0]
    source = Pages({("t", "a"): agent_rows("t", "a", 2)})
    cache = ChunkCache(1 << 30, source, monotonic=lambda: now[0])
    cache.missed("t", "a")
    cache.missed("t", "a")  # one is running already
    await asyncio.sleep(0)
    assert source.reads == 1 and held(cache, "t", "a", ["doc-1#1"]) == {"doc-1#1"}
    now[0] = chunk_cache.FILL_AGAIN_SECONDS - 1
    cache.missed("t", "a")
    await asyncio.sleep(0)
    assert source.reads == 1
    now[0] = chunk_cache.FILL_AGAIN_SECONDS
    cache.missed("t", "a")
    await asyncio.sleep(0)
    assert source.reads == 2


async def test_a_tenant_gone_stale_is_read_in_again_at_its_next_miss() -> None:
    source = Pages({("t", "a"): agent_rows("t", "a", 1)})
    cache = ChunkCache(1 << 30, source, monotonic=lambda: 0.0)
    cache.missed("t", "a")
    await asyncio.sleep(0)
    cache.changed(CachesStale("t"))
    assert held(cache, "t", "a", ["doc-0#0"]) == set()
    cache.missed("t", "a")
    await asyncio.sleep(0)
    assert source.reads == 2 and held(cache, "t", "a", ["doc-0#0"]) == {"doc-0#0"}


async def test_a_failed_fill_is_logged_by_kind_only_and_the_cache_still_serves(
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = Pages({})

    def fails(read: int) -> None:
        raise ConnectionError("database at secret-host gone while reading agent a")

    source.during = fails
    cache = ChunkCache(1 << 30, source)
    with caplog.at_level(logging.WARNING, logger=chunk_cache.__name__):
        cache.missed("t", "a")
        await asyncio.sleep(0)
    assert [r.getMessage() for r in caplog.records] == [
        "reading an agent's chunks into the cache failed: ConnectionError"
    ]
    fill(cache, "t", "a", 1)
    assert held(cache, "t", "a", ["doc-0#0"]) == {"doc-0#0"}


async def test_closing_stops_a_fill_in_flight_and_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    reading, never = asyncio.Event(), asyncio.Event()

    class Stuck:
        async def chunk_page(
            self, tenant_id: str, agent_id: str, after: tuple[str, int] | None, limit: int
        ) -> list[Row]:
            reading.set()
            await never.wait()
            return []

    cache = ChunkCache(1 << 30, Stuck())
    cache.missed("t", "a")
    await reading.wait()
    with caplog.at_level(logging.WARNING, logger=chunk_cache.__name__):
        await cache.close()
    assert caplog.records == [] and cache._filling == {}
    await cache.close()  # nothing in flight: nothing to stop


def test_a_cache_without_a_source_is_filled_by_use_only() -> None:
    cache = ChunkCache(1 << 30)
    cache.missed("t", "a")  # no event loop needed: nothing starts
    assert held(cache, "t", "a", ["doc-0#0"]) == set()
