"""The change feed's rules without a database: how changes become rows and back, how the
tail applies, refuses and resyncs, when the pruner prunes, and how the per-scope index
cache loads, evicts and survives a change racing a load."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from episodic.domain.changes import (
    AgentChanged,
    CachesStale,
    Change,
    EpisodesRemoved,
    EpisodeVectors,
    MemoriesRemoved,
    MemoryVectors,
    ScopeChanged,
    UserErased,
)
from episodic.domain.erasure import user_hash
from episodic.domain.ports.changes import FeedEntry, FeedPage
from episodic.domain.recall import Scope, Vector
from episodic.state.index_cache import ResidentScopes
from episodic.store.feed import FEED_VERSION, FeedRow, _entry, decode, encode
from episodic.store.signals import LocalSignals
from episodic.workers.feed import FeedPruner, FeedTail
from tests.fakes import FakeVectorIndex
from tests.fakes_feed import FakeChangeFeed

MARY, JOHN = Scope("t", "helper", "mary"), Scope("t", "helper", "john")


def rows_back(changes: Sequence[Change]) -> list[Change]:
    rows, _ = encode(changes)
    return [
        decode(FeedRow(i + 1, FEED_VERSION, r["kind"], r["tenant_id"], r["body"], "x"))
        for i, r in enumerate(rows)
    ]


# --- rows ----------------------------------------------------------------------------------


def test_every_change_survives_the_round_trip_without_its_vectors() -> None:
    changes: list[Change] = [
        EpisodeVectors(MARY, "ep1", ["ep1#0"], [[1.0, 0.0]]),
        ScopeChanged(MARY),
        MemoryVectors(MARY, ["m1", "m2"], [[1.0, 0.0], [0.0, 1.0]]),
        AgentChanged("t", "helper"),
    ]
    assert rows_back(changes) == [
        EpisodeVectors(MARY, "ep1", [], []),
        ScopeChanged(MARY),
        MemoryVectors(MARY, ["m1", "m2"], []),
        AgentChanged("t", "helper"),
    ]


def test_removals_across_scopes_become_one_row_per_scope() -> None:
    back = rows_back([EpisodesRemoved([(MARY, "e1"), (JOHN, "e2"), (MARY, "e3")])])
    assert back == [EpisodesRemoved([(MARY, "e1"), (MARY, "e3")]), EpisodesRemoved([(JOHN, "e2")])]


def test_an_erasure_writes_a_marker_instead_of_rows_that_name_the_user() -> None:
    hashed = user_hash("t", "mary")
    rows, erased = encode(
        [
            EpisodesRemoved([(MARY, "e1")]),
            MemoriesRemoved([(MARY, "m1")]),
            ScopeChanged(JOHN),
            UserErased("t", hashed),
        ]
    )
    assert erased == {("t", hashed)}
    assert [r["kind"] for r in rows] == ["scope_changed", "user_erased"]
    assert not any("mary" in r["body"] for r in rows)


def test_a_row_of_a_newer_format_or_unknown_kind_is_refused_not_skipped() -> None:
    newer = _entry(FeedRow(7, FEED_VERSION + 1, "scope_changed", "t", "{}", "x"))
    unknown = _entry(FeedRow(8, FEED_VERSION, "teleported", "t", "{}", "x"))
    damaged = _entry(FeedRow(9, FEED_VERSION, "scope_changed", "t", "{not json", "x"))
    assert newer.change is None and "format" in newer.refused
    assert unknown.change is None and "teleported" in unknown.refused
    assert damaged.change is None and "unreadable" in damaged.refused


# --- the tail ------------------------------------------------------------------------------


class FakeOwner:
    def __init__(self) -> None:
        self.applied: list[Change] = []
        self.resyncs = 0

    async def apply_foreign(self, changes: Sequence[Change]) -> None:
        self.applied.extend(changes)

    def resync(self) -> None:
        self.resyncs += 1


class NoSignals:
    def subscribe(self, channel: str, callback: object) -> None:
        return None

    def notify(self, channel: str, payload: str) -> None:
        return None


def tail_over(log: FakeChangeFeed, owner: FakeOwner, health: list[bool]) -> FeedTail:
    return FeedTail(feed=log, owner=owner, signals=NoSignals(), healthy=health.append, batch=2)  # type: ignore[arg-type]


async def test_the_tail_applies_other_replicas_changes_in_order_and_skips_its_own() -> None:
    log, owner = FakeChangeFeed(origin="me"), FakeOwner()
    log.entries = [
        FeedEntry(1, "other", ScopeChanged(MARY)),
        FeedEntry(2, "me", ScopeChanged(JOHN)),
        FeedEntry(3, "other", AgentChanged("t", "helper")),
    ]
    tail = tail_over(log, owner, [])
    assert await tail.catch_up() == 2
    assert owner.applied == [ScopeChanged(MARY), AgentChanged("t", "helper")] and tail.position == 3


async def test_the_tail_reads_the_feed_for_another_replicas_commit_but_not_for_its_own() -> None:
    signals = LocalSignals()
    mine, theirs = (
        FakeChangeFeed(origin="me", signals=signals),
        FakeChangeFeed(origin="them", signals=signals),
    )
    reads: list[int] = []
    read, woken = mine.after, asyncio.Event()

    async def counted(seq: int, limit: int) -> FeedPage:
        reads.append(seq)
        woken.set()
        return await read(seq, limit)

    mine.after = counted  # type: ignore[method-assign]
    tail = FeedTail(feed=mine, owner=FakeOwner(), signals=signals, poll_seconds=3600)  # type: ignore[arg-type]
    tail.listen()
    await tail.start()
    try:
        mine.published()  # its own write: applied already, nothing to read
        for _ in range(5):
            await asyncio.sleep(0)
        assert reads == []
        theirs.published()
        async with asyncio.timeout(5):
            await woken.wait()
    finally:
        await tail.stop()


async def test_a_row_the_tail_cannot_read_stops_it_there_until_it_can() -> None:
    log, owner, health = FakeChangeFeed(origin="me"), FakeOwner(), list[bool]()
    log.entries = [
        FeedEntry(1, "other", ScopeChanged(MARY)),
        FeedEntry(2, "other", None, "change feed row 2 has format 9"),
        FeedEntry(3, "other", ScopeChanged(JOHN)),
    ]
    tail = tail_over(log, owner, health)
    await tail.catch_up()
    await tail.catch_up()
    assert tail.position == 1 and owner.applied == [ScopeChanged(MARY)] and health == [False]
    log.entries[1] = FeedEntry(2, "other", AgentChanged("t", "helper"))  # this release can read it now
    await tail.catch_up()
    assert tail.position == 3 and owner.applied[-1] == ScopeChanged(JOHN) and health == [False, True]


async def test_a_tail_behind_the_pruned_mark_resyncs_everything_then_goes_on() -> None:
    log, owner = FakeChangeFeed(origin="me"), FakeOwner()
    log.entries = [FeedEntry(5, "other", ScopeChanged(MARY))]
    log.pruned_through = 4
    tail = tail_over(log, owner, [])
    await tail.catch_up()
    assert owner.resyncs == 1 and tail.position == 5 and owner.applied == [ScopeChanged(MARY)]


async def test_the_pruner_deletes_only_rows_older_than_the_retention_on_its_own_clock() -> None:
    log, now = FakeChangeFeed(origin="me"), [0.0]
    log.entries = [FeedEntry(i, "x", ScopeChanged(MARY)) for i in (1, 2)]
    pruner = FeedPruner(feed=log, retention_seconds=60, clock=lambda: now[0])
    assert await pruner.prune() == 0  # head 2 seen at t=0
    log.entries.append(FeedEntry(3, "x", ScopeChanged(MARY)))
    now[0] = 30
    assert await pruner.prune() == 0  # head 3 seen at t=30
    now[0] = 61
    assert await pruner.prune() == 2 and [e.seq for e in log.entries] == [3]


# --- the per-scope index cache -------------------------------------------------------------


class Source:
    def __init__(self) -> None:
        self.rows: dict[Scope, dict[str, Vector]] = {}
        self.reads = 0
        self.gate: asyncio.Event | None = None

    async def scope_vectors(self, scope: Scope) -> tuple[list[str], list[Vector]]:
        self.reads += 1
        held = dict(self.rows.get(scope, {}))  # what SQL held when the read began
        if self.gate is not None:
            await self.gate.wait()
            self.gate = None
        return list(held), list(held.values())

    async def item_vectors(self, scope: Scope, items: Sequence[str]) -> tuple[list[str], list[Vector]]:
        held = {k: v for k, v in self.rows.get(scope, {}).items() if k.split("#")[0] in items}
        return list(held), list(held.values())


def cache(source: Source, max_bytes: int = 1 << 20) -> ResidentScopes:
    return ResidentScopes(FakeVectorIndex(), source, dimension=2, max_bytes=max_bytes, lock=asyncio.Lock())


async def test_a_scope_loads_once_on_first_use_even_for_many_callers_and_when_empty() -> None:
    source = Source()
    source.rows[MARY] = {"e1#0": [1.0, 0.0]}
    resident = cache(source)
    await asyncio.gather(*(resident.ensure(MARY) for _ in range(5)), resident.ensure(JOHN))
    assert source.reads == 2 and resident.keys(MARY) == {"e1#0"} and resident.is_resident(JOHN)
    await resident.ensure(JOHN)
    assert source.reads == 2  # an empty scope is remembered too


async def test_the_least_recently_used_scopes_go_when_the_cache_is_over_budget() -> None:
    source = Source()
    for scope in (MARY, JOHN):
        source.rows[scope] = {f"e{i}#0": [1.0, float(i)] for i in range(10)}
    resident = cache(source, max_bytes=2000)  # room for about one scope of ten vectors
    await resident.ensure(MARY)
    await resident.ensure(JOHN)
    assert resident.is_resident(JOHN) and not resident.is_resident(MARY) and not resident.keys(MARY)
    assert resident.held_bytes <= 2000 and resident.evictions == 1


async def test_a_change_landing_while_a_scope_loads_makes_the_load_read_again() -> None:
    source = Source()
    source.rows[MARY] = {"e1#0": [1.0, 0.0]}
    resident = cache(source)
    source.gate = asyncio.Event()
    loading = asyncio.create_task(resident.ensure(MARY))
    while not source.reads:  # noqa: ASYNC110 - yields until the task has run to the fake's read
        await asyncio.sleep(0)
    source.rows[MARY]["e2#0"] = [0.0, 1.0]  # committed meanwhile; the owner says so:
    assert resident.touched(MARY) is False
    source.gate.set()
    await loading
    assert resident.keys(MARY) == {"e1#0", "e2#0"} and source.reads == 2


async def test_a_resident_scope_is_refreshed_from_the_source_and_can_be_evicted_by_predicate() -> None:
    source = Source()
    source.rows[MARY] = {"e1#0": [1.0, 0.0]}
    resident = cache(source)
    await resident.ensure(MARY)
    source.rows[MARY] = {"e1#0": [1.0, 0.0], "e2#0": [0.0, 1.0], "e2#1": [1.0, 1.0]}
    await resident.refresh(MARY, ["e2"], lambda index: index.remove(MARY, ["e2#0", "e2#1"]))
    assert resident.keys(MARY) == {"e1#0", "e2#0", "e2#1"}
    await resident.refresh(JOHN, ["e9"], lambda index: pytest.fail("JOHN is not resident"))
    assert resident.evict(lambda scope: scope.user_id == "mary") == 1 and not resident.is_resident(MARY)


def test_a_stale_tenant_change_names_every_key_of_that_tenant() -> None:
    from episodic.domain.changes import stale_keys

    held = [("t", "e1"), ("u", "e2"), ("t", "e3")]
    assert stale_keys(CachesStale("t"), held) == [("t", "e1"), ("t", "e3")]
    assert stale_keys(CachesStale(None), held) == held
