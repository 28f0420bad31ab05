"""The `UserTransfer` port (ExportUser / ImportUser's storage; domain/transfer.py is the
format): one user's rows as records, each episode then what it owns, then the memories;
only theirs, only the agents asked for; records that import into another tenant (or after
an erasure) and export again alike, but for the digest the server makes again; an episode
imported once, whatever the retries; an erasure the import did not know of wins."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import pytest

from episodic.domain.changes import NO_CHANGES
from episodic.domain.erasure import user_hash
from episodic.domain.memories import Memory
from episodic.domain.model import Agent, Episode, Role
from episodic.domain.ports.users import UserTransfer
from episodic.domain.recall import Scope
from episodic.domain.transfer import MEMORIES_PART, EpisodeImported, ErasureWatch, episode_part
from episodic.errors import Aborted, AlreadyExists, FailedPrecondition, InvalidArgument
from episodic.store.transfer import TABLES, SqlTransfer
from tests.conftest import unique
from tests.contracts.conftest import World, own_database
from tests.contracts.test_context_store import model_call, summary
from tests.contracts.test_eraser import erase
from tests.contracts.test_session_data_store import next_version
from tests.fakes_transfer import FakeUserTransfer

Record = tuple[str, dict[str, object]]
# What no record holds: the tenant is the importer's, a soft delete is never exported, a
# memory's vector (and its model and dimension) is the importing server's to make.
LEFT_OUT = {"tenant_id", "deleted_at", "model", "dimension", "vector"}


def transfer_of(world: World) -> UserTransfer:
    if world.kind == "fake":
        assert world.tables is not None
        return FakeUserTransfer(world.tables)
    assert world.database is not None and world.writer is not None
    return SqlTransfer(world.database, world.writer)


@dataclass
class Seeded:
    a: Agent
    b: Agent
    talk: Episode  # u1 with a, open: every kind of row an episode owns but a digest
    done: Episode  # u1 with a, closed and digested
    elsewhere: Episode  # u1 with b
    memories: list[Memory]  # u1's, in the order an export holds them


async def seed(world: World) -> Seeded:
    """u1's episodes started in another order than their ids' (ep-c first; ep-a and ep-b at
    once), memories likewise; and u2's rows beside them."""
    a, b = await world.agent(), await world.agent()
    talk = await world.episode(a, "u1", "ep-c")
    await world.say(talk, "hello", "again")
    await world.tool_round(talk, "call-1")
    await world.say(talk, "answer", role=Role.ASSISTANT)
    await world.context.save_summary(summary(talk, 2))
    await world.context.save_call(model_call(world, talk, call_id="mc-1"), None)
    await world.sessions.update(world.tenant, talk.episode_id, next_version({"k": "v"}))
    world.later()
    done, elsewhere = await world.episode(a, "u1", "ep-a"), await world.episode(b, "u1", "ep-b")
    await world.say(done, "done")
    await world.digested(done)
    await world.say(elsewhere, "kept")
    someone_else = await world.episode(a, "u2", "ep-d")
    await world.say(someone_else, "not yours")
    u1a, u1b = Scope(world.tenant, a.agent_id, "u1"), Scope(world.tenant, b.agent_id, "u1")
    first = world.memory(u1a, "Mary likes tea", memory_id="mem-z")
    world.later()
    mine = [first, world.memory(u1b, memory_id="mem-x"), world.memory(u1a, memory_id="mem-y")]
    await world.remember(*mine, world.memory(Scope(world.tenant, a.agent_id, "u2"), memory_id="mem-w"))
    held = await world.memories.get_many(world.tenant, [m.memory_id for m in mine])
    return Seeded(a, b, talk, done, elsewhere, [held[m.memory_id] for m in mine])


async def exported(
    transfer: UserTransfer, tenant_id: str, user_id: str = "u1", agent_ids: Sequence[str] | None = None
) -> list[Record]:
    return [item async for item in transfer.export(tenant_id, user_id, agent_ids)]


def parts(records: list[Record]) -> tuple[list[list[dict[str, object]]], list[dict[str, object]]]:
    """The episodes' parts and the memories' records, as an export file holds them."""
    episodes: list[list[dict[str, object]]] = []
    memories: list[dict[str, object]] = []
    for kind, record in records:
        if kind == "memory":
            memories.append(record)
        elif kind == "episode":
            episodes.append([record])
        else:
            episodes[-1].append(record)
    return episodes, memories


def ids(records: list[Record]) -> list[tuple[str, object]]:
    """Each record by its kind and what tells it apart within its episode."""
    key = {"episode": "episode_id", "message": "seq", "tool_call": "tool_call_id", "summary": "to_seq"}
    key |= {
        "digest": "state",
        "session_data": "version",
        "model_call": "model_call_id",
        "memory": "memory_id",
    }
    return [(kind, record[key[kind]]) for kind, record in records]


def without_digests(records: list[Record]) -> list[Record]:
    return [(kind, record) for kind, record in records if kind != "digest"]


async def watch_of(transfer: UserTransfer, tenant_id: str, user_id: str = "u1") -> ErasureWatch:
    hashed = user_hash(tenant_id, user_id)
    return ErasureWatch(hashed, await transfer.erasures_of(tenant_id, hashed))


async def import_episodes(
    world: World,
    transfer: UserTransfer,
    records: list[Record],
    tenant_id: str,
    user_id: str = "u1",
    watch: ErasureWatch | None = None,
) -> list[EpisodeImported]:
    """Each episode's part as an import writes it: checked rows, one transaction each."""
    watch = watch or await watch_of(transfer, tenant_id, user_id)
    done = []
    for n, part in enumerate(parts(records)[0], start=1):
        rows = transfer.episode_rows(episode_part(n), part, user_id)
        done.append((await transfer.import_episode(tenant_id, rows, world.clock(), watch, NO_CHANGES)).result)
    return done


async def import_memories(
    world: World, transfer: UserTransfer, records: list[Record], tenant_id: str, user_id: str = "u1"
) -> list[Memory]:
    memories = transfer.memories(MEMORIES_PART, parts(records)[1], tenant_id, user_id)
    await world.remember(*memories)
    return memories


async def another_tenant(world: World, *agents: Agent) -> str:
    tenant = unique("tenant")
    for agent in agents:
        await world.agent(tenant_id=tenant, agent_id=agent.agent_id)
    return tenant


def imported(done: list[EpisodeImported]) -> list[tuple[str, bool, int, int, bool]]:
    return [(d.episode.episode_id, d.created, d.messages, d.model_calls, d.digest_pending) for d in done]


# --- export ---------------------------------------------------------------------------------


async def test_an_export_is_each_episode_with_what_it_owns_in_log_order_then_the_memories(
    world: World,
) -> None:
    await seed(world)
    records = await exported(transfer_of(world), world.tenant)
    assert ids(records) == [
        ("episode", "ep-c"), *(("message", n) for n in range(1, 6)), ("tool_call", "call-1"), ("summary", 2),
        ("session_data", 1), ("model_call", "mc-1"),
        ("episode", "ep-a"), ("message", 1), ("digest", "ready"),
        ("episode", "ep-b"), ("message", 1),
        ("memory", "mem-z"), ("memory", "mem-x"), ("memory", "mem-y"),
    ]  # fmt: skip


async def test_each_record_is_its_rows_columns_but_the_tenants_a_soft_deletes_and_a_vectors(
    world: World,
) -> None:
    s = await seed(world)
    records = await exported(transfer_of(world), world.tenant)
    for kind, record in records:
        assert set(record) == {"type"} | {c.name for c in TABLES[kind].columns} - LEFT_OUT, kind
        assert record["type"] == kind
    by_kind = dict(reversed(records))  # the first of each kind
    assert by_kind["episode"] == by_kind["episode"] | {
        "episode_id": "ep-c", "agent_id": s.a.agent_id, "user_id": "u1", "state": "open", "message_count": 5,
        "started_at": s.talk.started_at.isoformat(), "ended_at": None, "metadata": {},
    }  # fmt: skip
    assert by_kind["message"] == by_kind["message"] | {
        "episode_id": "ep-c", "seq": 1, "role": "user", "content": "hello", "token_count": 3,
        "metadata": None, "tool_calls": None, "tool_result": None, "retracted_at": None,
    }  # fmt: skip
    assert by_kind["tool_call"] == by_kind["tool_call"] | {
        "tool_call_id": "call-1", "tool_name": "lookup", "input": {"q": 1}, "call_seq": 3,
        "has_result": True, "output": {"a": 42}, "succeeded": True, "result_seq": 4,
    }  # fmt: skip
    assert by_kind["session_data"] == by_kind["session_data"] | {"data": {"k": "v"}, "version": 1}
    assert by_kind["summary"] == by_kind["summary"] | {"from_seq": 1, "to_seq": 2, "content": "so far"}
    assert by_kind["digest"] == by_kind["digest"] | {
        "episode_id": "ep-a",
        "state": "ready",
        "summary": "summary",
    }
    assert by_kind["model_call"] == by_kind["model_call"] | {
        "user_id": "u1", "total_tokens": 10, "trace_id": "t" * 32, "reply": None,
    }  # fmt: skip
    assert by_kind["memory"] == by_kind["memory"] | {
        "memory_id": "mem-z", "text": "Mary likes tea", "state": "promoted", "user_id": "u1",
        "created_at": s.memories[0].created_at.isoformat(), "topics": [], "metadata": {},
    }  # fmt: skip


async def test_an_export_of_named_agents_holds_only_their_episodes_and_memories(world: World) -> None:
    s = await seed(world)
    transfer = transfer_of(world)
    only_b = await exported(transfer, world.tenant, agent_ids=[s.b.agent_id])
    assert ids(only_b) == [("episode", "ep-b"), ("message", 1), ("memory", "mem-x")]
    both = await exported(transfer, world.tenant, agent_ids=[s.a.agent_id, s.b.agent_id, "nobody"])
    assert both == await exported(transfer, world.tenant)
    assert await exported(transfer, world.tenant, agent_ids=[]) == []


async def test_another_tenants_or_users_rows_never_appear_in_an_export(world: World) -> None:
    s = await seed(world)
    stranger = await another_tenant(world, s.a)  # the same agent, user and episode ids
    twin = await world.episode(await world.agents.get_agent(stranger, s.a.agent_id), "u1", "ep-c")
    await world.say(twin, "a stranger's words")
    await world.context.save_call(model_call(world, twin, call_id="mc-1"), None)
    await world.remember(world.memory(Scope(stranger, s.a.agent_id, "u1"), memory_id="mem-z"))
    transfer = transfer_of(world)
    records = await exported(transfer, world.tenant)
    assert {r["user_id"] for _, r in records if "user_id" in r} == {"u1"}
    assert {r["episode_id"] for kind, r in records if kind != "memory"} == {"ep-a", "ep-b", "ep-c"}
    assert "a stranger's words" not in {r.get("content") for _, r in records}
    assert ids(await exported(transfer, world.tenant, "u2")) == [
        ("episode", "ep-d"), ("message", 1), ("memory", "mem-w"),
    ]  # fmt: skip
    theirs = await exported(transfer, stranger)
    assert ids(theirs) == [("episode", "ep-c"), ("message", 1), ("model_call", "mc-1"), ("memory", "mem-z")]
    assert [r["content"] for kind, r in theirs if kind == "message"] == ["a stranger's words"]
    assert await exported(transfer, world.tenant, "nobody") == []


@own_database  # the retention sweep takes every tenant's due episodes
async def test_an_episode_retention_deleted_is_not_exported_and_its_id_stays_taken(world: World) -> None:
    agent = await world.agent(retention_days=1)
    await world.say(await world.episode(agent, "u1", "ep-kept"), "still open")
    gone = await world.episode(agent, "u1", "ep-gone")
    await world.say(gone, "said once")
    await world.close(gone)
    transfer = transfer_of(world)
    records = await exported(transfer, world.tenant)
    assert [i for i in ids(records) if i[0] == "episode"] == [("episode", "ep-gone"), ("episode", "ep-kept")]
    world.later(timedelta(days=2))
    swept = await world.retention.soft_delete_due(world.clock(), 100, NO_CHANGES)
    assert [d.episode_id for d in swept.result] == ["ep-gone"]
    assert ids(await exported(transfer, world.tenant)) == [("episode", "ep-kept"), ("message", 1)]
    again = await import_episodes(world, transfer, records, world.tenant)
    assert imported(again) == [("ep-gone", False, 0, 0, False), ("ep-kept", False, 0, 0, False)]
    assert ids(await exported(transfer, world.tenant)) == [("episode", "ep-kept"), ("message", 1)]


# --- import ---------------------------------------------------------------------------------


async def test_an_export_imported_into_another_tenant_exports_again_alike_but_for_the_digest_made_again(
    world: World,
) -> None:
    s = await seed(world)
    transfer = transfer_of(world)
    records = await exported(transfer, world.tenant)
    target = await another_tenant(world, s.a, s.b)
    world.later()
    done = await import_episodes(world, transfer, records, target)
    assert imported(done) == [
        ("ep-c", True, 5, 1, False),
        ("ep-a", True, 1, 0, True),
        ("ep-b", True, 1, 0, False),
    ]
    await import_memories(world, transfer, records, target)
    again = await exported(transfer, target)
    assert without_digests(again) == without_digests(records)
    ((_, digest),) = [(kind, r) for kind, r in again if kind == "digest"]
    assert digest["episode_id"] == "ep-a" and digest["state"] == "pending" and digest["summary"] == ""
    assert digest["updated_at"] == world.clock().isoformat()
    assert await exported(transfer, world.tenant) == records


async def test_an_export_imported_after_the_users_erasure_exports_again_alike(world: World) -> None:
    await seed(world)
    transfer = transfer_of(world)
    records = await exported(transfer, world.tenant)
    await erase(world, "u1")
    assert await exported(transfer, world.tenant) == []
    watch = await watch_of(transfer, world.tenant)
    assert watch.known, "the erasure is known to an import begun after it"
    await import_episodes(world, transfer, records, world.tenant, watch=watch)
    await import_memories(world, transfer, records, world.tenant)
    assert without_digests(await exported(transfer, world.tenant)) == without_digests(records)
    assert ids(await exported(transfer, world.tenant, "u2")) == [
        ("episode", "ep-d"), ("message", 1), ("memory", "mem-w"),
    ]  # fmt: skip


async def test_an_export_imported_under_another_user_names_that_user_in_every_record(world: World) -> None:
    s = await seed(world)
    transfer = transfer_of(world)
    records = await exported(transfer, world.tenant)
    target = await another_tenant(world, s.a, s.b)
    await import_episodes(world, transfer, records, target, "u9")
    await import_memories(world, transfer, records, target, "u9")
    again = await exported(transfer, target, "u9")
    assert ids(without_digests(again)) == ids(without_digests(records))
    assert {r["user_id"] for _, r in again if "user_id" in r} == {"u9"}
    assert await exported(transfer, target, "u1") == []


async def test_memory_records_read_back_as_the_memories_they_were(world: World) -> None:
    s = await seed(world)
    transfer = transfer_of(world)
    records = await exported(transfer, world.tenant)
    target = await another_tenant(world, s.a, s.b)
    memories = await import_memories(world, transfer, records, target)
    assert memories == [dataclasses.replace(m, tenant_id=target) for m in s.memories]
    assert parts(await exported(transfer, target))[1] == parts(records)[1]
    retargeted = transfer.memories(MEMORIES_PART, parts(records)[1], target, "u9")
    assert [m.user_id for m in retargeted] == ["u9"] * 3


async def test_importing_an_episode_again_writes_nothing_more(world: World) -> None:
    s = await seed(world)
    transfer = transfer_of(world)
    records = await exported(transfer, world.tenant)
    target = await another_tenant(world, s.a, s.b)
    await import_episodes(world, transfer, records, target)
    first = await exported(transfer, target)
    world.later()
    again = await import_episodes(world, transfer, records, target)
    assert imported(again) == [(e, False, 0, 0, False) for e in ("ep-c", "ep-a", "ep-b")]
    assert await exported(transfer, target) == first
    own = await import_episodes(world, transfer, records, world.tenant)  # the tenant they came from
    assert imported(own) == [(e, False, 0, 0, False) for e in ("ep-c", "ep-a", "ep-b")]
    assert await exported(transfer, world.tenant) == records


async def test_an_episode_held_with_other_content_is_already_exists_and_left_as_it_was(world: World) -> None:
    await seed(world)
    transfer = transfer_of(world)
    records = await exported(transfer, world.tenant)
    (talk, *_), _ = parts(records)
    watch = await watch_of(transfer, world.tenant, "u9")
    other_user = transfer.episode_rows(episode_part(1), talk, "u9")
    with pytest.raises(AlreadyExists) as refused:
        await transfer.import_episode(world.tenant, other_user, world.clock(), watch, NO_CHANGES)
    assert refused.value.reason == "EPISODE_EXISTS"
    shorter = [r | {"message_count": 4} if r["type"] == "episode" else r for r in talk]
    shorter = [r for r in shorter if (r["type"], r.get("seq")) != ("message", 5)]
    rows = transfer.episode_rows(episode_part(1), shorter, "u1")
    with pytest.raises(AlreadyExists):
        await transfer.import_episode(
            world.tenant, rows, world.clock(), await watch_of(transfer, world.tenant), NO_CHANGES
        )
    assert await exported(transfer, world.tenant) == records
    assert await exported(transfer, world.tenant, "u9") == []


async def test_an_episode_whose_model_call_the_tenant_holds_is_refused_whole(world: World) -> None:
    await seed(world)
    transfer = transfer_of(world)
    records = await exported(transfer, world.tenant)
    (talk, *_), _ = parts(records)
    renamed = [r | {"episode_id": "ep-new"} for r in talk]
    rows = transfer.episode_rows(episode_part(1), renamed, "u1")
    with pytest.raises(FailedPrecondition) as refused:
        await transfer.import_episode(
            world.tenant, rows, world.clock(), await watch_of(transfer, world.tenant), NO_CHANGES
        )
    assert refused.value.reason == "MODEL_CALL_EXISTS"
    assert await exported(transfer, world.tenant) == records


async def test_an_erasure_the_import_did_not_know_of_aborts_it_unless_of_another_agent_or_user(
    world: World,
) -> None:
    s = await seed(world)
    transfer = transfer_of(world)
    records = await exported(transfer, world.tenant)
    (talk, done, _), _ = parts(records)
    target = await another_tenant(world, s.a, s.b)
    watch = await watch_of(transfer, target)
    await erase(world, "u1", s.b.agent_id, tenant_id=target)
    await erase(world, "u2", tenant_id=target)
    await erase(world, "u1", tenant_id=world.tenant)
    rows = transfer.episode_rows(episode_part(1), talk, "u1")  # of agent a
    assert (await transfer.import_episode(target, rows, world.clock(), watch, NO_CHANGES)).result.created
    await erase(world, "u1", tenant_id=target)
    rows = transfer.episode_rows(episode_part(2), done, "u1")
    with pytest.raises(Aborted) as refused:
        await transfer.import_episode(target, rows, world.clock(), watch, NO_CHANGES)
    assert refused.value.reason == "USER_ERASED"
    assert await exported(transfer, target) == [], "the episode was written after the user's erasure"


async def test_a_part_that_is_not_one_whole_episode_is_refused_by_record(world: World) -> None:
    await seed(world)
    transfer = transfer_of(world)
    (talk, done, _), memories = parts(await exported(transfer, world.tenant))
    for part, where in (
        (talk[1:], "must begin with its episode record"),
        ([*done, talk[1]], "record 4: belongs to another episode"),
        ([*talk[:3], *talk[4:]], "messages must be numbered 1..message_count"),
        ([*done, memories[0]], "record 4: a 'memory' record cannot be in an episode's part"),
    ):
        with pytest.raises(InvalidArgument, match=where):
            transfer.episode_rows(episode_part(1), part, "u1")
    with pytest.raises(InvalidArgument, match="record 2: only memory records"):
        transfer.memories(MEMORIES_PART, [memories[0], talk[0]], world.tenant, "u1")


# --- what an import asks ----------------------------------------------------------------------


async def test_the_erasures_of_a_user_are_theirs_in_this_tenant_as_committed(world: World) -> None:
    a = await world.agent()
    transfer = transfer_of(world)
    hashed = user_hash(world.tenant, "u1")
    assert await transfer.erasures_of(world.tenant, hashed) == frozenset()
    await world.episode(a, "u1")
    await erase(world, "u1")
    (first,) = await transfer.erasures_of(world.tenant, hashed)
    await erase(world, "u1", a.agent_id)  # of one agent, of nothing left: an erasure all the same
    await erase(world, "u2")
    elsewhere = unique("tenant")
    await erase(world, "u1", tenant_id=elsewhere)
    mine = await transfer.erasures_of(world.tenant, hashed)
    assert len(mine) == 2 and first in mine
    (theirs,) = await transfer.erasures_of(world.tenant, user_hash(world.tenant, "u2"))
    assert theirs not in mine
    assert not mine & await transfer.erasures_of(elsewhere, user_hash(elsewhere, "u1"))
    assert await transfer.erasures_of(elsewhere, hashed) == frozenset(), "the hash is per tenant"


async def test_missing_agents_are_those_the_tenant_does_not_have_each_once_in_order(world: World) -> None:
    a, b = await world.agent(agent_id="agent-b"), await world.agent(agent_id="agent-a")
    theirs = await world.agent(tenant_id=unique("tenant"), agent_id="agent-c")
    transfer = transfer_of(world)
    asked = ["nobody", a.agent_id, theirs.agent_id, b.agent_id, "nobody", "agent-0"]
    assert await transfer.missing_agents(world.tenant, asked) == ["agent-0", "agent-c", "nobody"]
    assert await transfer.missing_agents(world.tenant, [a.agent_id, b.agent_id]) == []
    assert await transfer.missing_agents(world.tenant, []) == []
