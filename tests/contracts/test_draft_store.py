"""The `DraftStore` port: replies in progress pushed piece by piece (offsets in code points,
retries answered alike, gaps and mismatches refused, a few per episode), read whole or
from a known length, and the reads that watch an episode live; per tenant."""

from __future__ import annotations

from datetime import timedelta

import pytest

from episodic.domain.drafts import DraftLimits, Push, Pushed
from episodic.domain.log import PreparedMessage
from episodic.domain.model import Episode, EpisodeState, NewMessage, Role
from episodic.domain.watch import DraftChange
from episodic.errors import FailedPrecondition, InvalidArgument, NotFound
from tests.conftest import unique
from tests.contracts.conftest import ENCODING, World

LIMITS = DraftLimits(max_bytes=64, per_episode=2, idle=timedelta(minutes=10))


async def push(world: World, episode: Episode, draft_id: str, offset: int, text: str) -> Pushed:
    return await world.drafts.push(
        episode.tenant_id, episode.episode_id, Push(draft_id, offset, text), world.clock(), LIMITS
    )


async def refused(world: World, episode: Episode, draft_id: str, offset: int, text: str) -> str:
    """The reason a push is refused for."""
    with pytest.raises(FailedPrecondition) as caught:
        await push(world, episode, draft_id, offset, text)
    return caught.value.reason


async def text(world: World, episode: Episode, draft_id: str) -> str | None:
    return await world.drafts.text_of(episode.tenant_id, episode.episode_id, draft_id)


async def test_pushes_build_a_draft_in_code_points_and_a_retry_writes_nothing(world: World) -> None:
    episode = await world.episode()
    assert await push(world, episode, "d1", 0, "Héllo") == Pushed(5, True)
    assert await push(world, episode, "d1", 5, ", wörld") == Pushed(12, True)
    assert await push(world, episode, "d1", 5, ", wörld") == Pushed(12, False)  # a retry
    assert await push(world, episode, "d1", 3, "lo, wö") == Pushed(12, False)  # an overlap only
    assert await push(world, episode, "d1", 10, "ld!") == Pushed(13, True)  # overlaps, then grows
    assert await text(world, episode, "d1") == "Héllo, wörld!"
    assert await text(world, episode, "unknown") is None


async def test_a_gap_or_a_different_text_is_refused_and_changes_nothing(world: World) -> None:
    episode = await world.episode()
    await push(world, episode, "d1", 0, "abc")
    assert await refused(world, episode, "d1", 4, "e") == "DRAFT_OFFSET_GAP"
    assert await refused(world, episode, "d1", 1, "xc") == "DRAFT_OFFSET_MISMATCH"
    assert await refused(world, episode, "d2", 1, "a") == "DRAFT_OFFSET_GAP"  # a new draft starts at 0
    with pytest.raises(InvalidArgument):
        await push(world, episode, "d1", 3, "é" * 31)  # 3 + 62 bytes: over the limit
    assert await text(world, episode, "d1") == "abc"
    assert await text(world, episode, "d2") is None


async def test_pushes_to_a_missing_or_closed_episode_or_a_finalized_draft_are_refused(world: World) -> None:
    episode = await world.episode()
    with pytest.raises(NotFound):
        await push(world, await_missing(episode), "d1", 0, "a")
    final = NewMessage(Role.ASSISTANT, "done", client_message_id="d1")
    await world.episodes.append(world.tenant, episode.episode_id, [PreparedMessage(final, 1, ENCODING)])
    assert await refused(world, episode, "d1", 0, "done") == "DRAFT_FINALIZED"
    finalized = await world.drafts.finalized(world.tenant, episode.episode_id, "d1")
    assert finalized is not None and (finalized.seq, finalized.content) == (1, "done")
    assert await world.drafts.finalized(world.tenant, episode.episode_id, "d2") is None
    await world.close(episode)
    assert await refused(world, episode, "d2", 0, "a") == "EPISODE_CLOSED"


def await_missing(episode: Episode) -> Episode:
    """The same episode id in another tenant: missing there."""
    return Episode(
        unique("tenant"), episode.episode_id, episode.agent_id, episode.user_id, episode.state,
        episode.token_encoding, episode.started_at, episode.last_activity_at,
    )  # fmt: skip


async def test_a_new_draft_over_the_cap_replaces_only_an_idle_one(world: World) -> None:
    episode = await world.episode()
    await push(world, episode, "old", 0, "a")
    world.later(timedelta(minutes=5))
    await push(world, episode, "recent", 0, "b")
    assert await refused(world, episode, "third", 0, "c") == "TOO_MANY_DRAFTS"
    world.later(timedelta(minutes=5))  # "old" has been idle for 10 minutes
    assert await push(world, episode, "third", 0, "c") == Pushed(1, True)
    assert [await text(world, episode, d) for d in ("old", "recent", "third")] == [None, "b", "c"]


async def test_remove_and_discard_all(world: World) -> None:
    agent = await world.agent()
    episode, other = await world.episode(agent), await world.episode(agent)
    await push(world, episode, "d1", 0, "a")
    await push(world, episode, "d2", 0, "b")
    await push(world, other, "d1", 0, "c")
    await world.drafts.remove(world.tenant, episode.episode_id, "d1")
    await world.drafts.remove(world.tenant, episode.episode_id, "never")  # nothing to remove
    assert [await text(world, episode, d) for d in ("d1", "d2")] == [None, "b"]
    await world.drafts.discard_all(world.tenant, episode.episode_id)
    assert await text(world, episode, "d2") is None
    assert await text(world, other, "d1") == "c"
    assert await push(world, episode, "d2", 0, "b") == Pushed(1, True)  # starts over


async def test_a_live_read_brings_the_episode_its_drafts_from_the_known_length_and_new_messages(
    world: World,
) -> None:
    episode = await world.episode()
    said = await world.say(episode, "one", "two", "three")
    await push(world, episode, "d1", 0, "Hello")
    await push(world, episode, "d2", 0, "Hi")
    read = await world.drafts.read_live(world.tenant, episode.episode_id, 1, {"d1": 3, "d2": 2}, 10)
    assert (read.episode.episode_id, read.episode.message_count) == (episode.episode_id, 3)
    assert dict(read.drafts) == {"d1": DraftChange(5, 3, "lo"), "d2": DraftChange(2)}
    assert (list(read.messages), read.complete) == (said[1:], True)
    unknown = await world.drafts.read_live(world.tenant, episode.episode_id, 0, {"d1": 9}, 2)
    assert dict(unknown.drafts) == {"d1": DraftChange(5, 0, "Hello"), "d2": DraftChange(2, 0, "Hi")}
    assert (list(unknown.messages), unknown.complete) == (said[:2], False)


async def test_a_closed_episode_reads_with_no_drafts_and_a_missing_one_is_not_found(world: World) -> None:
    episode = await world.episode()
    await push(world, episode, "d1", 0, "Hello")
    await world.close(episode)
    read = await world.drafts.read_live(world.tenant, episode.episode_id, 0, {}, 10)
    assert (read.episode.state, dict(read.drafts)) == (EpisodeState.CLOSED, {})
    assert read.episode.digest is not None  # as GetEpisode returns it
    with pytest.raises(NotFound):
        await world.drafts.read_live(unique("tenant"), episode.episode_id, 0, {}, 10)
    with pytest.raises(NotFound):
        await world.drafts.read_live(world.tenant, "no-such-episode", 0, {}, 10)


async def test_messages_after_replay_a_range_a_page_at_a_time(world: World) -> None:
    episode = await world.episode()
    said = await world.say(episode, *[f"m{n}" for n in range(6)])
    assert await world.drafts.messages_after(world.tenant, episode.episode_id, 1, 5, 2) == said[1:3]
    assert await world.drafts.messages_after(world.tenant, episode.episode_id, 3, 5, 10) == said[3:5]
    assert await world.drafts.messages_after(world.tenant, episode.episode_id, 6, 9, 10) == []
    assert await world.drafts.messages_after(unique("tenant"), episode.episode_id, 0, 9, 10) == []
