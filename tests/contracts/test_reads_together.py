"""The `ReadsTogether` port (and the `ReadBatch` it gives): one request's concurrent reads
share one trip to the database (`Database.together`, store/read_batch.py) or, in the fakes,
each goes its own way (`SeparateReads`). Either way a read handed the batch answers exactly
what it answers alone: the batch changes how reads travel, never what they find.

Run through the store reads that take `batch=`: a scope's recent, ready, pending and lexical
digests, its memories paged and by id, an episode's pending memories and session data.
How many trips the reads make is the SQL implementation's own business
(tests/integration/test_read_batch.py)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from episodic.domain.memories import MemoryState, SessionData
from episodic.domain.model import Agent
from episodic.domain.ports.episodes import ReadBatch, ReadsTogether
from episodic.domain.ports.memories import MemoryFilter
from episodic.domain.recall import Scope
from tests.contracts.conftest import World
from tests.fakes import SeparateReads

ALL = MemoryFilter(state=MemoryState.PROMOTED)


def reads_of(world: World) -> ReadsTogether:
    if world.kind == "fake":
        return SeparateReads()  # the fake stores take the batch and have no trip to share
    assert world.database is not None
    return world.database


@dataclasses.dataclass
class Said:
    """One user's conversations with an agent, as the stores hold them."""

    scope: Scope
    ready: list[str]  # episode ids of READY digests, newest first
    waiting: str  # an episode closed, its digest PENDING
    open_episode: str  # with PENDING memories and session data
    memories: list[str]  # PROMOTED memory ids, newest first


async def said(world: World, agent: Agent, user_id: str, digested: int, word: str) -> Said:
    """`digested` READY digests whose text holds `word`, one PENDING, and an open episode
    with a PENDING memory, session data and `digested` PROMOTED memories."""
    scope = Scope(agent.tenant_id, agent.agent_id, user_id)
    ready: list[str] = []
    for n in range(digested):
        world.later()
        digest = await world.digested(await world.episode(agent, user_id), body=f"{word} number {n}")
        ready.insert(0, digest.episode_id)
    waiting = await world.episode(agent, user_id)
    await world.say(waiting, "hello")
    await world.close(waiting)
    talk = await world.episode(agent, user_id)
    promoted = []
    for n in range(digested):
        world.later()
        promoted.append(world.memory(scope, f"{word} fact {n}"))
    pending = world.memory(scope, state=MemoryState.PENDING, episode_id=talk.episode_id)
    await world.remember(*promoted, pending)
    await world.sessions.update(
        agent.tenant_id,
        talk.episode_id,
        lambda current: dataclasses.replace(current, data={"word": word}, version=current.version + 1),
    )
    return Said(scope, ready, waiting.episode_id, talk.episode_id, [m.memory_id for m in reversed(promoted)])


async def every_read(world: World, of: Said, batch: ReadBatch | None = None) -> dict[str, Any]:
    """Every read that takes a batch, of one user's conversations, at once (as a turn's
    searches are), by name."""
    now, scope = world.clock(), of.scope
    digests, memories = world.digests, world.memories
    names = ["recent", "ready_among", "pending_count", "lexical", "page", "among", "pending", "session"]
    found = await asyncio.gather(
        digests.recent(scope, 10, None, None, batch=batch),
        digests.ready_among(scope, [*of.ready, of.waiting, "no-such-episode"], None, None, batch=batch),
        digests.pending_count(scope, batch=batch),
        digests.lexical(scope, "number", 10, batch=batch),
        memories.page(scope, ALL, now, None, 10, batch=batch),
        memories.among(scope, [*of.memories, "no-such-memory"], ALL, now, batch=batch),
        memories.pending(scope.tenant_id, of.open_episode, batch=batch),
        world.sessions.get(scope.tenant_id, of.open_episode, batch=batch),
    )
    return dict(zip(names, found, strict=True))


def summary(found: dict[str, Any]) -> dict[str, Any]:
    """What a test checks the reads found by: ids, counts, the session's data."""
    session: SessionData = found["session"]
    return {
        "recent": [d.episode_id for d in found["recent"]],
        "ready_among": sorted(found["ready_among"]),
        "pending_count": found["pending_count"],
        "lexical": sorted(h.episode_id for h in found["lexical"]),
        "page": [m.memory_id for m in found["page"]],
        "among": sorted(found["among"]),
        "pending": len(found["pending"]),
        "session": (session.version, session.data),
    }


def expected(of: Said, word: str) -> dict[str, Any]:
    return {
        "recent": of.ready,
        "ready_among": sorted(of.ready),
        "pending_count": 1,
        "lexical": sorted(of.ready),
        "page": of.memories,
        "among": sorted(of.memories),
        "pending": 1,
        "session": (1, {"word": word}),
    }


async def test_reads_given_the_batch_find_what_the_same_reads_find_alone(world: World) -> None:
    reads, agent = reads_of(world), await world.agent()
    mary = await said(world, agent, "mary", 2, "walnut")
    alone = await every_read(world, mary)
    assert summary(alone) == expected(mary, "walnut")
    with reads.together() as batch:
        together = await every_read(world, mary, batch)
    assert together == alone


async def test_reads_of_two_requests_in_one_batch_each_find_their_own(world: World) -> None:
    reads, agent = reads_of(world), await world.agent()
    mary = await said(world, agent, "mary", 1, "walnut")
    john = await said(world, agent, "john", 3, "pecan")
    with reads.together() as batch:
        hers, his = await asyncio.gather(every_read(world, mary, batch), every_read(world, john, batch))
    assert summary(hers) == expected(mary, "walnut")
    assert summary(his) == expected(john, "pecan")


async def test_a_read_not_handed_the_batch_runs_beside_it_and_reads_go_on_after_the_block(
    world: World,
) -> None:
    reads, agent = reads_of(world), await world.agent()
    mary = await said(world, agent, "mary", 2, "walnut")
    john = await said(world, agent, "john", 1, "pecan")
    with reads.together() as batch:
        hers, his = await asyncio.gather(every_read(world, mary, batch), every_read(world, john))
    assert summary(hers) == expected(mary, "walnut") and summary(his) == expected(john, "pecan")
    assert summary(await every_read(world, mary)) == expected(mary, "walnut")  # after the block
    with reads.together() as again:
        assert summary(await every_read(world, john, again)) == expected(john, "pecan")


async def test_each_turn_of_a_batch_reads_what_was_committed_before_it(world: World) -> None:
    reads, agent = reads_of(world), await world.agent()
    mary = await said(world, agent, "mary", 1, "walnut")
    tenant, episode_id = mary.scope.tenant_id, mary.open_episode
    with reads.together() as batch:
        before = await world.sessions.get(tenant, episode_id, batch=batch)
        await world.sessions.update(
            tenant, episode_id, lambda current: dataclasses.replace(current, version=current.version + 1)
        )
        await world.remember(world.memory(mary.scope, "walnut fact later"))
        after = await world.sessions.get(tenant, episode_id, batch=batch)
        page = await world.memories.page(mary.scope, ALL, world.clock(), None, 10, batch=batch)
    assert (before.version, after.version) == (1, 2)
    assert len(page) == len(mary.memories) + 1


async def test_reading_in_a_batch_changes_nothing(world: World) -> None:
    reads, agent = reads_of(world), await world.agent()
    mary = await said(world, agent, "mary", 2, "walnut")
    before = await every_read(world, mary)
    waiting = await world.digests.get(mary.scope.tenant_id, mary.waiting)
    with reads.together() as batch:
        await asyncio.gather(every_read(world, mary, batch), every_read(world, mary, batch))
        await every_read(world, mary, batch)
    assert await every_read(world, mary) == before  # whole rows: nothing stamped, claimed or moved
    assert await world.digests.get(mary.scope.tenant_id, mary.waiting) == waiting
