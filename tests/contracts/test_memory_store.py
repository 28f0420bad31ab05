"""The `MemoryStore` port: writes in one transaction, reads by id, pages newest first, the
live duplicates merging looks for, an episode's pending memories, recall marks; per tenant.

The expiry sweep serves the whole cluster (the retention job): over a database of its own,
it takes every tenant's memories past their expiry, and those unused for longer than their
own agent's retention_days.

The filter: `domain/memory_filter.passes` is the rule. Each implementation's `page` and
`among` must return exactly the memories it passes, over a grid of memories and filters:
this is what holds the SQL WHERE clause (store/memories.py `_filtered`) to the rule."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

from episodic.domain.changes import NO_CHANGES
from episodic.domain.memories import Memory, MemoryKind, MemoryOrigin, MemoryState, Source, text_key
from episodic.domain.memory_filter import passes
from episodic.domain.memory_merge import frame_key
from episodic.domain.ports.memories import MemoryFilter, MemoryWrite
from episodic.domain.recall import Scope, Vector
from episodic.errors import NotFound
from tests.conftest import unique
from tests.contracts.conftest import World, own_database

FACT, EVENT, PREFERENCE = MemoryKind.FACT, MemoryKind.EVENT, MemoryKind.PREFERENCE
PENDING, PROMOTED = MemoryState.PENDING, MemoryState.PROMOTED


def new_scope(world: World) -> Scope:
    return Scope(world.tenant, unique("agent"), "u1")


def ids(memories: Sequence[Memory]) -> list[str]:
    return [m.memory_id for m in memories]


def floats(vector: Vector | None) -> list[float] | None:
    return None if vector is None else [float(x) for x in vector]


# --- writes and reads by id ---------------------------------------------------------------


async def test_a_memory_round_trips_whole_with_its_vector(world: World) -> None:
    scope = new_scope(world)
    full = world.memory(
        scope, "Lives in Paris", kind=EVENT, topics=("home", "city"), entities=("Paris",),
        source=Source(MemoryOrigin.EXTRACTED, "ep1", 3, 5), event_time=world.clock() - timedelta(days=2),
        expires_at=world.clock() + timedelta(days=1), last_recalled_at=world.clock(), merge_count=2,
        fingerprint="f" * 16, superseded_by="m-newer",
    )  # fmt: skip
    await world.remember((full, [0.5, 0.25]))
    assert await world.memories.get(world.tenant, full.memory_id) == full
    assert await world.memories.get_many(world.tenant, [full.memory_id, "missing"]) == {full.memory_id: full}
    vectors = await world.memories.vectors_of(world.tenant, [full.memory_id, "missing"])
    assert {k: floats(v) for k, v in vectors.items()} == {full.memory_id: [0.5, 0.25]}


async def test_memories_are_per_tenant(world: World) -> None:
    m = world.memory(new_scope(world))
    await world.remember((m, [1.0, 0.0]))
    other = unique("tenant")
    assert await world.memories.get(other, m.memory_id) is None
    assert await world.memories.get_many(other, [m.memory_id]) == {}
    assert await world.memories.vectors_of(other, [m.memory_id]) == {}
    elsewhere = m.scope._replace(tenant_id=other)
    assert await world.memories.page(elsewhere, MemoryFilter(), world.clock(), None, 10) == []


async def test_a_replace_keeps_or_swaps_the_vector_and_a_delete_removes(world: World) -> None:
    scope = new_scope(world)
    kept, swapped, gone, no_vector = (world.memory(scope) for _ in range(4))
    await world.remember((kept, [1.0, 0.0]), (swapped, [1.0, 0.0]), (gone, [1.0, 0.0]), no_vector)
    edited = [dataclasses.replace(m, text="edited " + m.text) for m in (kept, swapped)]
    missing = world.memory(scope)  # a row gone meanwhile stays gone
    change = MemoryWrite(
        replace=[(edited[0], None), (edited[1], [0.0, 1.0]), (missing, [1.0, 1.0])],
        delete=[(world.tenant, gone.memory_id), (world.tenant, "never-was")],
    )
    await world.memories.write(change, NO_CHANGES)
    everything = [kept.memory_id, swapped.memory_id, gone.memory_id, missing.memory_id, no_vector.memory_id]
    assert await world.memories.get_many(world.tenant, everything) == {
        m.memory_id: m for m in [*edited, no_vector]
    }
    vectors = await world.memories.vectors_of(world.tenant, everything)
    assert {k: floats(v) for k, v in vectors.items()} == {
        kept.memory_id: [1.0, 0.0],
        swapped.memory_id: [0.0, 1.0],
    }


async def test_a_write_for_a_missing_episode_is_not_found_and_writes_nothing(world: World) -> None:
    scope = new_scope(world)
    first = world.memory(scope)
    await world.remember(first)
    later = world.memory(scope)
    change = MemoryWrite(
        insert=[(later, None)],
        replace=[(dataclasses.replace(first, text="changed"), None)],
        delete=[(world.tenant, first.memory_id)],
        episode=(world.tenant, "no-such-episode"),
    )
    with pytest.raises(NotFound):
        await world.memories.write(change, NO_CHANGES)
    assert await world.memories.get_many(world.tenant, [first.memory_id, later.memory_id]) == {
        first.memory_id: first
    }


async def test_an_episodes_pending_memories_oldest_first_with_their_vectors(world: World) -> None:
    agent = await world.agent()
    episode = await world.episode(agent, "u1")
    scope = Scope(world.tenant, agent.agent_id, "u1")
    held = [world.memory(scope, state=PENDING, episode_id=episode.episode_id) for _ in range(2)]
    world.later()
    newest = world.memory(scope, state=PENDING, episode_id=episode.episode_id)
    promoted = world.memory(scope, episode_id=episode.episode_id)
    elsewhere = world.memory(scope, state=PENDING, episode_id="another-episode")
    change = MemoryWrite(
        insert=[
            (newest, [1.0, 0.0]),
            (held[1], None),
            (held[0], [0.0, 1.0]),
            (promoted, None),
            (elsewhere, None),
        ],
        episode=(world.tenant, episode.episode_id),
    )
    await world.memories.write(change, NO_CHANGES)
    pending = await world.memories.pending(world.tenant, episode.episode_id)
    vectors = {m.memory_id: floats(v) for m, v in change.insert}
    in_order = [*sorted(held, key=lambda m: m.memory_id), newest]  # two made at one instant: by id
    assert [(m, floats(v)) for m, v in pending] == [(m, vectors[m.memory_id]) for m in in_order]
    assert await world.memories.pending(unique("tenant"), episode.episode_id) == []


async def test_touch_records_a_recall(world: World) -> None:
    scope = new_scope(world)
    touched, untouched = world.memory(scope), world.memory(scope)
    await world.remember(touched, untouched)
    at = world.clock() + timedelta(hours=1)
    await world.memories.touch(world.tenant, [touched.memory_id, "missing"], at)
    await world.memories.touch(unique("tenant"), [untouched.memory_id], at)  # another tenant's: nothing
    found = await world.memories.get_many(world.tenant, [touched.memory_id, untouched.memory_id])
    assert (found[touched.memory_id].last_recalled_at, found[untouched.memory_id].last_recalled_at) == (
        at,
        None,
    )


async def test_same_text_and_same_frame_find_the_live_promoted_memories_oldest_first(world: World) -> None:
    scope = new_scope(world)
    text = "Prefers tea"
    live = [world.memory(scope, text, kind=PREFERENCE, entities=("tea",))]
    world.later()
    live.append(world.memory(scope, "prefers TEA.", kind=PREFERENCE, entities=("tea",)))  # same key
    dead = [
        world.memory(scope, text, kind=PREFERENCE, entities=("tea",), state=PENDING, episode_id="e"),
        world.memory(scope, text, kind=PREFERENCE, entities=("tea",), superseded_by="x"),
        world.memory(scope, text, kind=PREFERENCE, entities=("tea",), expires_at=world.clock()),
        world.memory(new_scope(world), text, kind=PREFERENCE, entities=("tea",)),  # another scope
    ]
    await world.remember(*dead, *live)
    assert await world.memories.same_text(scope, [text_key(text), text_key("other")]) == live
    frame = frame_key(PREFERENCE.value, text, ("tea",))
    framed = [m for m in live if frame_key(m.kind.value, m.text, m.entities) == frame]
    assert framed and await world.memories.same_frame(scope, [frame]) == framed
    assert await world.memories.same_text(scope, []) == []


@own_database
async def test_the_expiry_sweep_judges_each_tenants_memories_by_its_own_agents_retention(
    world: World,
) -> None:
    agent = await world.agent(retention_days=30)
    keeper = await world.agent(unique("tenant"), agent.agent_id, retention_days=0)  # keeps them
    mine = world.memory(Scope(world.tenant, agent.agent_id, "u1"))
    elsewhere = Scope(keeper.tenant_id, agent.agent_id, "u1")
    theirs = world.memory(elsewhere, memory_id=mine.memory_id)  # the same agent and memory ids
    dated = world.memory(elsewhere, expires_at=world.clock() + timedelta(days=1))
    recalled = world.memory(Scope(world.tenant, agent.agent_id, "u2"))
    await world.remember(mine, theirs, dated, recalled)
    assert await world.memories.expired(world.clock(), 10) == []
    world.later(timedelta(days=20))
    await world.memories.touch(world.tenant, [recalled.memory_id], world.clock())
    world.later(timedelta(days=11))  # `mine` unused for 31 days; `recalled` recalled 11 days ago
    assert await world.memories.expired(world.clock(), 10) == [dated, mine]  # past expiry first
    assert await world.memories.expired(world.clock(), 1) == [dated]


# --- the filter ---------------------------------------------------------------------------


def grid(world: World, scope: Scope) -> list[Memory]:
    """Memories that differ in every way the filter looks at, some made at one instant."""
    now = world.clock()
    made: list[Memory] = []

    def add(**changes: Any) -> None:
        made.append(world.memory(scope, **changes))

    add()
    add(kind=PREFERENCE, topics=("food",), entities=("tea",))
    add(kind=EVENT, event_time=now - timedelta(days=30), topics=("travel", "food"))
    add(kind=EVENT, entities=("Paris", "tea"))  # an event with no event_time: its creation
    add(kind=EVENT, event_time=now + timedelta(days=3))
    add(state=PENDING, episode_id="ep-a", topics=("travel",))
    add(source=Source(MemoryOrigin.EXTRACTED, "ep-a", 1, 2), kind=PREFERENCE)
    add(source=Source(MemoryOrigin.EXTRACTED, "ep-b", 1, 2), superseded_by="newer", topics=("food",))
    add(expires_at=now + timedelta(days=20))
    add(expires_at=now + timedelta(days=1), entities=("Paris",))  # expired at the time of reading
    add(expires_at=now)
    for n in range(4):  # a second instant, then one a day for three days
        world.later(timedelta(days=1) if n else timedelta(seconds=1))
        add(kind=(FACT, EVENT, PREFERENCE, FACT)[n], topics=(("food",), (), ("work",), ("travel",))[n])
    return made


def filters(now: datetime) -> list[MemoryFilter]:
    return [
        MemoryFilter(),
        MemoryFilter(kinds=frozenset({EVENT})),
        MemoryFilter(kinds=frozenset({FACT, PREFERENCE})),
        MemoryFilter(state=PENDING),
        MemoryFilter(state=PROMOTED, include_superseded=True),
        MemoryFilter(include_superseded=True),
        MemoryFilter(episode_id="ep-a"),
        MemoryFilter(episode_id="ep-b", include_superseded=True),
        MemoryFilter(after=now),
        MemoryFilter(before=now),
        MemoryFilter(after=now - timedelta(days=31), before=now + timedelta(days=2)),
        MemoryFilter(topics=frozenset({"food"})),
        MemoryFilter(topics=frozenset({"food", "work"}), include_superseded=True),
        MemoryFilter(entities=frozenset({"tea"})),
        MemoryFilter(entities=frozenset({"Paris"}), topics=frozenset({"nothing"})),
        MemoryFilter(kinds=frozenset({EVENT}), topics=frozenset({"food", "travel"}), after=now),
    ]


async def test_page_and_among_return_exactly_what_the_domain_rule_passes(world: World) -> None:
    scope = new_scope(world)
    start = world.clock()
    made = grid(world, scope)
    neighbours = [world.memory(scope._replace(user_id="u2")), world.memory(new_scope(world))]
    await world.remember(*made, *neighbours)
    read_at = start + timedelta(days=2)
    every_id = ids(made + neighbours)
    for where in filters(start):
        wanted = sorted(
            (m for m in made if passes(m, scope, where, read_at)),
            key=lambda m: (m.created_at, m.memory_id),
            reverse=True,
        )
        assert ids(await world.memories.page(scope, where, read_at, None, 100)) == ids(wanted), where
        among = await world.memories.among(scope, every_id, where, read_at)
        assert sorted(among) == sorted(ids(wanted)), where
        paged: list[Memory] = []
        after: tuple[datetime, str] | None = None
        while page := await world.memories.page(scope, where, read_at, after, 3):
            paged += page
            after = (page[-1].created_at, page[-1].memory_id)
        assert ids(paged) == ids(wanted), where
