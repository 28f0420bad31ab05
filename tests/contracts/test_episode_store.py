"""The `EpisodeStore` port (and `UserDirectory`, which both implementations also are):
open (a retry returns the episode), append (dense seqs, retries deduped by client message
id), close (once, with a pending digest), reads and listings newest first; per tenant. The
idle sweep serves the whole cluster (one reaper): over a database of its own, it takes every
tenant's idle episodes, each judged by its own agent's timeout."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import cast

import pytest

from episodic.domain.changes import NO_CHANGES
from episodic.domain.context import Summary
from episodic.domain.digests import pending_digest
from episodic.domain.episodes import OpenRequest
from episodic.domain.inspection import UserSummary
from episodic.domain.log import PreparedMessage
from episodic.domain.memories import MemoryState
from episodic.domain.model import CloseReason, Episode, EpisodeState, NewMessage, Role
from episodic.domain.ports.episodes import EpisodeCursor, EpisodeFilter, UserDirectory
from episodic.domain.ports.memories import MemoryWrite
from episodic.domain.recall import Scope
from episodic.errors import AlreadyExists, FailedPrecondition, NotFound
from tests.conftest import unique
from tests.contracts.conftest import ENCODING, World, own_database


def ids(episodes: list[Episode]) -> list[str]:
    return [e.episode_id for e in episodes]


async def test_opening_an_id_again_is_a_retry_of_the_same_conversation_only(world: World) -> None:
    agent = await world.agent()
    episode = await world.episode(agent, "u1")
    same = OpenRequest(agent.agent_id, "u1", episode.episode_id, {}, world.clock())
    assert await world.episodes.open_episode(world.tenant, same, ENCODING) == (episode, False)
    other_user = dataclasses.replace(same, user_id="u2")
    with pytest.raises(AlreadyExists):
        await world.episodes.open_episode(world.tenant, other_user, ENCODING)
    await world.close(episode)
    with pytest.raises(FailedPrecondition):
        await world.episodes.open_episode(world.tenant, same, ENCODING)
    assert await world.episodes.get_episode(world.tenant, episode.episode_id) != episode  # closed


async def test_an_episode_round_trips_and_is_per_tenant(world: World) -> None:
    agent = await world.agent()
    request = OpenRequest(agent.agent_id, "u1", unique("ep"), {"topic": ["a", 1]}, world.clock())
    episode, created = await world.episodes.open_episode(world.tenant, request, ENCODING)
    assert created and await world.episodes.get_episode(world.tenant, episode.episode_id) == episode
    with pytest.raises(NotFound):
        await world.episodes.get_episode(unique("tenant"), episode.episode_id)
    with pytest.raises(NotFound):
        await world.episodes.append(unique("tenant"), episode.episode_id, [])


async def test_appends_number_messages_densely_and_dedupe_retries(world: World) -> None:
    episode = await world.episode()
    world.later()

    def prepared(text: str, client_id: str | None = None) -> PreparedMessage:
        return PreparedMessage(NewMessage(Role.USER, text, client_message_id=client_id), 2, ENCODING)

    first = await world.episodes.append(
        world.tenant, episode.episode_id, [prepared("a", "c1"), prepared("b")]
    )
    # (message, replayed): a retry is answered with the stored message
    assert [(m.seq, m.content, replayed) for m, replayed in first] == [(1, "a", False), (2, "b", False)]
    again = await world.episodes.append(
        world.tenant, episode.episode_id, [prepared("a", "c1"), prepared("c")]
    )
    assert [(m.seq, replayed) for m, replayed in again] == [(1, True), (3, False)]
    read = await world.episodes.get_episode(world.tenant, episode.episode_id)
    assert (read.message_count, read.token_count, read.last_activity_at) == (3, 6, world.clock())
    newest_first = await world.episodes.list_messages(world.tenant, episode.episode_id, None, 2)
    assert [m.seq for m in newest_first] == [3, 2]
    older = await world.episodes.list_messages(world.tenant, episode.episode_id, 2, 10)
    assert older == [first[0][0]]
    with pytest.raises(NotFound):
        await world.episodes.list_messages(unique("tenant"), episode.episode_id, None, 10)


async def test_a_turns_append_returns_its_episodes_pending_memories_only_when_asked(world: World) -> None:
    episode = await world.episode()
    scope = Scope(world.tenant, episode.agent_id, episode.user_id)
    other = await world.episode(agent=await world.agent(), user_id=episode.user_id)
    first, second = (
        world.memory(scope, state=MemoryState.PENDING, episode_id=episode.episode_id) for _ in "ab"
    )
    elsewhere = world.memory(scope, state=MemoryState.PENDING, episode_id=other.episode_id)
    long_term = world.memory(scope)  # PROMOTED: not this episode's working memory
    write = MemoryWrite(
        insert=[(m, None) for m in (second, first, long_term)], episode=(world.tenant, episode.episode_id)
    )
    await world.memories.write(write, NO_CHANGES)
    await world.memories.write(MemoryWrite(insert=[(elsewhere, None)]), NO_CHANGES)

    def prepared(text: str) -> PreparedMessage:
        return PreparedMessage(NewMessage(Role.USER, text), 2, ENCODING)

    stored, replayed, pending, durable = await world.episodes.append_turn(
        world.tenant, episode.episode_id, prepared("hello"), True
    )
    assert (stored.seq, stored.content, replayed) == (1, "hello", False)
    await durable
    expected = sorted([first, second], key=lambda m: (m.created_at, m.memory_id))
    assert [m.memory_id for m in pending] == [m.memory_id for m in expected]
    _, _, unasked, durable = await world.episodes.append_turn(
        world.tenant, episode.episode_id, prepared("again"), False
    )
    assert unasked == []
    await durable  # committed: any read now finds both
    newest_first = await world.episodes.list_messages(world.tenant, episode.episode_id, None, 10)
    assert [m.content for m in newest_first] == ["again", "hello"]
    with pytest.raises(NotFound):
        await world.episodes.append_turn(unique("tenant"), episode.episode_id, prepared("x"), True)


async def test_closing_is_once_with_a_pending_digest_and_refuses_appends_after(world: World) -> None:
    episode = await world.episode()
    world.later()
    closed = await world.close(episode)
    assert (closed.state, closed.close_reason, closed.ended_at) == (
        EpisodeState.CLOSED, CloseReason.USER_ENDED, world.clock(),
    )  # fmt: skip
    assert closed.digest == pending_digest(dataclasses.replace(closed, digest=None), world.clock())
    assert await world.episodes.get_episode(world.tenant, episode.episode_id) == closed
    world.later()
    again = await world.episodes.close_episode(
        world.tenant, episode.episode_id, CloseReason.IDLE_TIMEOUT, "late", world.clock(), NO_CHANGES
    )
    assert again.result == closed
    with pytest.raises(FailedPrecondition):
        await world.say(episode, "too late")
    with pytest.raises(NotFound):
        await world.episodes.close_episode(
            world.tenant, "no-such-episode", CloseReason.USER_ENDED, "", world.clock(), NO_CHANGES
        )


async def test_the_listing_is_newest_first_filtered_and_paged(world: World) -> None:
    a, b = await world.agent(), await world.agent()
    made = []
    for n, (agent, user) in enumerate([(a, "u1"), (a, "u2"), (b, "u1"), (a, "u1"), (b, "u2")]):
        if n != 2:  # two started at one instant: by id
            world.later()
        made.append(await world.episode(agent, user))
    await world.close(made[3])
    newest = sorted(made, key=lambda e: (e.started_at, e.episode_id), reverse=True)

    async def listed(where: EpisodeFilter, after: EpisodeCursor | None = None, limit: int = 10) -> list[str]:
        return ids(await world.episodes.list_episodes(world.tenant, where, after, limit))

    assert await listed(EpisodeFilter()) == ids(newest)
    first = await world.episodes.list_episodes(world.tenant, EpisodeFilter(), None, 2)
    cursor = EpisodeCursor(first[-1].started_at, first[-1].episode_id)
    assert ids(first) + await listed(EpisodeFilter(), cursor) == ids(newest)
    assert await listed(EpisodeFilter(agent_id=a.agent_id, user_id="u1")) == [
        made[3].episode_id,
        made[0].episode_id,
    ]
    assert await listed(EpisodeFilter(state=EpisodeState.CLOSED)) == [made[3].episode_id]
    assert await listed(EpisodeFilter(agent_ids=frozenset({b.agent_id}))) == ids(
        [e for e in newest if e.agent_id == b.agent_id]
    )
    assert await listed(EpisodeFilter(agent_ids=frozenset())) == []
    assert await world.episodes.list_episodes(unique("tenant"), EpisodeFilter(), None, 10) == []


async def test_the_users_of_an_agent_by_id_with_their_episodes(world: World) -> None:
    agent = await world.agent()
    for user in ("u2", "u1", "u2", "u3"):
        world.later()
        episode = await world.episode(agent, user)
    users = cast(UserDirectory, world.episodes)
    listed = await users.list_users(world.tenant, agent.agent_id, None, 2)
    assert [(u.user_id, u.episodes) for u in listed] == [("u1", 1), ("u2", 2)]
    rest = await users.list_users(world.tenant, agent.agent_id, "u2", 10)
    assert [(u.user_id, u.episodes, u.last_activity_at) for u in rest] == [
        ("u3", 1, episode.last_activity_at)
    ]
    assert await users.list_users(unique("tenant"), agent.agent_id, None, 10) == []


async def test_the_users_of_an_agent_count_open_episodes_and_memories_and_memory_only_users(
    world: World,
) -> None:
    agent, other = await world.agent(), await world.agent()
    closed = await world.close(await world.episode(agent, "u1"))
    world.later()
    still_open = await world.episode(agent, "u1")
    await world.episode(other, "u1")
    world.later()
    noted = world.memory(Scope(world.tenant, agent.agent_id, "u1"))
    gone = world.memory(Scope(world.tenant, agent.agent_id, "u1"), superseded_by="mem_newer")
    only = world.memory(Scope(world.tenant, agent.agent_id, "u0"))
    lapsed = world.memory(Scope(world.tenant, agent.agent_id, "u9"), expires_at=world.clock())
    await world.remember(noted, gone, only, lapsed)
    users = cast(UserDirectory, world.episodes)
    listed = await users.list_users(world.tenant, agent.agent_id, None, 10)
    assert listed == [
        UserSummary("u0", 0, only.updated_at, open_episodes=0, memories=1),
        UserSummary("u1", 2, noted.updated_at, open_episodes=1, memories=1),
    ]
    assert closed.last_activity_at < still_open.last_activity_at < noted.updated_at
    assert [u.user_id for u in await users.list_users(world.tenant, agent.agent_id, "u0", 10)] == ["u1"]


@own_database
async def test_the_idle_sweep_judges_each_tenants_episodes_by_its_own_agents_timeout(world: World) -> None:
    quick = await world.agent(idle_timeout=timedelta(minutes=10))
    patient = await world.agent(unique("tenant"), quick.agent_id, idle_timeout=timedelta(days=1))
    first = await world.episode(quick)
    world.later(timedelta(minutes=1))
    second = await world.episode(quick, "u2")
    namesake = await world.episode(patient, "u1", first.episode_id)  # same agent and episode ids
    await world.close(await world.episode(quick))  # closed: never idle
    world.later(timedelta(minutes=10))  # `second` has been idle exactly its timeout: not past it
    assert await world.episodes.idle_episodes(world.clock(), 10) == [first]
    world.later(timedelta(seconds=1))
    assert await world.episodes.idle_episodes(world.clock(), 10) == [first, second]
    assert await world.episodes.idle_episodes(world.clock(), 1) == [first]
    world.later(timedelta(days=1))
    idle = await world.episodes.idle_episodes(world.clock(), 10)
    assert sorted(idle, key=lambda e: e.tenant_id) == sorted(
        [first, second, namesake], key=lambda e: e.tenant_id
    )


async def test_a_retraction_marks_the_message_once_and_only_where_no_projection_folded_it_in(
    world: World,
) -> None:
    episode = await world.episode()
    said = await world.say(episode, "a", "b", "c")
    await world.tool_round(episode, "call_1")  # seqs 4 (the call) and 5 (its result)
    retract = world.episodes.retract_message

    first = (await retract(world.tenant, episode.episode_id, 3, NO_CHANGES)).result
    assert first.retracted_at == world.clock() and first.content == "c"
    world.later()
    assert (await retract(world.tenant, episode.episode_id, 3, NO_CHANGES)).result == first
    log = await world.episodes.list_messages(world.tenant, episode.episode_id, None, 10)
    assert [(m.seq, m.retracted_at is not None) for m in log] == [
        (5, False),
        (4, False),
        (3, True),
        (2, False),
        (1, False),
    ]

    with pytest.raises(FailedPrecondition, match="results"):
        await retract(world.tenant, episode.episode_id, 4, NO_CHANGES)
    await retract(world.tenant, episode.episode_id, 5, NO_CHANGES)
    assert (await retract(world.tenant, episode.episode_id, 4, NO_CHANGES)).result.retracted_at is not None
    await world.tool_round(episode, "call_1")  # the retracted call's id is free again
    newest = await world.episodes.list_messages(world.tenant, episode.episode_id, None, 2)
    assert [m.seq for m in newest] == [7, 6]

    await world.context.save_summary(summary_through(episode, said[1].seq))
    with pytest.raises(FailedPrecondition, match="summary"):
        await retract(world.tenant, episode.episode_id, 2, NO_CHANGES)
    with pytest.raises(NotFound):
        await retract(world.tenant, episode.episode_id, 99, NO_CHANGES)
    with pytest.raises(NotFound):
        await retract(unique("tenant"), episode.episode_id, 1, NO_CHANGES)
    await world.close(episode)
    with pytest.raises(FailedPrecondition, match="closed"):
        await retract(world.tenant, episode.episode_id, 1, NO_CHANGES)


def summary_through(episode: Episode, to_seq: int) -> Summary:
    return Summary(
        episode.tenant_id, episode.episode_id, 1, to_seq, "summary", 2, ENCODING, "test", episode.started_at
    )
