"""Live watching on a real server, on SQLite and PostgreSQL: WatchEpisode shows messages,
an assistant reply as PushAssistantDelta grows it (a joiner mid-reply first gets the text
so far) and its FinalizeAssistantMessage; the text in progress is never in the log until
then. The bad input the issue names: watching a closed or erased episode, pushing to a
finalized reply, thousands of watchers of one episode (served, or refused past the cap),
a watcher that stops reading (cut alone, RESOURCE_EXHAUSTED). And across replicas: text
pushed through one server reaches a watcher of another on the same database."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TypeAlias

import grpc
import pytest
from sqlalchemy import func, select

from episodic.bootstrap.containers import App
from episodic.bootstrap.lifecycle import open_app, serve_app
from episodic.store import schema
from episodic.v1 import episode_pb2, episode_service_pb2
from episodic_client import AsyncEpisodicClient, EpisodicClient, FailedPreconditionError
from tests.e2e.helpers import Client, error_reason, expect_code, expect_invalid, user_message
from tests.server_harness import KEY_A, KEY_B, settings_for
from tests.throwaway_postgres import throwaway_postgres

es = episode_service_pb2
Call: TypeAlias = "grpc.aio.UnaryStreamCall[es.WatchEpisodeRequest, es.WatchEpisodeResponse]"
DEADLINE = 30.0  # a guard against a hang on a loaded machine, never a measurement
# A client whose HTTP/2 window fills after a few KiB (no window growth): one that stops
# reading is soon stalled, as a slow browser or a paused tab would be.
SMALL_WINDOW = [("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 1024)]
# gRPC shares one connection between channels with the same arguments; a crowd of watchers
# needs several (a server serves up to max_concurrent_streams streams on each).
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


@dataclass
class Served:
    app: App
    address: str
    stack: AsyncExitStack

    async def client(self, key: str = KEY_A, options: Sequence[tuple[str, int]] = ()) -> Client:
        channel = await self.stack.enter_async_context(
            grpc.aio.insecure_channel(self.address, options=options)
        )
        return Client.of(channel, key)

    async def watch(self, client: Client, episode_id: str, after_seq: int | None = None) -> Call:
        """A watch that has joined its episode's watchers."""
        joined = self.app.state.watch.watchers
        request = es.WatchEpisodeRequest(episode_id=episode_id, after_seq=after_seq)
        call = client.episodes.WatchEpisode(request, metadata=client.auth)
        await until(lambda: self.app.state.watch.watchers > joined or call.done())
        return call

    async def drafts_of(self, episode_id: str) -> int:
        stmt = select(func.count()).where(schema.drafts.c.episode_id == episode_id)
        return int(await self.app.database.read(lambda conn: conn.execute(stmt).scalar_one()))


@asynccontextmanager
async def served(database_url: str, **overrides: object) -> AsyncIterator[Served]:
    async with AsyncExitStack() as stack:
        app = await stack.enter_async_context(open_app(settings_for(database_url, **overrides)))
        server = await stack.enter_async_context(serve_app(app, grace_seconds=1))
        yield Served(app, f"127.0.0.1:{server.port}", stack)


async def until(condition: object) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met before the deadline"
        await asyncio.sleep(0.01)


async def next_event(call: Call) -> es.WatchEpisodeResponse | None:
    """The next response; None at the end of the stream."""
    response: object = await asyncio.wait_for(call.read(), DEADLINE)
    return response if isinstance(response, es.WatchEpisodeResponse) else None


async def events(call: Call, count: int) -> list[es.WatchEpisodeResponse]:
    """The next `count` responses (the stream must not end before)."""
    found = [await next_event(call) for _ in range(count)]
    assert None not in found, f"the stream ended early: {found}"
    return [r for r in found if r is not None]


async def ended(call: Call) -> grpc.StatusCode:
    """Reads to the end; the status the stream ended with."""
    try:
        while await next_event(call) is not None:
            pass
    except grpc.aio.AioRpcError as err:
        return err.code()
    return await call.code()


def kinds(responses: Sequence[es.WatchEpisodeResponse]) -> list[str]:
    return [r.WhichOneof("event") or "" for r in responses]


def text(draft_id: str, offset: int, value: str) -> es.WatchEpisodeResponse:
    return es.WatchEpisodeResponse(draft_text=es.DraftText(draft_id=draft_id, offset=offset, text=value))


async def push(client: Client, episode_id: str, draft_id: str, offset: int, value: str) -> int:
    request = es.PushAssistantDeltaRequest(
        episode_id=episode_id, draft_id=draft_id, offset=offset, text=value
    )
    return (await client.episodes.PushAssistantDelta(request, metadata=client.auth)).length


async def finalize(
    client: Client, episode_id: str, draft_id: str, length: int | None = None
) -> episode_pb2.Message:
    request = es.FinalizeAssistantMessageRequest(episode_id=episode_id, draft_id=draft_id, length=length)
    return (await client.episodes.FinalizeAssistantMessage(request, metadata=client.auth)).message


async def close(client: Client, episode_id: str) -> None:
    await client.episodes.CloseEpisode(es.CloseEpisodeRequest(episode_id=episode_id), metadata=client.auth)


async def test_a_reply_grows_live_a_joiner_gets_it_so_far_and_it_reaches_the_log_when_finalized(
    database_url: str,
) -> None:
    async with served(database_url) as s:
        client = await s.client()
        episode_id = await client.open_episode()
        (said,) = await client.add(episode_id, user_message("Say hello"))
        first = await s.watch(client, episode_id, after_seq=0)
        assert (await events(first, 1))[0].message_appended == said
        assert await push(client, episode_id, "reply-1", 0, "Hel") == 3
        assert await events(first, 1) == [text("reply-1", 0, "Hel")]
        await push(client, episode_id, "reply-1", 3, "lo")
        assert await events(first, 1) == [text("reply-1", 3, "lo")]

        joiner = await s.watch(client, episode_id)
        assert await events(joiner, 1) == [text("reply-1", 0, "Hello")]
        assert [m.content for m in await client.log_of(episode_id)] == ["Say hello"]
        assert await push(client, episode_id, "reply-1", 3, "lo") == 5  # a retry: nothing new

        stored = await finalize(client, episode_id, "reply-1", length=5)
        assert (stored.seq, stored.content, stored.client_message_id) == (2, "Hello", "reply-1")
        assert stored.role == episode_pb2.ROLE_ASSISTANT
        for call in (first, joiner):
            appended, finalized = await events(call, 2)
            assert appended.message_appended == stored
            assert (finalized.draft_finalized.draft_id, finalized.draft_finalized.seq) == ("reply-1", 2)
        assert await finalize(client, episode_id, "reply-1") == stored  # idempotent
        assert await s.drafts_of(episode_id) == 0

        await close(client, episode_id)
        for call in (first, joiner):
            assert kinds(await events(call, 1)) == ["episode_closed"]
            assert await ended(call) == grpc.StatusCode.OK


async def test_pushing_to_a_finalized_reply_is_refused(database_url: str) -> None:
    async with served(database_url) as s:
        client = await s.client()
        episode_id = await client.open_episode()
        await push(client, episode_id, "reply-1", 0, "Done.")
        await finalize(client, episode_id, "reply-1")
        err = await expect_code(
            push(client, episode_id, "reply-1", 5, " More"), grpc.StatusCode.FAILED_PRECONDITION
        )
        assert error_reason(err) == "DRAFT_FINALIZED"


async def test_offsets_count_code_points_as_the_database_does(database_url: str) -> None:
    async with served(database_url) as s:
        client = await s.client()
        episode_id = await client.open_episode()
        assert await push(client, episode_id, "d1", 0, "né🙂") == 3
        assert await push(client, episode_id, "d1", 3, "!") == 4
        assert await push(client, episode_id, "d1", 1, "é🙂!") == 4  # a retry of what is there
        err = await expect_code(push(client, episode_id, "d1", 2, "x"), grpc.StatusCode.FAILED_PRECONDITION)
        assert error_reason(err) == "DRAFT_OFFSET_MISMATCH"
        call = await s.watch(client, episode_id)
        assert await events(call, 1) == [text("d1", 0, "né🙂!")]
        assert (await finalize(client, episode_id, "d1", length=4)).content == "né🙂!"


async def test_watching_a_closed_episode_replays_it_then_sends_the_close(database_url: str) -> None:
    async with served(database_url) as s:
        client = await s.client()
        episode_id = await client.open_episode()
        await client.add(episode_id, user_message("one"), user_message("two"))
        await push(client, episode_id, "never-finalized", 0, "half a rep")
        await close(client, episode_id)
        assert await s.drafts_of(episode_id) == 0  # a close drops replies in progress
        call = client.episodes.WatchEpisode(
            es.WatchEpisodeRequest(episode_id=episode_id, after_seq=1), metadata=client.auth
        )
        replayed = await events(call, 2)
        assert kinds(replayed) == ["message_appended", "episode_closed"]
        assert replayed[0].message_appended.content == "two"
        assert replayed[1].episode_closed.state == episode_pb2.Episode.STATE_CLOSED
        assert await ended(call) == grpc.StatusCode.OK
        err = await expect_code(push(client, episode_id, "late", 0, "x"), grpc.StatusCode.FAILED_PRECONDITION)
        assert error_reason(err) == "EPISODE_CLOSED"


async def test_an_erased_episode_cannot_be_watched_and_its_watches_end_not_found(database_url: str) -> None:
    async with served(database_url) as s:
        client = await s.client()
        episode_id = await client.open_episode(user_id="ellen")
        await push(client, episode_id, "reply-1", 0, "secret in progress")
        call = await s.watch(client, episode_id)
        assert kinds(await events(call, 1)) == ["draft_text"]
        erase = es.EraseUserRequest(user_id="ellen")
        await client.episodes.EraseUser(erase, metadata=client.auth)
        assert await ended(call) == grpc.StatusCode.NOT_FOUND
        assert await s.drafts_of(episode_id) == 0
        again = client.episodes.WatchEpisode(
            es.WatchEpisodeRequest(episode_id=episode_id), metadata=client.auth
        )
        assert await ended(again) == grpc.StatusCode.NOT_FOUND
        await expect_code(push(client, episode_id, "reply-2", 0, "x"), grpc.StatusCode.NOT_FOUND)


async def test_bad_input_gets_a_status_naming_what_is_wrong(database_url: str) -> None:
    async with served(database_url) as s:
        client, other_tenant = await s.client(), await s.client(KEY_B)
        episode_id = await client.open_episode()
        await client.add(episode_id, user_message("hi"))
        watch = client.episodes.WatchEpisode
        past_end = watch(es.WatchEpisodeRequest(episode_id=episode_id, after_seq=2), metadata=client.auth)
        await expect_invalid(past_end.read(), "after_seq")
        await expect_invalid(push(client, episode_id, "bad id!", 0, "x"), "draft_id")
        await expect_invalid(push(client, episode_id, "d1", -1, "x"), "offset")
        await expect_invalid(push(client, episode_id, "d1", 0, "nul \x00"), "text")
        await push(client, episode_id, "d1", 0, "Hello")
        gap = await expect_code(push(client, episode_id, "d1", 9, "x"), grpc.StatusCode.FAILED_PRECONDITION)
        assert error_reason(gap) == "DRAFT_OFFSET_GAP" and "offset 9" in (gap.details() or "")
        changed = await expect_code(
            push(client, episode_id, "d1", 0, "Jello"), grpc.StatusCode.FAILED_PRECONDITION
        )
        assert error_reason(changed) == "DRAFT_OFFSET_MISMATCH"
        short = await expect_code(
            finalize(client, episode_id, "d1", length=4), grpc.StatusCode.FAILED_PRECONDITION
        )
        assert error_reason(short) == "DRAFT_LENGTH_MISMATCH"
        await expect_code(finalize(client, episode_id, "no-such-draft"), grpc.StatusCode.NOT_FOUND)
        await expect_code(push(other_tenant, episode_id, "d1", 5, "!"), grpc.StatusCode.NOT_FOUND)
        await expect_code(finalize(other_tenant, episode_id, "d1"), grpc.StatusCode.NOT_FOUND)
        theirs = watch(es.WatchEpisodeRequest(episode_id=episode_id), metadata=other_tenant.auth)
        assert await ended(theirs) == grpc.StatusCode.NOT_FOUND


async def test_a_watcher_that_stops_reading_is_cut_while_a_fast_one_keeps_going(database_url: str) -> None:
    async with served(database_url, watch_buffer_events=16, watch_buffer_bytes=64 * 1024) as s:
        client, stalled = await s.client(), await s.client(options=SMALL_WINDOW)
        episode_id = await client.open_episode()
        slow, fast = await s.watch(stalled, episode_id), await s.watch(client, episode_id)
        chunk, offset = "x" * 1000, 0
        while s.app.state.watch.watchers == 2:  # the slow one reads nothing meanwhile
            assert offset < 200_000, "the watcher that stopped reading was never cut"
            offset = await push(client, episode_id, "reply-1", offset, chunk)
            assert await events(fast, 1) == [text("reply-1", offset - len(chunk), chunk)]
        offset = await push(client, episode_id, "reply-1", offset, "!")
        assert await events(fast, 1) == [text("reply-1", offset - 1, "!")]
        with pytest.raises(grpc.aio.AioRpcError) as cut:  # noqa: PT012 - draining until the cut is one act
            while await next_event(slow) is not None:
                pass
        assert cut.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error_reason(cut.value) == "WATCHER_TOO_SLOW" and "after_seq" in (cut.value.details() or "")


@pytest.mark.postgres
@pytest.mark.parametrize("crowd", [250, pytest.param(2000, marks=pytest.mark.slow)])
async def test_a_crowd_of_watchers_of_one_episode_all_get_the_reply(postgres_url: str, crowd: int) -> None:
    """On PostgreSQL only: the fan-out is the same on both, and this test is the slowest.
    250 watchers over 8 connections in the default run, 2,000 with `-m slow`."""
    caps = {"max_concurrent_rpcs": crowd + 500, "max_watchers": crowd, "max_watchers_per_episode": crowd}
    # one tenant watches them all: its shares are raised past the server's own watcher cap
    shares = {"tenant_max_watchers": crowd + 1, "tenant_max_streams": crowd + 1}
    shares |= {"tenant_max_rpcs": crowd + 100}
    caps |= shares | {"tenant_rate_burst": 4 * crowd}
    async with served(postgres_url, **caps) as s:
        clients = [await s.client(options=OWN_CONNECTION) for _ in range(8)]
        episode_id = await clients[0].open_episode()
        calls: list[Call] = []
        for start in range(0, crowd, 250):  # a burst of thousands of new calls at once is
            batch = [  # more than gRPC queues for a server before refusing them
                clients[i % len(clients)].episodes.WatchEpisode(
                    es.WatchEpisodeRequest(episode_id=episode_id), metadata=clients[0].auth
                )
                for i in range(start, start + 250)
            ]
            await asyncio.gather(*(call.wait_for_connection() for call in batch))
            calls += batch
        await until(lambda: s.app.state.watch.watchers == crowd)
        await push(clients[0], episode_id, "reply-1", 0, "Hello, everyone")
        stored = await finalize(clients[0], episode_id, "reply-1")
        seqs = await asyncio.gather(*(finalized_seq(call) for call in calls))
        assert set(seqs) == {stored.seq}
        refused = clients[0].episodes.WatchEpisode(
            es.WatchEpisodeRequest(episode_id=episode_id), metadata=clients[0].auth
        )
        err = await expect_code(refused.read(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        assert error_reason(err) == "TOO_MANY_WATCHERS"
        for call in calls:
            call.cancel()


async def finalized_seq(call: Call) -> int:
    while True:
        response = await next_event(call)
        assert response is not None, "the stream ended before the reply was finalized"
        if response.WhichOneof("event") == "draft_finalized":
            return response.draft_finalized.seq


async def test_watchers_past_the_limit_of_one_episode_are_refused(sqlite_url: str) -> None:
    async with served(sqlite_url, max_watchers_per_episode=2) as s:
        client = await s.client()
        episode_id, other = await client.open_episode(), await client.open_episode()
        await s.watch(client, episode_id)
        await s.watch(client, episode_id)
        third = client.episodes.WatchEpisode(
            es.WatchEpisodeRequest(episode_id=episode_id), metadata=client.auth
        )
        err = await expect_code(third.read(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        assert error_reason(err) == "TOO_MANY_WATCHERS_OF_EPISODE"
        await s.watch(client, other)  # another episode still may be watched


@pytest.mark.postgres
async def test_a_watcher_on_one_replica_sees_what_is_pushed_through_another() -> None:
    async with throwaway_postgres() as url, served(url) as a, served(url) as b:
        writer, reader = await a.client(), await b.client()
        episode_id = await writer.open_episode()
        await writer.add(episode_id, user_message("Tell me a story"))
        watcher = await b.watch(reader, episode_id, after_seq=0)
        assert kinds(await events(watcher, 1)) == ["message_appended"]
        await push(writer, episode_id, "story", 0, "Once upon")
        assert await events(watcher, 1) == [text("story", 0, "Once upon")]
        joiner = await b.watch(reader, episode_id)
        assert await events(joiner, 1) == [text("story", 0, "Once upon")]
        await push(writer, episode_id, "story", 9, " a time")
        for call in (watcher, joiner):
            assert await events(call, 1) == [text("story", 9, " a time")]
        stored = await finalize(writer, episode_id, "story")
        for call in (watcher, joiner):
            appended, finalized = await events(call, 2)
            assert appended.message_appended == stored and finalized.draft_finalized.seq == stored.seq
        await close(writer, episode_id)
        for call in (watcher, joiner):
            assert kinds(await events(call, 1)) == ["episode_closed"]


async def test_the_python_clients_watch_push_and_finalize(sqlite_url: str) -> None:
    async with served(sqlite_url) as s, AsyncEpisodicClient(s.address, api_key=KEY_A) as client:
        episode_id = await (await s.client()).open_episode()
        watched = client.watch_episode(episode_id, after_seq=0)
        first = asyncio.ensure_future(anext(watched))
        await until(lambda: s.app.state.watch.watchers == 1)
        assert (await client.push_assistant_delta(episode_id, "r1", 0, "Hi")).length == 2
        assert (await first).draft_text.text == "Hi"
        stored = (await client.finalize_assistant_message(episode_id, "r1", length=2)).message
        assert (await anext(watched)).message_appended == stored
        with pytest.raises(FailedPreconditionError):
            await client.push_assistant_delta(episode_id, "r1", 2, "!")
        await watched.aclose()  # type: ignore[attr-defined]

        def sync_push_and_watch() -> list[str]:
            with EpisodicClient(s.address, api_key=KEY_A) as sync:
                sync.push_assistant_delta(episode_id, "r2", 0, "Bye")
                sync.finalize_assistant_message(episode_id, "r2")
                sync.close_episode(episode_id)
                return [r.WhichOneof("event") or "" for r in sync.watch_episode(episode_id, after_seq=1)]

        assert await asyncio.to_thread(sync_push_and_watch) == ["message_appended", "episode_closed"]
