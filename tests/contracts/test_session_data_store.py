"""The `SessionDataStore` port: one versioned JSON object per episode, version 0 until
written, read-modify-write in one step, gone when expired, per tenant."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from episodic.domain.memories import SessionData
from episodic.domain.model import JsonObject
from episodic.errors import Aborted, NotFound
from tests.conftest import unique
from tests.contracts.conftest import World

Change = Callable[[SessionData], SessionData]


def next_version(data: JsonObject, expires_at: datetime | None = None) -> Change:
    """The next version; updated_at None: the store stamps it with its clock."""

    def change(current: SessionData) -> SessionData:
        return dataclasses.replace(
            current, data=data, version=current.version + 1, updated_at=None, expires_at=expires_at
        )

    return change


async def test_data_never_written_reads_as_the_empty_version_0(world: World) -> None:
    episode = await world.episode()
    assert await world.sessions.get(world.tenant, episode.episode_id) == SessionData(
        world.tenant, episode.episode_id
    )
    # also for an episode that does not exist: reads never fail
    assert (await world.sessions.get(world.tenant, "no-such-episode")).version == 0


async def test_an_update_returns_what_the_change_made_and_a_read_finds_it_stamped(world: World) -> None:
    episode = await world.episode()
    changed = await world.sessions.update(world.tenant, episode.episode_id, next_version({"a": [1, "x"]}))
    assert (changed.version, changed.data, changed.updated_at) == (1, {"a": [1, "x"]}, None)
    read = await world.sessions.get(world.tenant, episode.episode_id)
    assert (read.version, read.data, read.updated_at, read.etag) == (
        1,
        {"a": [1, "x"]},
        world.clock(),
        '"v1"',
    )


async def test_updates_apply_one_after_the_other(world: World) -> None:
    episode = await world.episode()
    for n in range(3):
        world.later()
        await world.sessions.update(world.tenant, episode.episode_id, next_version({"n": n}))
    read = await world.sessions.get(world.tenant, episode.episode_id)
    assert (read.version, read.data, read.updated_at) == (3, {"n": 2}, world.clock())


async def test_a_change_that_raises_writes_nothing(world: World) -> None:
    episode = await world.episode()
    await world.sessions.update(world.tenant, episode.episode_id, next_version({"kept": True}))

    def refuse(current: SessionData) -> SessionData:
        raise Aborted("version mismatch")

    with pytest.raises(Aborted):
        await world.sessions.update(world.tenant, episode.episode_id, refuse)
    read = await world.sessions.get(world.tenant, episode.episode_id)
    assert (read.version, read.data) == (1, {"kept": True})


async def test_a_first_write_for_a_missing_episode_is_not_found(world: World) -> None:
    with pytest.raises(NotFound):
        await world.sessions.update(world.tenant, "no-such-episode", next_version({"a": 1}))
    episode = await world.episode()
    with pytest.raises(NotFound):  # another tenant's episode is missing too
        await world.sessions.update(unique("tenant"), episode.episode_id, next_version({"a": 1}))


async def test_expired_data_reads_as_version_0_and_the_next_write_starts_over(world: World) -> None:
    episode = await world.episode()
    expires = world.clock() + timedelta(minutes=5)
    await world.sessions.update(world.tenant, episode.episode_id, next_version({"a": 1}, expires))
    world.later(timedelta(minutes=4))
    assert (await world.sessions.get(world.tenant, episode.episode_id)).version == 1
    world.later(timedelta(minutes=1))  # expiry is inclusive
    assert (await world.sessions.get(world.tenant, episode.episode_id)).version == 0
    seen: list[int] = []

    def record(current: SessionData) -> SessionData:
        seen.append(current.version)
        return next_version({"b": 2})(current)

    await world.sessions.update(world.tenant, episode.episode_id, record)
    assert seen == [0]
    read = await world.sessions.get(world.tenant, episode.episode_id)
    assert (read.version, read.data, read.expires_at) == (1, {"b": 2}, None)


async def test_session_data_is_per_tenant_and_per_episode(world: World) -> None:
    agent = await world.agent()
    one, two = await world.episode(agent), await world.episode(agent)
    await world.sessions.update(world.tenant, one.episode_id, next_version({"one": 1}))
    assert (await world.sessions.get(world.tenant, two.episode_id)).version == 0
    assert (await world.sessions.get(unique("tenant"), one.episode_id)).version == 0
