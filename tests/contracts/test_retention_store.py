"""The `RetentionStore` port: closed episodes past their agent's retention_days (capped by
their tenant's limit, if it has one) are soft-deleted, each agent's oldest first, at most a
batch a sweep, their digests (vectors, full text) with them; episodes soft-deleted before a
cut-off are then purged with every row they own, and their ids are free again.

Retention is one job for the whole cluster (`Leadership`): a sweep names no tenant and takes
every tenant's due episodes, so each test runs over a database of its own (`own_database`).
What it must never do is judge one tenant's episodes by another's rules, or touch another
tenant's rows that share an agent or episode id."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

import pytest

from episodic.domain.changes import NO_CHANGES, Change, Declared, EpisodesRemoved
from episodic.domain.drafts import DraftLimits, Push
from episodic.domain.episodes import OpenRequest
from episodic.domain.model import Agent, Episode
from episodic.domain.ports.episodes import EpisodeFilter
from episodic.domain.recall import DigestState, Scope, vector_key
from episodic.domain.retention import SoftDeleted
from episodic.errors import FailedPrecondition, NotFound
from tests.conftest import unique
from tests.contracts.conftest import ENCODING, MODEL, World, own_database
from tests.contracts.test_context_store import model_call, summary
from tests.contracts.test_session_data_store import next_version

pytestmark = own_database

DAY, HOUR, SECOND = timedelta(days=1), timedelta(hours=1), timedelta(seconds=1)


async def ended(world: World, agent: Agent, episode_id: str = "") -> Episode:
    """A new episode of user u1, said something in, closed now and digested READY."""
    episode = await world.episode(agent, "u1", episode_id)
    await world.say(episode, "hello")
    await world.digested(episode, body="Miso the cat")
    return await world.episodes.get_episode(episode.tenant_id, episode.episode_id)


def deleted(*episodes: Episode) -> list[SoftDeleted]:
    return [SoftDeleted(e.tenant_id, e.agent_id, e.user_id, e.episode_id) for e in episodes]


async def sweep(world: World, limit: int = 100, caps: Mapping[str, int] | None = None) -> list[SoftDeleted]:
    recorded = await world.retention_capped(caps or {}).soft_delete_due(world.clock(), limit, NO_CHANGES)
    return recorded.result


async def visible(world: World, episode: Episode) -> bool:
    try:
        await world.episodes.get_episode(episode.tenant_id, episode.episode_id)
    except NotFound:
        return False
    return True


async def reopened(world: World, episode: Episode) -> Episode | None:
    """The episode opened afresh under the same id, or None while that id is still taken (a
    soft-deleted episode keeps its id until it is purged)."""
    request = OpenRequest(episode.agent_id, episode.user_id, episode.episode_id, {}, world.clock())
    try:
        fresh, created = await world.episodes.open_episode(episode.tenant_id, request, ENCODING)
    except FailedPrecondition:  # closed: it cannot be reopened
        return None
    assert created
    return fresh


def episodes_removed(due: list[SoftDeleted]) -> list[Change]:
    """What the retention job declares of a soft delete: the episodes' vectors go."""
    return [EpisodesRemoved([(Scope(d.tenant_id, d.agent_id, d.user_id), d.episode_id) for d in due])]


# --- soft deletes -------------------------------------------------------------------------


async def test_closed_episodes_past_their_agents_retention_are_soft_deleted_with_their_digests(
    world: World,
) -> None:
    agent, forever = await world.agent(retention_days=30), await world.agent(retention_days=0)
    old = await ended(world, agent)
    kept_forever = await ended(world, forever)
    still_open = await world.episode(agent)
    world.later(10 * DAY)
    recent = await ended(world, agent)
    world.later(20 * DAY)  # `old` ended exactly 30 days ago: not yet past its retention
    assert await sweep(world) == []
    world.later(SECOND)
    scope = Scope(world.tenant, agent.agent_id, "u1")
    recorded = await world.retention.soft_delete_due(world.clock(), 100, Declared(episodes_removed, "t"))
    assert recorded.result == deleted(old)
    assert list(recorded.changes) == [EpisodesRemoved([(scope, old.episode_id)])]
    assert await sweep(world) == []  # once
    with pytest.raises(NotFound):
        await world.episodes.get_episode(world.tenant, old.episode_id)
    with pytest.raises(NotFound):
        await world.episodes.list_messages(world.tenant, old.episode_id, None, 10)
    assert await world.digests.get(world.tenant, old.episode_id) is None
    assert await world.digest_keys.vector_keys(world.tenant, MODEL, agent.agent_id) == [
        (scope, vector_key(recent.episode_id, chunk)) for chunk in (0, 1)
    ]
    assert [h.episode_id for h in await world.digests.lexical(scope, "Miso", 10)] == [recent.episode_id]
    listed = await world.episodes.list_episodes(world.tenant, EpisodeFilter(), None, 10)
    assert sorted(e.episode_id for e in listed) == sorted(
        e.episode_id for e in (recent, still_open, kept_forever)
    )


async def test_a_sweep_takes_at_most_limit_each_agents_oldest_first(world: World) -> None:
    a, b = await world.agent(retention_days=1), await world.agent(retention_days=2)
    mine: dict[str, list[Episode]] = {a.agent_id: [], b.agent_id: []}
    for _ in range(3):
        for agent in (a, b):
            mine[agent.agent_id].append(await ended(world, agent))
        world.later(HOUR)
    world.later(3 * DAY)
    first = await sweep(world, limit=4)
    assert len(first) == 4
    for agent_id, episodes in mine.items():  # which agent goes first is not said; within one, by age
        taken = [d for d in first if d.agent_id == agent_id]
        assert taken == deleted(*episodes)[: len(taken)]
    rest = await sweep(world, limit=4)
    assert len(rest) == 2 and set(first + rest) == set(deleted(*mine[a.agent_id], *mine[b.agent_id]))
    assert await sweep(world, limit=4) == []
    assert await sweep(world, limit=0) == []


async def test_a_tenant_cap_shortens_the_retention_of_that_tenants_agents_only(world: World) -> None:
    forever, long = await world.agent(retention_days=0), await world.agent(retention_days=90)
    other = unique("tenant")  # with agents of the same ids and rules
    their_forever = await world.agent(other, forever.agent_id, retention_days=0)
    their_long = await world.agent(other, long.agent_id, retention_days=90)
    mine = [await ended(world, forever), await ended(world, long)]
    theirs = [await ended(world, their_forever), await ended(world, their_long)]
    world.later(20 * DAY)
    caps = {world.tenant: 10, unique("tenant"): 1}
    assert await sweep(world) == []  # uncapped: nobody's retention has run out
    assert sorted(await sweep(world, caps=caps), key=lambda d: d.agent_id) == sorted(
        deleted(*mine), key=lambda d: d.agent_id
    )
    assert [await visible(world, e) for e in theirs] == [True, True]
    world.later(100 * DAY)
    assert await sweep(world, caps=caps) == deleted(theirs[1])  # their own 90 days; 0 keeps forever


async def test_a_sweep_leaves_another_tenants_episode_with_the_same_ids_alone(world: World) -> None:
    agent = await world.agent(retention_days=1)
    namesake = await world.agent(unique("tenant"), agent.agent_id, retention_days=0)
    mine = await ended(world, agent)
    theirs = await ended(world, namesake, mine.episode_id)
    world.later(2 * DAY)
    assert await sweep(world) == deleted(mine)
    assert await world.retention.purge_due(world.clock() + SECOND, 10) == 1
    assert await world.episodes.get_episode(theirs.tenant_id, theirs.episode_id) == theirs
    log = await world.episodes.list_messages(theirs.tenant_id, theirs.episode_id, None, 10)
    assert [m.content for m in log] == ["hello"]
    digest = await world.digests.get(theirs.tenant_id, theirs.episode_id)
    assert digest is not None and digest.state is DigestState.READY
    assert len(await world.digest_keys.vector_keys(theirs.tenant_id, MODEL)) == 2
    assert await reopened(world, mine) is not None  # mine was purged: its id is free in my tenant


# --- purges -------------------------------------------------------------------------------


async def test_purges_take_episodes_soft_deleted_before_the_cut_oldest_first_at_most_limit(
    world: World,
) -> None:
    agent = await world.agent(retention_days=1)
    episodes = [await ended(world, agent) for _ in range(3)]
    world.later(2 * DAY)
    swept_at = []
    for episode in episodes:  # one a sweep, an hour apart
        assert await sweep(world, limit=1) == deleted(episode)
        swept_at.append(world.clock())
        world.later(HOUR)
    assert await world.retention.purge_due(swept_at[0], 10) == 0  # before the cut: strictly
    assert await world.retention.purge_due(swept_at[1], 10) == 1
    assert [await reopened(world, e) is not None for e in episodes] == [True, False, False]
    assert await world.retention.purge_due(world.clock(), 1) == 1
    assert await reopened(world, episodes[1]) is not None and await reopened(world, episodes[2]) is None
    assert await world.retention.purge_due(world.clock(), 1) == 1
    assert await world.retention.purge_due(world.clock(), 10) == 0


async def test_a_purged_episode_leaves_no_row_behind(world: World) -> None:
    agent = await world.agent(retention_days=1)
    episode = await world.episode(agent)
    await world.say(episode, "hello", "again")
    await world.tool_round(episode, "call-1")
    await world.context.save_summary(summary(episode, 2))
    call = model_call(world, episode, request_id="r1")
    await world.context.save_call(call, None)
    await world.sessions.update(world.tenant, episode.episode_id, next_version({"k": "v"}))
    limits = DraftLimits(max_bytes=100)
    await world.drafts.push(world.tenant, episode.episode_id, Push("d1", 0, "draft"), world.clock(), limits)
    await world.digested(episode)
    world.later(2 * DAY)
    assert await sweep(world) == deleted(episode)
    assert await reopened(world, episode) is None  # soft-deleted: its id is still taken
    assert await world.retention.purge_due(world.clock() + SECOND, 10) == 1
    fresh = await reopened(world, episode)
    assert fresh is not None and fresh.message_count == 0
    assert await world.episodes.list_messages(world.tenant, episode.episode_id, None, 10) == []
    sources = await world.context.sources(world.tenant, episode.episode_id, 0, None, 1000)
    assert (sources.summary, sources.messages) == (None, [])
    assert await world.context.call_for_request(world.tenant, episode.episode_id, "r1") is None
    with pytest.raises(NotFound):
        await world.context.get_call(world.tenant, call.model_call_id)
    assert (await world.sessions.get(world.tenant, episode.episode_id)).version == 0
    assert await world.drafts.text_of(world.tenant, episode.episode_id, "d1") is None
    assert await world.digests.get(world.tenant, episode.episode_id) is None
