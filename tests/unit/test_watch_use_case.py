"""Live watching over the fakes (service/watch.py + state/watch_hub.py): one read per
change whatever the number of watchers, a joiner mid-reply gets the text so far, a
watcher that falls behind is cut alone, caps refuse with RESOURCE_EXHAUSTED, an erasure
ends its watches NOT_FOUND, a close ends them cleanly, and another replica's signal wakes
a reader. The hub, the watch use case and their wiring are the composition root's (through
tests/unit/use_cases.py). The e2e tests do the same over gRPC and SQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass

import pytest

from episodic.domain.model import NewMessage, Role
from episodic.domain.watch import (
    DraftFinalized,
    DraftText,
    EpisodeClosed,
    Heartbeat,
    MessageAppended,
    WatchEvent,
    WatchLimits,
)
from episodic.errors import AlreadyExists, FailedPrecondition, NotFound, ResourceExhausted
from episodic.service.watch import WatchService
from episodic.state.watch_hub import WatchHub
from tests.fakes import FakeDraftStore, StoredDraft
from tests.unit.use_cases import CALLER, Settings, UseCases, use_cases

STEP_TIMEOUT = 10.0  # a guard against a hang, never a measurement; under the 15 s heartbeat period
QUIET_POLL_SECONDS = 60.0  # readers poll in case a signal was lost: here wakes alone drive reads
Stream = AsyncIterator[WatchEvent]


@dataclass
class Live:
    """One process's watching, as the composition root wires it: its drafts, hub and use case."""

    uc: UseCases
    streams: AsyncExitStack

    def __post_init__(self) -> None:
        self.hub.poll_seconds = QUIET_POLL_SECONDS

    @property
    def drafts(self) -> FakeDraftStore:
        return self.uc.draft_store

    @property
    def hub(self) -> WatchHub:
        return self.uc.watch_hub

    @property
    def watch(self) -> WatchService:
        return self.uc.watch

    async def open(self) -> str:
        await self.uc.new_agent()
        return await self.uc.open()

    async def stream(self, episode_id: str, after_seq: int | None = None) -> Stream:
        stream = self.watch.watch(CALLER, episode_id, after_seq)
        self.streams.push_async_callback(stream.aclose)  # type: ignore[attr-defined]
        return stream

    async def push(self, episode_id: str, draft_id: str, offset: int, text: str) -> int:
        return await self.watch.push(CALLER, episode_id, draft_id, offset, text)


@pytest.fixture
async def live() -> AsyncIterator[Live]:
    async with AsyncExitStack() as streams:
        made = Live(use_cases(Settings(watch_buffer_events=8)), streams)
        yield made
        await made.hub.close()


async def take(stream: Stream, count: int) -> list[WatchEvent]:
    return [await asyncio.wait_for(anext(stream), STEP_TIMEOUT) for _ in range(count)]


async def test_a_joiner_mid_reply_gets_the_text_so_far_then_the_rest(live: Live) -> None:
    episode_id = await live.open()
    first = await live.stream(episode_id)
    await live.push(episode_id, "d1", 0, "Hel")
    assert await take(first, 1) == [DraftText("d1", 0, "Hel")]
    joiner = await live.stream(episode_id)
    assert await take(joiner, 1) == [DraftText("d1", 0, "Hel")]
    await live.push(episode_id, "d1", 3, "lo")
    for stream in (first, joiner):
        assert await take(stream, 1) == [DraftText("d1", 3, "lo")]
    stored = await live.watch.finalize(CALLER, episode_id, "d1", length=5)
    for stream in (first, joiner):
        assert await take(stream, 2) == [MessageAppended(stored), DraftFinalized("d1", stored.seq)]
    assert (stored.role, stored.content, stored.client_message_id) == (Role.ASSISTANT, "Hello", "d1")


async def test_text_in_progress_is_not_in_the_log_until_finalized(live: Live) -> None:
    episode_id = await live.open()
    await live.push(episode_id, "d1", 0, "thinking")
    assert (await live.uc.episodes.list_messages(CALLER, episode_id, 50, "")).items == []
    await live.watch.finalize(CALLER, episode_id, "d1")
    assert [m.content for m in (await live.uc.episodes.list_messages(CALLER, episode_id, 50, "")).items] == [
        "thinking"
    ]


async def test_finalizing_again_returns_the_message_and_pushing_again_is_refused(live: Live) -> None:
    episode_id = await live.open()
    await live.push(episode_id, "d1", 0, "done")
    stored = await live.watch.finalize(CALLER, episode_id, "d1")
    assert await live.watch.finalize(CALLER, episode_id, "d1") == stored
    with pytest.raises(FailedPrecondition) as caught:
        await live.push(episode_id, "d1", 4, "!")
    assert caught.value.reason == "DRAFT_FINALIZED"


async def test_many_watchers_cost_one_read_per_change(live: Live) -> None:
    live.hub.limits = WatchLimits(per_episode=500, per_process=500, per_tenant=500)
    episode_id = await live.open()
    streams = [await live.stream(episode_id) for _ in range(300)]
    await live.push(episode_id, "d1", 0, "a")
    for stream in streams:
        assert await take(stream, 1) == [DraftText("d1", 0, "a")]
    before = live.drafts.reads
    await live.push(episode_id, "d1", 1, "b")
    for stream in streams:
        assert await take(stream, 1) == [DraftText("d1", 1, "b")]
    assert live.drafts.reads - before == 1


async def test_a_watcher_that_falls_behind_is_cut_alone(live: Live) -> None:
    episode_id = await live.open()
    slow, fast = await live.stream(episode_id), await live.stream(episode_id)
    await live.push(episode_id, "d1", 0, "0")
    await take(slow, 1)  # joined; from now on it reads nothing
    await take(fast, 1)
    for i in range(1, 20):
        await live.push(episode_id, "d1", i, str(i % 10))
        assert await take(fast, 1) == [DraftText("d1", i, str(i % 10))]
    with pytest.raises(ResourceExhausted) as caught:
        await take(slow, 1)
    assert caught.value.reason == "WATCHER_TOO_SLOW" and "after_seq 0" in caught.value.message
    await live.push(episode_id, "d1", 20, "!")
    assert await take(fast, 1) == [DraftText("d1", 20, "!")]


async def test_watchers_beyond_the_caps_are_refused(live: Live) -> None:
    live.hub.limits = WatchLimits(per_episode=2, per_process=3)
    first, second = await live.open(), await live.uc.open(episode_id="second")
    waiting = [await joined(live, first), await joined(live, first)]
    with pytest.raises(ResourceExhausted) as per_episode:
        await anext(await live.stream(first))
    waiting.append(await joined(live, second))
    with pytest.raises(ResourceExhausted) as per_process:
        await anext(await live.stream(second))
    assert (per_episode.value.reason, per_process.value.reason) == (
        "TOO_MANY_WATCHERS_OF_EPISODE",
        "TOO_MANY_WATCHERS",
    )
    for step in waiting:
        step.cancel()
    await asyncio.gather(*waiting, return_exceptions=True)
    assert live.hub.watchers == 0


async def joined(live: Live, episode_id: str) -> asyncio.Future[WatchEvent]:
    """A watch that has joined (at its first step) and waits for an event."""
    before = live.hub.watchers
    step = asyncio.ensure_future(anext(await live.stream(episode_id)))
    while live.hub.watchers == before:
        assert not step.done(), step.result()
        await asyncio.sleep(0)
    return step


async def test_an_erased_episode_ends_its_watches_not_found(live: Live) -> None:
    episode_id = await live.open()
    stream = await live.stream(episode_id)
    await live.push(episode_id, "d1", 0, "x")
    await take(stream, 1)
    await live.uc.erasure.erase_user(CALLER, "mary")
    with pytest.raises(NotFound):
        await take(stream, 1)
    assert live.hub.watchers == 0


async def test_a_close_ends_watches_with_the_closed_episode(live: Live) -> None:
    episode_id = await live.open()
    stream = await live.stream(episode_id)
    await live.push(episode_id, "d1", 0, "x")
    await take(stream, 1)
    closed = await live.uc.close(episode_id)
    assert await take(stream, 1) == [EpisodeClosed(closed)]
    with pytest.raises(StopAsyncIteration):
        await anext(stream)
    assert live.drafts.drafts == {}  # a close drops replies in progress


async def test_a_closed_episode_replays_then_ends(live: Live) -> None:
    episode_id = await live.open()
    await live.uc.say(episode_id, "hi", "hello")
    closed = await live.uc.close(episode_id)
    events = [event async for event in await live.stream(episode_id, after_seq=1)]
    assert [type(e) for e in events] == [MessageAppended, EpisodeClosed]
    assert events[-1] == EpisodeClosed(closed)


async def test_the_last_watcher_leaving_stops_the_reader(live: Live) -> None:
    episode_id = await live.open()
    stream = await live.stream(episode_id)
    await live.push(episode_id, "d1", 0, "x")
    await take(stream, 1)
    await stream.aclose()  # type: ignore[attr-defined]
    assert live.hub.watchers == 0
    reads = live.drafts.reads
    await live.push(episode_id, "d1", 1, "y")
    await asyncio.sleep(0.05)
    assert live.drafts.reads == reads


async def test_a_quiet_stream_sends_heartbeats_with_the_last_seq(live: Live) -> None:
    live.watch.heartbeat_seconds = 0.01
    episode_id = await live.open()
    await live.uc.say(episode_id, "hi")
    assert await take(await live.stream(episode_id), 1) == [Heartbeat(1)]


async def test_a_signal_from_another_replica_wakes_the_reader() -> None:
    async with AsyncExitStack() as streams:
        a = Live(use_cases(), streams)  # A writes; B only watches
        b = Live(use_cases(replica_of=a.uc), streams)  # one database; each hears the other's signals
        episode_id = await a.open()
        stream = await b.stream(episode_id)
        await a.push(episode_id, "d1", 0, "from A")
        assert await take(stream, 1) == [DraftText("d1", 0, "from A")]
        await a.watch.finalize(CALLER, episode_id, "d1")
        assert [type(e) for e in await take(stream, 2)] == [MessageAppended, DraftFinalized]
        await a.hub.close()
        await b.hub.close()


async def test_a_message_appended_reaches_watchers(live: Live) -> None:
    episode_id = await live.open()
    step = await joined(live, episode_id)
    stored, _ = await live.uc.episodes.add_message(CALLER, episode_id, NewMessage(Role.USER, "hi"))
    assert await asyncio.wait_for(step, STEP_TIMEOUT) == MessageAppended(stored)


async def test_finalizing_a_draft_whose_id_an_add_message_took_is_already_exists(live: Live) -> None:
    episode_id = await live.open()
    await live.push(episode_id, "d1", 0, "the streamed reply")
    await live.uc.episodes.add_message(CALLER, episode_id, NewMessage(Role.ASSISTANT, "other", "d1"))
    with pytest.raises(AlreadyExists) as caught:
        await live.watch.finalize(CALLER, episode_id, "d1")
    assert caught.value.reason == "CLIENT_MESSAGE_ID_REUSED"
    assert "draft_id 'd1'" in caught.value.message
    assert await live.drafts.text_of(CALLER.tenant_id, episode_id, "d1") == "the streamed reply"


async def test_a_finalization_whose_draft_was_not_removed_is_retried_as_the_same_message(live: Live) -> None:
    episode_id = await live.open()
    await live.push(episode_id, "d1", 0, "done")
    stored = await live.watch.finalize(CALLER, episode_id, "d1")
    held = live.drafts.drafts.setdefault((CALLER.tenant_id, episode_id), {})
    held["d1"] = StoredDraft("done", live.uc.clock())  # as if the removal after the append was lost
    assert await live.watch.finalize(CALLER, episode_id, "d1") == stored
    assert await live.drafts.text_of(CALLER.tenant_id, episode_id, "d1") is None
