"""The SQL memory and session data stores, and erasure of both, on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from episodic.domain.changes import NO_CHANGES
from episodic.domain.erasure import Audit
from episodic.domain.memories import (
    Memory,
    MemoryKind,
    MemoryOrigin,
    MemoryState,
    SessionData,
    Source,
    text_key,
)
from episodic.domain.memory_merge import frame_key
from episodic.domain.model import Agent, Episode, EpisodeState, JsonObject, MemoryConfig
from episodic.domain.ports.memories import MemoryFilter, MemoryWrite
from episodic.domain.recall import Scope, Vector
from episodic.errors import NotFound
from episodic.store import memories as memory_module
from episodic.store import schema as s
from episodic.store.database import Database, open_database
from episodic.store.erasure import SqlEraser
from episodic.store.memories import SqlMemoryStore
from episodic.store.rows import agent_values, episode_values
from episodic.store.session_data import SqlSessionDataStore
from episodic.store.vector_sources import SqlMemoryVectors
from episodic.store.writer import GroupCommitWriter
from tests.conftest import unique

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
NOW = T0 + timedelta(days=10)
EVERYTHING = MemoryFilter()
FACT, EVENT, PREFERENCE = MemoryKind.FACT, MemoryKind.EVENT, MemoryKind.PREFERENCE
PENDING, PROMOTED = MemoryState.PENDING, MemoryState.PROMOTED


@dataclass
class Db:
    database: Database
    writer: GroupCommitWriter
    model: str

    def memories(self, model: str = "") -> SqlMemoryStore:
        return SqlMemoryStore(
            self.database, self.writer, embedding_model=model or self.model, clock=lambda: NOW
        )

    async def add_agent(self, tenant_id: str, agent_id: str, retention_days: int = 90) -> None:
        memory = MemoryConfig(retention_days=retention_days)
        agent = Agent(tenant_id, agent_id, "A", "", "gpt-4o", "o200k_base", False, memory, T0, T0)
        await self.writer.run(lambda conn: conn.execute(s.agents.insert(), agent_values(agent)))

    async def add_episode(self, scope: Scope, episode_id: str) -> None:
        e = Episode(
            scope.tenant_id,
            episode_id,
            scope.agent_id,
            scope.user_id,
            EpisodeState.OPEN,
            "o200k_base",
            T0,
            T0,
        )
        await self.writer.run(lambda conn: conn.execute(s.episodes.insert(), episode_values(e)))


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Db]:
    database = open_database(database_url)
    writer = GroupCommitWriter(database, workers=2)
    writer.start()
    try:
        yield Db(database, writer, unique("model"))
    finally:
        await writer.stop()
        await database.dispose()


@pytest.fixture
def scope() -> Scope:
    return Scope(unique("tenant"), unique("agent"), "u1")


def memory(scope: Scope, memory_id: str, text: str, at: datetime = T0, **changes: object) -> Memory:
    m = Memory(
        scope.tenant_id, memory_id, scope.agent_id, scope.user_id, text, FACT,
        Source(MemoryOrigin.CLIENT), PROMOTED, at, at,
    )  # fmt: skip
    return dataclasses.replace(m, **changes)  # type: ignore[arg-type]


async def insert(store: SqlMemoryStore, *rows: Memory | tuple[Memory, Vector | None]) -> None:
    pairs = [r if isinstance(r, tuple) else (r, None) for r in rows]
    await store.write(MemoryWrite(insert=pairs), NO_CHANGES)


def ids(memories: Sequence[Memory]) -> list[str]:
    return [m.memory_id for m in memories]


# --- writes and reads ---------------------------------------------------------------------


async def test_a_memory_round_trips_with_its_vector_and_replace_keeps_or_swaps_it(
    db: Db, scope: Scope
) -> None:
    store = db.memories()
    full = memory(
        scope, "m1", "Lives in Paris", kind=PREFERENCE, topics=("home",), entities=("Paris",),
        source=Source(MemoryOrigin.EXTRACTED, "ep1", 3, 5), event_time=T0, expires_at=NOW + timedelta(days=1),
        merge_count=2, fingerprint="f" * 64,
    )  # fmt: skip
    await insert(store, (full, [1.0, 0.0, 0.5]), memory(scope, "m2", "Has a cat"))
    assert await store.get(scope.tenant_id, "m1") == full
    assert await store.get("other-tenant", "m1") is None
    vectors = await store.vectors_of(scope.tenant_id, ["m1", "m2"])
    assert list(vectors) == ["m1"] and np.allclose(vectors["m1"], [1.0, 0.0, 0.5])

    moved = dataclasses.replace(full, text="Lives in Lyon", updated_at=NOW)
    await store.write(MemoryWrite(replace=[(moved, None)]), NO_CHANGES)
    assert await store.get(scope.tenant_id, "m1") == moved
    assert np.allclose((await store.vectors_of(scope.tenant_id, ["m1"]))["m1"], [1.0, 0.0, 0.5])
    await store.write(
        MemoryWrite(replace=[(moved, [0.0, 1.0, 0.0])], delete=[(scope.tenant_id, "m2")]), NO_CHANGES
    )
    assert np.allclose((await store.vectors_of(scope.tenant_id, ["m1"]))["m1"], [0.0, 1.0, 0.0])
    assert set(await store.get_many(scope.tenant_id, ["m1", "m2", "m3"])) == {"m1"}


async def test_a_write_is_all_or_nothing(db: Db, scope: Scope) -> None:
    store = db.memories()
    await insert(store, memory(scope, "m1", "Has a cat"))
    clash = MemoryWrite(insert=[(memory(scope, "m1", "Has a dog"), None)], delete=[(scope.tenant_id, "m1")])
    with pytest.raises(Exception):  # noqa: B017, PT011 - the driver's IntegrityError, whatever its class
        await store.write(clash, NO_CHANGES)
    assert (await store.get(scope.tenant_id, "m1")) == memory(scope, "m1", "Has a cat")


async def test_a_write_for_an_episode_that_is_gone_writes_nothing(db: Db, scope: Scope) -> None:
    """A promotion (or pending memories) racing the erasure of their episode."""
    store = db.memories()
    await db.add_agent(scope.tenant_id, scope.agent_id)
    await db.add_episode(scope, "ep-live")
    await store.write(
        MemoryWrite(insert=[(memory(scope, "kept", "Kept"), None)], episode=(scope.tenant_id, "ep-live")),
        NO_CHANGES,
    )
    gone = MemoryWrite(insert=[(memory(scope, "lost", "Lost"), None)], episode=(scope.tenant_id, "ep-erased"))
    with pytest.raises(NotFound):
        await store.write(gone, NO_CHANGES)
    assert ids(await store.page(scope, MemoryFilter(), NOW, None, 10)) == ["kept"]


async def test_the_text_and_frame_keys_follow_replaced_text(db: Db, scope: Scope) -> None:
    store = db.memories()
    await insert(store, memory(scope, "m1", "Lives in Paris"))
    assert ids(await store.same_text(scope, [text_key("lives in  PARIS.")])) == ["m1"]
    await store.write(MemoryWrite(replace=[(memory(scope, "m1", "Works at Acme"), None)]), NO_CHANGES)
    assert await store.same_text(scope, [text_key("Lives in Paris")]) == []
    assert ids(await store.same_text(scope, [text_key("works at acme")])) == ["m1"]


# --- listing ------------------------------------------------------------------------------


async def test_list_pages_newest_first_with_ties_broken_by_id(db: Db, scope: Scope) -> None:
    store = db.memories()
    rows = [memory(scope, f"m{i}", f"fact {i}", T0 + timedelta(minutes=i // 2)) for i in range(7)]
    await insert(store, *rows)
    pages, after = [], None
    while page := await store.page(scope, EVERYTHING, NOW, after, 3):
        pages.append(ids(page))
        after = (page[-1].created_at, page[-1].memory_id)
    assert pages == [["m6", "m5", "m4"], ["m3", "m2", "m1"], ["m0"]]
    other = Scope(scope.tenant_id, scope.agent_id, "u2")
    assert await store.page(other, EVERYTHING, NOW, None, 10) == []


async def test_list_filters(db: Db, scope: Scope) -> None:
    store = db.memories()
    at = [T0 + timedelta(hours=h) for h in range(8)]
    await insert(
        store,
        memory(scope, "fact", "Has a cat", at[0], topics=("pets",), entities=("Tom",)),
        memory(scope, "pref", "Prefers tea", at[1], kind=PREFERENCE, topics=("food",)),
        memory(scope, "event", "Flew to Rome", at[7], kind=EVENT, event_time=at[2], entities=("Rome",)),
        memory(scope, "pending", "Is vegan", at[3], state=PENDING, episode_id="ep1", topics=("food",)),
        memory(scope, "source", "Plays chess", at[4], source=Source(MemoryOrigin.EXTRACTED, "ep1", 1, 2)),
        memory(scope, "old", "Lived in Oslo", at[5], superseded_by="source"),
        memory(scope, "gone", "Is on holiday", at[6], expires_at=NOW),
    )

    async def listed(**where: object) -> set[str]:
        return set(ids(await store.page(scope, MemoryFilter(**where), NOW, None, 50)))  # type: ignore[arg-type]

    assert await listed() == {"fact", "pref", "event", "pending", "source"}
    assert await listed(include_superseded=True) == {"fact", "pref", "event", "pending", "source", "old"}
    assert await listed(kinds=frozenset({PREFERENCE, EVENT})) == {"pref", "event"}
    assert await listed(topics=frozenset({"food", "none"})) == {"pref", "pending"}
    assert await listed(entities=frozenset({"Tom", "Rome"})) == {"fact", "event"}
    assert await listed(state=PENDING) == {"pending"}
    assert await listed(episode_id="ep1") == {"pending", "source"}
    # an EVENT is placed by when it happened (at[2]), not when it was stored (at[7])
    assert await listed(after=at[1], before=at[4]) == {"pref", "event", "pending"}
    assert await listed(after=at[7]) == set()
    assert set(await store.among(scope, ["fact", "pref", "old", "gone", "nope"], MemoryFilter(), NOW)) == {
        "fact",
        "pref",
    }


async def test_tag_filters_page_correctly_across_read_chunks(
    db: Db, scope: Scope, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_module, "_CHUNK", 2)  # many rounds of reading
    store = db.memories()
    rows = [memory(scope, f"m{i:02}", f"fact {i}", T0 + timedelta(minutes=i)) for i in range(12)]
    tagged = {"m01", "m02", "m07", "m11"}
    await insert(
        store, *[dataclasses.replace(m, topics=("x",)) if m.memory_id in tagged else m for m in rows]
    )
    where = MemoryFilter(topics=frozenset({"x"}))
    first = await store.page(scope, where, NOW, None, 2)
    assert ids(first) == ["m11", "m07"]
    rest = await store.page(scope, where, NOW, (first[-1].created_at, first[-1].memory_id), 5)
    assert ids(rest) == ["m02", "m01"]


# --- duplicates, pending, vectors -----------------------------------------------------------


async def test_same_text_and_same_frame_see_only_live_promoted_memories(db: Db, scope: Scope) -> None:
    store = db.memories()
    text = "Lives in Paris"
    await insert(
        store,
        memory(scope, "live", text, entities=("Paris",)),
        memory(scope, "pending", text, state=PENDING, episode_id="ep1"),
        memory(scope, "superseded", text, superseded_by="live"),
        memory(scope, "expired", text, expires_at=NOW - timedelta(seconds=1)),
        memory(Scope(scope.tenant_id, scope.agent_id, "u2"), "elsewhere", text),
    )
    assert ids(await store.same_text(scope, [text_key(text)])) == ["live"]
    frame = frame_key(FACT.value, "Lives in Berlin", ["Berlin"])
    assert ids(await store.same_frame(scope, [frame])) == ["live"]
    assert await store.same_frame(scope, [frame_key(PREFERENCE.value, text, ["Paris"])]) == []
    assert await store.same_text(scope, []) == []


async def test_pending_lists_an_episodes_held_memories_oldest_first_with_vectors(
    db: Db, scope: Scope
) -> None:
    store = db.memories()
    await insert(
        store,
        (
            memory(scope, "b", "second", T0 + timedelta(minutes=1), state=PENDING, episode_id="ep1"),
            [0.5, 0.5],
        ),
        (memory(scope, "a", "first", T0, state=PENDING, episode_id="ep1"), None),
        memory(scope, "c", "promoted", T0, episode_id="ep1"),
        memory(scope, "d", "another episode", T0, state=PENDING, episode_id="ep2"),
    )
    held = await store.pending(scope.tenant_id, "ep1")
    assert [m.memory_id for m, _ in held] == ["a", "b"]
    assert held[0][1] is None and np.allclose(np.asarray(held[1][1]), [0.5, 0.5])


async def test_a_scopes_vectors_are_its_promoted_memories_of_the_model_and_stale_the_rest(
    db: Db, scope: Scope
) -> None:
    store, old = db.memories(), db.memories(unique("old-model"))
    await insert(
        store,
        (memory(scope, "p1", "one"), [1.0, 0.0]),
        (memory(scope, "p2", "two"), [0.0, 1.0]),
        (memory(scope, "held", "three", state=PENDING, episode_id="ep1"), [1.0, 1.0]),
        memory(scope, "bare", "four"),
    )
    await insert(old, (memory(scope, "older", "five"), [1.0, 1.0]))
    keys, vectors = await SqlMemoryVectors(db.database, db.model).scope_vectors(scope)
    found = sorted((scope, key, list(np.asarray(vector))) for key, vector in zip(keys, vectors, strict=True))
    assert found == [(scope, "p1", [1.0, 0.0]), (scope, "p2", [0.0, 1.0])]
    stale = {m.memory_id for m in await store.stale(db.model, 100_000) if m.tenant_id == scope.tenant_id}
    assert stale == {"bare", "older"}


# --- expiry and recall ----------------------------------------------------------------------


async def test_expired_finds_memories_past_expiry_or_unused_past_their_agents_retention(
    db: Db, scope: Scope
) -> None:
    store = db.memories()
    forever = Scope(scope.tenant_id, unique("agent"), "u1")
    await db.add_agent(scope.tenant_id, scope.agent_id, retention_days=30)
    await db.add_agent(scope.tenant_id, forever.agent_id, retention_days=0)
    long_ago = NOW - timedelta(days=31)
    await insert(
        store,
        memory(scope, "due", "expires now", NOW, expires_at=NOW),
        memory(scope, "later", "expires later", NOW, expires_at=NOW + timedelta(seconds=1)),
        memory(scope, "unused", "old", long_ago),
        memory(scope, "recalled", "old but recalled", long_ago, last_recalled_at=NOW - timedelta(days=1)),
        memory(scope, "updated", "old but updated", long_ago, updated_at=NOW - timedelta(days=1)),
        memory(forever, "kept", "old, kept forever", long_ago),
    )
    expired = {m.memory_id for m in await store.expired(NOW, 100_000) if m.tenant_id == scope.tenant_id}
    assert expired == {"due", "unused"}
    await store.touch(scope.tenant_id, ["unused"], NOW)
    assert (await store.get(scope.tenant_id, "unused")) == memory(
        scope, "unused", "old", long_ago, last_recalled_at=NOW
    )
    expired = {m.memory_id for m in await store.expired(NOW, 100_000) if m.tenant_id == scope.tenant_id}
    assert expired == {"due"}


# --- session data ---------------------------------------------------------------------------


def bumped(
    data: JsonObject, now: datetime, expires_at: datetime | None = None
) -> Callable[[SessionData], SessionData]:
    def change(current: SessionData) -> SessionData:
        merged = {**current.data, **data}
        return dataclasses.replace(
            current, data=merged, version=current.version + 1, updated_at=now, expires_at=expires_at
        )

    return change


async def test_session_data_versions_each_update_and_a_failing_change_writes_nothing(
    db: Db, scope: Scope
) -> None:
    store = SqlSessionDataStore(db.database, db.writer, lambda: NOW)
    await db.add_agent(scope.tenant_id, scope.agent_id)
    await db.add_episode(scope, "ep1")
    assert await store.get(scope.tenant_id, "ep1") == SessionData(scope.tenant_id, "ep1")
    first = await store.update(scope.tenant_id, "ep1", bumped({"city": "Paris"}, T0))
    assert (first.version, first.etag) == (1, '"v1"')
    second = await store.update(scope.tenant_id, "ep1", bumped({"plan": "gold"}, NOW))
    assert await store.get(scope.tenant_id, "ep1") == second
    assert (second.version, second.data) == (2, {"city": "Paris", "plan": "gold"})

    def refuse(current: SessionData) -> SessionData:
        raise ValueError("precondition failed")

    with pytest.raises(ValueError, match="precondition failed"):
        await store.update(scope.tenant_id, "ep1", refuse)
    assert await store.get(scope.tenant_id, "ep1") == second


async def test_expired_session_data_reads_empty_and_starts_again_at_version_one(db: Db, scope: Scope) -> None:
    store = SqlSessionDataStore(db.database, db.writer, lambda: NOW)
    await db.add_agent(scope.tenant_id, scope.agent_id)
    await db.add_episode(scope, "ep1")
    await store.update(scope.tenant_id, "ep1", bumped({"city": "Paris"}, T0, expires_at=NOW))
    assert await store.get(scope.tenant_id, "ep1") == SessionData(scope.tenant_id, "ep1")
    fresh = await store.update(scope.tenant_id, "ep1", bumped({"plan": "gold"}, NOW))
    assert (fresh.version, fresh.data) == (1, {"plan": "gold"})


async def test_session_data_of_a_missing_episode_is_not_found(db: Db, scope: Scope) -> None:
    store = SqlSessionDataStore(db.database, db.writer, lambda: NOW)
    with pytest.raises(NotFound):
        await store.update(scope.tenant_id, "nope", bumped({"city": "Paris"}, NOW))


# --- erasure --------------------------------------------------------------------------------


async def test_erasure_removes_and_counts_the_users_memories_and_session_data(db: Db, scope: Scope) -> None:
    memories, sessions = db.memories(), SqlSessionDataStore(db.database, db.writer, lambda: NOW)
    other_agent, other_user = (
        Scope(scope.tenant_id, unique("agent"), "u1"),
        Scope(scope.tenant_id, scope.agent_id, "u2"),
    )
    for agent_id in (scope.agent_id, other_agent.agent_id):
        await db.add_agent(scope.tenant_id, agent_id)
    for where, episode_id in ((scope, "ep1"), (scope, "ep2"), (other_agent, "ep3"), (other_user, "ep4")):
        await db.add_episode(where, episode_id)
        await sessions.update(scope.tenant_id, episode_id, bumped({"k": "v"}, NOW))
    await insert(
        memories,
        (memory(scope, "m1", "Has a cat"), [1.0, 0.0]),
        memory(scope, "m2", "Is vegan", state=PENDING, episode_id="ep1"),
        memory(other_agent, "m3", "Likes jazz"),
        memory(other_user, "m4", "Likes rock"),
    )
    audit = Audit(unique("er"), "hash", scope.agent_id, NOW)
    recorded = await SqlEraser(db.database, db.writer).erase(
        scope.tenant_id, "u1", scope.agent_id, audit, NO_CHANGES
    )
    erased = recorded.result

    assert (erased.counts["memories"], erased.counts["session_data"], erased.counts["episodes"]) == (2, 2, 2)
    assert sorted(erased.memories) == [(scope, "m1"), (scope, "m2")]
    left = await memories.get_many(scope.tenant_id, ["m1", "m2", "m3", "m4"])
    assert set(left) == {"m3", "m4"}
    assert (await sessions.get(scope.tenant_id, "ep1")).version == 0
    assert (await sessions.get(scope.tenant_id, "ep3")).version == 1
    assert (await sessions.get(scope.tenant_id, "ep4")).version == 1
