"""The `ChangeLog` and `ChangeFeed` ports (the change feed the tail reads and the pruner
prunes, store/feed.py, and `FakeChangeFeed` of tests/fakes_feed.py): rows written as a write
commits them, read back after a seq in seq order with their origin and their change; an
erased user's rows giving way to one marker; pruning through a seq under a mark that never
goes down; a wake-up on the feed's channel once a write is published.

Rows are written as the group-commit writer writes them (`append`, in a transaction of the
writer) on SQL, by `record` on the fake. Each test names its own origins and reads back only
their rows; what holds for the whole feed (head, prune, the pruned mark) is stated over a
database of its own (`own_database`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import Connection

from episodic.domain.changes import (
    AgentChanged,
    CachesStale,
    Change,
    DocumentsRemoved,
    EpisodesRemoved,
    EpisodeVectors,
    KnowledgeVectors,
    MemoriesRemoved,
    MemoryVectors,
    MessageRetracted,
    ScopeChanged,
    UserErased,
)
from episodic.domain.erasure import user_hash
from episodic.domain.ports.changes import ChangeFeed, ChangeLog, FeedEntry
from episodic.domain.recall import Scope
from episodic.store.feed import CHANNEL, SqlChangeFeed, append
from episodic.store.signals import LocalSignals
from tests.conftest import unique
from tests.contracts.conftest import World, own_database
from tests.fakes_feed import FakeChangeFeed


class Both(ChangeLog, ChangeFeed, Protocol):
    """The feed as one process has it: tailed, pruned and published to."""


@dataclass
class Feed:
    port: Both
    write: Callable[[Sequence[Change], str], Awaitable[bool]]  # (changes, origin): any rows?

    async def mine(self, *origins: str, after: int = 0) -> list[FeedEntry]:
        """Every row these origins wrote after `after`, read a page of 100 at a time."""
        found: list[FeedEntry] = []
        while page := (await self.port.after(after, 100)).entries:
            found += [e for e in page if e.origin in origins]
            after = page[-1].seq
        return found


def feed_of(world: World, origin: str = "", signals: LocalSignals | None = None) -> Feed:
    """The world's feed, as the process named `origin` (a new one unless named) has it."""
    origin = origin or unique("origin")
    if world.kind == "fake":
        fake = FakeChangeFeed(origin, signals)

        async def record(changes: Sequence[Change], by: str) -> bool:
            return fake.record(changes, by)

        return Feed(fake, record)
    database, writer = world.database, world.writer
    assert database is not None and writer is not None
    sql = SqlChangeFeed(database, writer, origin=origin, signals=signals or LocalSignals())

    async def inserted(changes: Sequence[Change], by: str) -> bool:
        def op(conn: Connection) -> bool:
            return append(conn, changes, by)

        return await writer.run(op)

    return Feed(sql, inserted)


def scope(world: World, user_id: str = "mary", agent_id: str = "helper") -> Scope:
    return Scope(world.tenant, agent_id, user_id)


def seqs(entries: Sequence[FeedEntry]) -> list[int]:
    return [e.seq for e in entries]


async def test_each_entry_carries_its_origin_and_its_change_without_the_vectors(world: World) -> None:
    feed, mary = feed_of(world), scope(world)
    here, there = unique("origin"), unique("origin")
    assert await feed.write(
        [
            EpisodeVectors(mary, "ep1", ["ep1#0"], [[1.0, 0.0]]),
            ScopeChanged(mary),
            MessageRetracted(mary, "ep2"),
            MemoryVectors(mary, ["m1", "m2"], [[1.0, 0.0], [0.0, 1.0]]),
        ],
        here,
    )
    assert await feed.write(
        [AgentChanged(world.tenant, "helper"), KnowledgeVectors(mary, "doc1", ["doc1#0"], [[0.0, 1.0]])],
        there,
    )
    entries = await feed.mine(here, there)
    assert [(e.origin, e.change, e.refused) for e in entries] == [
        (here, EpisodeVectors(mary, "ep1", [], []), ""),
        (here, ScopeChanged(mary), ""),
        (here, MessageRetracted(mary, "ep2"), ""),
        (here, MemoryVectors(mary, ["m1", "m2"], []), ""),
        (there, AgentChanged(world.tenant, "helper"), ""),
        (there, KnowledgeVectors(mary, "doc1", [], []), ""),
    ]
    assert seqs(entries) == sorted(set(seqs(entries)))  # in the order written, each its own seq


async def test_a_removal_across_scopes_becomes_one_entry_per_scope(world: World) -> None:
    feed, origin = feed_of(world), unique("origin")
    mary, john = scope(world, "mary"), scope(world, "john")
    await feed.write(
        [
            EpisodesRemoved([(mary, "e1"), (john, "e2"), (mary, "e3")]),
            MemoriesRemoved([(john, "m1")]),
            DocumentsRemoved([(mary, "d1"), (john, "d2")]),
        ],
        origin,
    )
    assert [e.change for e in await feed.mine(origin)] == [
        EpisodesRemoved([(mary, "e1"), (mary, "e3")]),
        EpisodesRemoved([(john, "e2")]),
        MemoriesRemoved([(john, "m1")]),
        DocumentsRemoved([(mary, "d1")]),
        DocumentsRemoved([(john, "d2")]),
    ]


async def test_a_write_with_nothing_for_the_feed_adds_no_row(world: World) -> None:
    feed, origin = feed_of(world), unique("origin")
    assert await feed.write([], origin) is False
    assert await feed.write([CachesStale(world.tenant)], origin) is False  # this process's own conclusion
    assert await feed.mine(origin) == []
    assert await feed.write([ScopeChanged(scope(world))], origin) is True
    assert len(await feed.mine(origin)) == 1


async def test_an_erased_users_rows_give_way_to_one_user_erased_marker(world: World) -> None:
    feed, before, erasing = feed_of(world), unique("origin"), unique("origin")
    mary, john = scope(world, "mary"), scope(world, "john")
    namesake = Scope(unique("tenant"), "helper", "mary")  # another tenant's mary stays
    await feed.write([ScopeChanged(mary), ScopeChanged(john), MemoryVectors(mary, ["m1"], [[1.0]])], before)
    await feed.write([ScopeChanged(namesake), AgentChanged(world.tenant, "helper")], before)
    hashed = user_hash(world.tenant, "mary")
    await feed.write(
        [EpisodesRemoved([(mary, "e1"), (john, "e2")]), UserErased(world.tenant, hashed)], erasing
    )
    assert [(e.origin, e.change) for e in await feed.mine(before, erasing)] == [
        (before, ScopeChanged(john)),
        (before, ScopeChanged(namesake)),
        (before, AgentChanged(world.tenant, "helper")),  # names no user
        (erasing, EpisodesRemoved([(john, "e2")])),
        (erasing, UserErased(world.tenant, hashed)),
    ]


async def test_published_wakes_whoever_listens_on_the_feeds_channel(world: World) -> None:
    signals, heard, elsewhere = LocalSignals(), list[str](), list[str]()
    signals.subscribe(CHANNEL, heard.append)
    signals.subscribe(f"{CHANNEL}_not", elsewhere.append)
    feed = feed_of(world, signals=signals)
    feed.port.published()
    feed.port.published()
    await asyncio.sleep(0)  # LocalSignals calls back on the next turn of the loop
    origin = feed.port.origin
    assert heard == [origin, origin] and elsewhere == []  # a wake-up naming who wrote, never the change


async def test_a_feed_is_named_by_its_process(world: World) -> None:
    name = unique("replica")
    feed = feed_of(world, origin=name)
    assert feed.port.origin == name
    await feed.write([ScopeChanged(scope(world))], feed.port.origin)
    (entry,) = await feed.mine(name)
    assert entry.origin == name


# --- the whole feed: a database of its own ---------------------------------------------------


@own_database
async def test_rows_after_a_seq_come_in_seq_order_at_most_limit(world: World) -> None:
    feed, origin = feed_of(world), unique("origin")
    users = [f"u{n}" for n in range(5)]
    await feed.write([ScopeChanged(scope(world, u)) for u in users[:3]], origin)
    await feed.write([ScopeChanged(scope(world, u)) for u in users[3:]], origin)
    every = (await feed.port.after(0, 100)).entries
    assert [e.change for e in every] == [ScopeChanged(scope(world, u)) for u in users]
    assert seqs(every) == sorted(seqs(every)) and len(set(seqs(every))) == 5
    first = (await feed.port.after(0, 2)).entries
    assert first == every[:2]
    assert (await feed.port.after(first[-1].seq, 2)).entries == every[2:4]
    assert (await feed.port.after(every[3].seq, 2)).entries == every[4:]
    assert (await feed.port.after(every[-1].seq, 2)).entries == []
    assert (await feed.port.after(every[1].seq - 1, 1)).entries == [every[1]]  # strictly after


@own_database
async def test_head_is_the_newest_seq_and_0_while_the_feed_holds_no_row(world: World) -> None:
    feed, origin = feed_of(world), unique("origin")
    assert await feed.port.head() == 0
    await feed.write([ScopeChanged(scope(world, "mary")), ScopeChanged(scope(world, "john"))], origin)
    newest = seqs((await feed.port.after(0, 100)).entries)[-1]
    assert await feed.port.head() == newest
    await feed.write([AgentChanged(world.tenant, "helper")], origin)
    assert await feed.port.head() > newest
    assert await feed.port.head() == seqs((await feed.port.after(0, 100)).entries)[-1]


@own_database
async def test_prune_removes_rows_through_a_seq_says_how_many_and_raises_the_mark(world: World) -> None:
    feed, origin = feed_of(world), unique("origin")
    await feed.write([ScopeChanged(scope(world, f"u{n}")) for n in range(4)], origin)
    page = await feed.port.after(0, 100)
    assert page.pruned_through == 0
    s1, s2, s3, s4 = seqs(page.entries)
    assert await feed.port.prune(s2) == 2
    page = await feed.port.after(0, 100)
    assert (page.pruned_through, seqs(page.entries)) == (s2, [s3, s4])
    assert await feed.port.prune(s1) == 0  # nothing left there: the mark stays where it was
    assert (await feed.port.after(0, 100)).pruned_through == s2
    assert await feed.port.prune(s4) == 2
    page = await feed.port.after(0, 100)
    assert (page.pruned_through, page.entries) == (s4, [])
    assert await feed.port.head() == 0  # the head is the newest row held


@own_database
async def test_seqs_go_on_after_a_prune_and_the_mark_is_told_with_every_page(world: World) -> None:
    feed, origin = feed_of(world), unique("origin")
    await feed.write([ScopeChanged(scope(world, "mary"))], origin)
    (gone,) = seqs((await feed.port.after(0, 100)).entries)
    assert await feed.port.prune(gone) == 1
    await feed.write([ScopeChanged(scope(world, "john"))], origin)
    page = await feed.port.after(gone, 100)
    assert page.pruned_through == gone
    assert [(e.change, e.seq > gone) for e in page.entries] == [(ScopeChanged(scope(world, "john")), True)]
    beyond = await feed.port.after(gone + 1000, 100)
    assert (beyond.pruned_through, beyond.entries) == (gone, [])
