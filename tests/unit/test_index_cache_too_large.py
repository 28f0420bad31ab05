"""A scope larger than its index cache's whole budget (state/index_cache.py): read once (at
most one vector more than fits), found too large and not held; searched from then on a page
at a time from SQL, exactly, without evicting anyone (issue 43, finding 6: it was loaded and
evicted at every search)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

import pytest

from episodic.domain.recall import Scope, Vector
from episodic.state import index_cache
from episodic.state.index_cache import ResidentScopes
from tests.fakes import FakeVectorIndex

BIG, SMALL = Scope("t", "big", ""), Scope("t", "small", "")
VECTOR_BYTES = 2 * 4 + index_cache.KEY_OVERHEAD  # dimension 2


ROOM = 50  # vectors the budget holds: a load asks for one more


class PagedSource:
    """SQL's vectors, counting loads (at most ROOM + 1 vectors each), the pages of searches,
    and reads of whole scopes (none: a source with pages is never read whole)."""

    def __init__(self) -> None:
        self.rows: dict[Scope, dict[str, Vector]] = {}
        self.loads: dict[Scope, int] = {}
        self.pages: dict[Scope, int] = {}
        self.whole_reads = 0
        self.largest_page = 0

    async def scope_vectors(self, scope: Scope) -> tuple[list[str], list[Vector]]:
        self.whole_reads += 1
        held = self.rows.get(scope, {})
        return list(held), list(held.values())

    async def item_vectors(self, scope: Scope, items: Sequence[str]) -> tuple[list[str], list[Vector]]:
        held = {k: v for k, v in self.rows.get(scope, {}).items() if k.split("#")[0] in items}
        return list(held), list(held.values())

    async def scope_vectors_upto(self, scope: Scope, limit: int) -> tuple[list[str], list[Vector]]:
        self.loads[scope] = self.loads.get(scope, 0) + 1
        keys = sorted(self.rows.get(scope, {}))[:limit]
        self.largest_page = max(self.largest_page, len(keys))
        return keys, [self.rows[scope][k] for k in keys]

    async def scope_vector_page(self, scope: Scope, after: str, limit: int) -> tuple[list[str], list[Vector]]:
        self.pages[scope] = self.pages.get(scope, 0) + 1
        keys = sorted(k for k in self.rows.get(scope, {}) if k > after)[:limit]
        self.largest_page = max(self.largest_page, len(keys))
        return keys, [self.rows[scope][k] for k in keys]


def vectors(n: int) -> dict[str, Vector]:
    return {f"d{i:04d}#0": [math.cos(i / 100), math.sin(i / 100)] for i in range(n)}


def scope_bytes(n: int) -> int:
    return index_cache.SCOPE_OVERHEAD + n * VECTOR_BYTES


async def test_a_scope_larger_than_the_budget_is_loaded_once_and_searched_page_by_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(index_cache, "STREAM_PAGE", 16)
    source = PagedSource()
    source.rows[BIG], source.rows[SMALL] = vectors(100), vectors(5)
    budget = scope_bytes(ROOM)  # the small agent fits, the big one never does
    cache = ResidentScopes(FakeVectorIndex(), source, dimension=2, max_bytes=budget, lock=asyncio.Lock())
    query = [math.cos(0.42), math.sin(0.42)]  # nearest: d0042, then d0041 / d0043
    for _ in range(5):
        hits = await cache.nearest(BIG, query, 3)
        assert hits[0].episode_id == "d0042#0" and {h.episode_id for h in hits[1:]} == {"d0041#0", "d0043#0"}
        assert hits[0].score > 0.9999
        assert await cache.nearest(SMALL, query, 1)
    assert source.loads == {BIG: 1, SMALL: 1}  # before: BIG loaded at each of its 5 searches
    assert cache.too_large(BIG) and not cache.is_resident(BIG) and cache.is_resident(SMALL)
    assert cache.evictions == 0 and cache.held_bytes <= budget
    assert cache.streamed == 5 and source.pages[BIG] == 5 * 7  # 100 vectors, 16 a page
    assert source.largest_page == ROOM + 1 and source.whole_reads == 0  # never more than fits, + 1


async def test_a_too_large_scope_that_shrinks_below_the_budget_is_held_again() -> None:
    source = PagedSource()
    source.rows[BIG] = vectors(100)
    cache = ResidentScopes(
        FakeVectorIndex(), source, dimension=2, max_bytes=scope_bytes(ROOM), lock=asyncio.Lock()
    )
    await cache.nearest(BIG, [1.0, 0.0], 1)
    assert cache.too_large(BIG) and source.loads[BIG] == 1
    source.rows[BIG] = vectors(20)  # documents deleted
    await cache.nearest(BIG, [1.0, 0.0], 1)  # streamed, and found to fit
    assert not cache.too_large(BIG)
    hits = await cache.nearest(BIG, [1.0, 0.0], 1)
    assert source.loads[BIG] == 2 and cache.is_resident(BIG) and hits[0].episode_id == "d0000#0"


async def test_an_eviction_of_a_too_large_scope_lets_one_load_try_again() -> None:
    source = PagedSource()
    source.rows[BIG] = vectors(100)
    cache = ResidentScopes(
        FakeVectorIndex(), source, dimension=2, max_bytes=scope_bytes(ROOM), lock=asyncio.Lock()
    )
    await cache.nearest(BIG, [1.0, 0.0], 1)
    cache.evict(lambda scope: scope.tenant_id == "t")  # the tenant's caches went stale
    assert not cache.too_large(BIG)
    await cache.nearest(BIG, [1.0, 0.0], 1)
    await cache.nearest(BIG, [1.0, 0.0], 1)
    assert source.loads[BIG] == 2 and cache.too_large(BIG)
