"""One message appended with a client_message_id: the shape of every AddMessage (on SQLite
its episode and any message stored under that id are found in one read)."""

from __future__ import annotations

import pytest

from episodic.domain.log import PreparedMessage
from episodic.domain.model import NewMessage, Role
from episodic.errors import AlreadyExists, NotFound
from tests.conftest import unique
from tests.contracts.conftest import ENCODING, World


def prepared(text: str, client_id: str) -> PreparedMessage:
    return PreparedMessage(NewMessage(Role.USER, text, client_message_id=client_id), 2, ENCODING)


async def test_a_retried_message_is_answered_with_the_stored_one_and_counted_once(world: World) -> None:
    episode = await world.episode()
    ((first, replayed_first),) = await world.episodes.append(
        world.tenant, episode.episode_id, [prepared("a", "c1")]
    )
    ((again, replayed_again),) = await world.episodes.append(
        world.tenant, episode.episode_id, [prepared("a", "c1")]
    )
    assert (replayed_first, replayed_again) == (False, True)
    assert again == first
    read = await world.episodes.get_episode(world.tenant, episode.episode_id)
    assert (read.message_count, read.token_count) == (1, 2)


async def test_a_client_id_reused_for_other_content_is_refused_and_writes_nothing(world: World) -> None:
    episode = await world.episode()
    await world.episodes.append(world.tenant, episode.episode_id, [prepared("a", "c1")])
    with pytest.raises(AlreadyExists, match="already used"):
        await world.episodes.append(world.tenant, episode.episode_id, [prepared("b", "c1")])
    read = await world.episodes.get_episode(world.tenant, episode.episode_id)
    assert read.message_count == 1


async def test_a_client_id_is_looked_up_in_its_own_episode_only(world: World) -> None:
    one, other = await world.episode(), await world.episode()
    await world.episodes.append(world.tenant, one.episode_id, [prepared("a", "c1")])
    ((stored, replayed),) = await world.episodes.append(world.tenant, other.episode_id, [prepared("b", "c1")])
    assert (stored.episode_id, stored.seq, stored.content, replayed) == (other.episode_id, 1, "b", False)


async def test_a_message_for_an_unknown_episode_is_not_found(world: World) -> None:
    with pytest.raises(NotFound):
        await world.episodes.append(world.tenant, unique("episode"), [prepared("a", "c1")])
