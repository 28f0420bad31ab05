"""The `Eraser` port: one user's episodes (in one agent, or all) with every row they own,
and their memories, counted per receipt kind; nobody else's; per tenant."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest

from episodic.domain.changes import NO_CHANGES
from episodic.domain.drafts import DraftLimits, Push
from episodic.domain.erasure import KINDS, Audit, Erased, user_hash
from episodic.domain.memories import MemoryState
from episodic.domain.model import Agent, Episode, Role
from episodic.domain.recall import Scope
from episodic.errors import NotFound
from tests.conftest import unique
from tests.contracts.conftest import World
from tests.contracts.test_context_store import model_call, summary
from tests.contracts.test_session_data_store import next_version

NONE_ERASED = dict.fromkeys(KINDS, 0)


async def erase(world: World, user_id: str, agent_id: str = "", tenant_id: str = "") -> Erased:
    tenant = tenant_id or world.tenant
    audit = Audit(unique("erasure"), user_hash(tenant, user_id), agent_id, world.clock())
    recorded = await world.eraser.erase(tenant, user_id, agent_id, audit, NO_CHANGES)
    return recorded.result


@dataclass
class Seeded:
    a: Agent
    b: Agent
    talk: Episode  # u1 with a: open, with every kind of row an episode owns
    done: Episode  # u1 with a: closed and digested
    elsewhere: Episode  # u1 with b
    someone_else: Episode  # u2 with a
    memories: dict[str, str]  # name -> memory id


async def seed(world: World) -> Seeded:
    a, b = await world.agent(), await world.agent()
    talk, done = await world.episode(a, "u1"), await world.episode(a, "u1")
    elsewhere, someone_else = await world.episode(b, "u1"), await world.episode(a, "u2")
    await world.say(talk, "hello", "again")
    await world.tool_round(talk, "call-1")
    await world.say(talk, "answer", role=Role.ASSISTANT)
    await world.context.save_summary(summary(talk, 2))
    await world.context.save_call(model_call(world, talk), None)
    await world.sessions.update(world.tenant, talk.episode_id, next_version({"k": "v"}))
    limits = DraftLimits(max_bytes=100)
    await world.drafts.push(world.tenant, talk.episode_id, Push("d1", 0, "draft"), world.clock(), limits)
    await world.say(done, "done")
    await world.digested(done, chunks=2)
    for episode in (elsewhere, someone_else):
        await world.say(episode, "kept")
    u1a, u1b, u2a = (
        Scope(world.tenant, a.agent_id, "u1"),
        Scope(world.tenant, b.agent_id, "u1"),
        Scope(world.tenant, a.agent_id, "u2"),
    )
    rows = {
        "indexed": world.memory(u1a),
        "pending": world.memory(u1a, state=MemoryState.PENDING, episode_id=talk.episode_id),
        "unembedded": world.memory(u1a),
        "other_agent": world.memory(u1b),
        "other_user": world.memory(u2a),
    }
    vector = [1.0, 0.0]
    await world.remember(
        (rows["indexed"], vector),
        (rows["pending"], vector),
        rows["unembedded"],
        (rows["other_agent"], vector),
    )
    await world.remember(rows["other_user"])
    ids = {name: m.memory_id for name, m in rows.items()}
    return Seeded(a, b, talk, done, elsewhere, someone_else, ids)


async def test_erasing_a_user_in_one_agent_counts_and_removes_every_row_of_theirs(world: World) -> None:
    s = await seed(world)
    erased = await erase(world, "u1", s.a.agent_id)
    assert erased.counts == {
        "episodes": 2, "messages": 6, "tool_calls": 1, "summaries": 1, "digests": 1, "digest_vectors": 2,
        "text_rows": 1, "model_calls": 1, "memories": 3, "session_data": 1,
    }  # fmt: skip
    assert sorted(erased.episodes) == sorted((s.a.agent_id, e.episode_id) for e in (s.talk, s.done))
    scope = Scope(world.tenant, s.a.agent_id, "u1")
    assert sorted(erased.memories) == sorted(
        (scope, s.memories[n]) for n in ("indexed", "pending", "unembedded")
    )
    assert erased.memory_vectors == 1  # promoted with a vector: in the memory index
    assert erased.vectors == 3
    for episode in (s.talk, s.done):
        with pytest.raises(NotFound):
            await world.episodes.get_episode(world.tenant, episode.episode_id)
        assert await world.digests.get(world.tenant, episode.episode_id) is None
    assert (await world.sessions.get(world.tenant, s.talk.episode_id)).version == 0
    assert await world.drafts.text_of(world.tenant, s.talk.episode_id, "d1") is None
    remaining = await world.memories.get_many(world.tenant, list(s.memories.values()))
    assert sorted(remaining) == sorted(s.memories[n] for n in ("other_agent", "other_user"))
    for kept in (s.elsewhere, s.someone_else):
        assert (await world.episodes.get_episode(world.tenant, kept.episode_id)).message_count == 1


async def test_erasing_a_user_in_every_agent(world: World) -> None:
    s = await seed(world)
    erased = await erase(world, "u1")
    assert (erased.counts["episodes"], erased.counts["messages"], erased.counts["memories"]) == (3, 7, 4)
    assert await world.memories.get_many(world.tenant, list(s.memories.values())) == {
        s.memories["other_user"]: (await world.memories.get(world.tenant, s.memories["other_user"]))
    }
    with pytest.raises(NotFound):
        await world.episodes.get_episode(world.tenant, s.elsewhere.episode_id)
    assert (await world.episodes.get_episode(world.tenant, s.someone_else.episode_id)).user_id == "u2"


async def test_erasing_nobody_erases_nothing_and_needs_no_scrub(world: World) -> None:
    s = await seed(world)
    assert await erase(world, "nobody") == Erased(NONE_ERASED)
    assert await erase(world, "u1", "no-such-agent") == Erased(NONE_ERASED)
    assert await erase(world, "u1", tenant_id=unique("tenant")) == Erased(NONE_ERASED)  # another tenant
    assert await world.eraser.scrub(NONE_ERASED) is True
    assert (await world.episodes.get_episode(world.tenant, s.talk.episode_id)).message_count == 5


async def test_an_erased_user_can_start_over(world: World) -> None:
    s = await seed(world)
    await erase(world, "u1", s.a.agent_id)
    world.later(timedelta(minutes=1))
    again = await world.episode(s.a, "u1")
    await world.say(again, "hello")
    assert (await erase(world, "u1", s.a.agent_id)).counts["messages"] == 1
