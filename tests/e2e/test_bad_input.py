"""Bad input over the wire: every malformed, oversized, foreign or out-of-order request
gets a clean status code (never INTERNAL or UNKNOWN), INVALID_ARGUMENT names the field in
a google.rpc.BadRequest, a rejected write leaves nothing behind, and the server keeps
answering afterwards."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.protobuf import duration_pb2, field_mask_pb2, struct_pb2, timestamp_pb2

from episodic.v1 import (
    agent_pb2,
    agent_service_pb2,
    diagnostics_service_pb2,
    episode_pb2,
    episode_service_pb2,
    memory_service_pb2,
)
from tests.conftest import unique
from tests.e2e.helpers import (
    Client,
    assert_serving,
    describe,
    expect_code,
    expect_invalid,
    tool_call_message,
    tool_result_message,
    user_message,
    violations,
)
from tests.server_harness import KEY_A, KEY_B, RunningServer, bearer

es = episode_service_pb2
Call = Callable[[Client, str, str], Awaitable[object]]  # (client, agent_id, episode_id) -> RPC
MAX_CONTENT_BYTES = 256 * 1024
INT32_MAX = 2**31 - 1
ALREADY = grpc.StatusCode.ALREADY_EXISTS


@pytest.fixture
def database_url(postgres_url: str) -> str:
    """One backend, PostgreSQL: bad input must be refused before any store sees it, and
    PostgreSQL is the stricter one (a NUL byte or a lone surrogate in text is an error
    there, not in SQLite); the stores' behaviour on both is tests/contracts'."""
    return postgres_url


@pytest.fixture(autouse=True)
async def _server_still_answers_afterwards(server: RunningServer) -> AsyncIterator[None]:
    yield
    async with server.channel() as channel:
        await assert_serving(channel, bearer(KEY_A))


@pytest.fixture
async def channel(server: RunningServer) -> AsyncIterator[grpc.aio.Channel]:
    async with server.channel() as ch:
        yield ch


@pytest.fixture
def alice(channel: grpc.aio.Channel) -> Client:
    """Tenant A."""
    return Client.of(channel, KEY_A)


@pytest.fixture
def bob(channel: grpc.aio.Channel) -> Client:
    """Tenant B."""
    return Client.of(channel, KEY_B)


def add_message(c: Client, episode_id: str, message: episode_pb2.MessageInput) -> Awaitable[object]:
    return c.episodes.AddMessage(
        es.AddMessageRequest(episode_id=episode_id, message=message), metadata=c.auth
    )


def assistant_calling(tool_input: struct_pb2.Struct) -> episode_pb2.MessageInput:
    message = tool_call_message("call-1")
    message.tool_calls[0].input.CopyFrom(tool_input)
    return message


def timestamp(value: datetime) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(value)
    return ts


async def expect_code_only(call: Awaitable[object], code: grpc.StatusCode) -> grpc.aio.AioRpcError:
    """For statuses grpc itself produces, which carry no rich details."""
    try:
        await call
    except grpc.aio.AioRpcError as err:
        assert err.code() == code, f"want {code.name}, got {err.code().name}: {err.details()}"  # noqa: PT017 - a helper returning the error
        return err
    raise AssertionError(f"the call succeeded, want {code.name}")


# --- content and roles ------------------------------------------------------------------


async def test_empty_content_is_invalid_argument_naming_message_content(alice: Client) -> None:
    episode = await alice.open_episode()
    await expect_invalid(add_message(alice, episode, user_message("")), "message.content")
    assert await alice.log_of(episode) == []


async def test_content_over_256_kib_is_rejected_and_content_at_the_limit_is_accepted(alice: Client) -> None:
    episode = await alice.open_episode()
    text = ("lorem ipsum dolor sit amet " * 10_000)[:MAX_CONTENT_BYTES]
    await expect_invalid(add_message(alice, episode, user_message(text + "x")), "message.content")
    multibyte = "é" * (MAX_CONTENT_BYTES // 2 + 1)  # fewer characters than the limit, more bytes
    await expect_invalid(add_message(alice, episode, user_message(multibyte)), "message.content")
    assert await alice.log_of(episode) == []
    await add_message(alice, episode, user_message(text))
    assert [m.content for m in await alice.log_of(episode)] == [text]


async def test_a_request_over_the_4_mib_receive_limit_is_resource_exhausted(alice: Client) -> None:
    episode = await alice.open_episode()
    err = await expect_code_only(
        add_message(alice, episode, user_message("x" * (5 * 1024 * 1024))), grpc.StatusCode.RESOURCE_EXHAUSTED
    )
    assert "larger than max" in (err.details() or "")
    assert await alice.log_of(episode) == []


@pytest.mark.parametrize(
    "role", [episode_pb2.ROLE_UNSPECIFIED, 99, -1], ids=["unspecified", "unknown-99", "negative"]
)
async def test_an_unknown_or_missing_role_is_invalid_argument_naming_message_role(
    alice: Client, role: int
) -> None:
    episode = await alice.open_episode()
    message = user_message("hello")
    message.role = episode_pb2.Role.ValueType(role)
    await expect_invalid(add_message(alice, episode, message), "message.role")
    assert await alice.log_of(episode) == []


# --- ids --------------------------------------------------------------------------------


MISSING_IDS: dict[str, tuple[Call, str]] = {
    "AddMessage.episode_id": (lambda c, a, e: add_message(c, "", user_message("hi")), "episode_id"),
    "AddMessages.episode_id": (lambda c, a, e: c.add("", user_message("hi")), "episode_id"),
    "OpenEpisode.agent_id": (lambda c, a, e: c.open_episode(agent_id="", user_id="mary"), "agent_id"),
    "OpenEpisode.user_id": (lambda c, a, e: c.open_episode(agent_id=a, user_id=""), "user_id"),
    "GetEpisode.episode_id": (lambda c, a, e: c.get_episode(""), "episode_id"),
    "CloseEpisode.episode_id": (
        lambda c, a, e: c.episodes.CloseEpisode(es.CloseEpisodeRequest(), metadata=c.auth),
        "episode_id",
    ),
    "ListMessages.episode_id": (
        lambda c, a, e: c.episodes.ListMessages(es.ListMessagesRequest(), metadata=c.auth),
        "episode_id",
    ),
    "GetAgent.agent_id": (
        lambda c, a, e: c.agents.GetAgent(agent_service_pb2.GetAgentRequest(), metadata=c.auth),
        "agent_id",
    ),
    "CreateAgent.agent.agent_id": (
        lambda c, a, e: c.agents.CreateAgent(agent_service_pb2.CreateAgentRequest(), metadata=c.auth),
        "agent.agent_id",
    ),
    "ToolCall.tool_call_id": (
        lambda c, a, e: add_message(c, e, tool_call_message("")),
        "message.tool_calls[0].tool_call_id",
    ),
    "ToolResult.tool_call_id": (
        lambda c, a, e: add_message(c, e, tool_result_message("")),
        "message.tool_result.tool_call_id",
    ),
}


@pytest.mark.parametrize("case", list(MISSING_IDS))
async def test_a_missing_id_is_invalid_argument_naming_it(alice: Client, case: str) -> None:
    call, field = MISSING_IDS[case]
    agent = await alice.create_agent()
    episode = await alice.open_episode(agent)
    await expect_invalid(call(alice, agent, episode), field)
    assert await alice.log_of(episode) == []


MALFORMED_IDS = {
    "space": "has space",
    "200-chars": "a" * 200,
    "129-chars": "a" * 129,
    "unicode": "épisode-1",
    "leading-dash": "-ep1",
    "leading-dot": ".ep1",
    "trailing-newline": "ep1\n",
    "slash": "ep/1",
}


@pytest.mark.parametrize("bad_id", list(MALFORMED_IDS.values()), ids=list(MALFORMED_IDS))
async def test_a_malformed_id_is_invalid_argument_wherever_it_is_sent(alice: Client, bad_id: str) -> None:
    agent = await alice.create_agent()
    episode = await alice.open_episode(agent)
    cases: list[tuple[Callable[[], Awaitable[object]], str]] = [
        (lambda: alice.open_episode(agent_id=agent, episode_id=bad_id), "episode_id"),
        (lambda: alice.open_episode(agent_id=agent, user_id=bad_id), "user_id"),
        (lambda: alice.open_episode(agent_id=bad_id), "agent_id"),
        (lambda: alice.get_episode(bad_id), "episode_id"),
        (lambda: add_message(alice, bad_id, user_message("hi")), "episode_id"),
        (
            lambda: add_message(alice, episode, user_message("hi", client_id=bad_id)),
            "message.client_message_id",
        ),
        (
            lambda: add_message(alice, episode, tool_call_message(bad_id)),
            "message.tool_calls[0].tool_call_id",
        ),
        (lambda: alice.create_agent(agent_id=bad_id), "agent.agent_id"),
        (
            lambda: alice.episodes.ListEpisodes(es.ListEpisodesRequest(user_id=bad_id), metadata=alice.auth),
            "user_id",
        ),
    ]
    for call, field in cases:
        await expect_invalid(call(), field)
    assert await alice.log_of(episode) == []


async def test_an_id_of_exactly_128_characters_is_accepted(alice: Client) -> None:
    longest = unique("a").ljust(128, "z")
    agent = await alice.create_agent(agent_id=longest)
    episode = await alice.open_episode(agent, user_id=longest, episode_id=longest)
    assert episode == longest


# --- paging -----------------------------------------------------------------------------


LISTINGS: dict[str, Callable[[Client, str, int, str], Awaitable[object]]] = {
    "ListEpisodes": lambda c, e, size, token: c.episodes.ListEpisodes(
        es.ListEpisodesRequest(page_size=size, page_token=token), metadata=c.auth
    ),
    "ListMessages": lambda c, e, size, token: c.episodes.ListMessages(
        es.ListMessagesRequest(episode_id=e, page_size=size, page_token=token), metadata=c.auth
    ),
    "ListAgents": lambda c, e, size, token: c.agents.ListAgents(
        agent_service_pb2.ListAgentsRequest(page_size=size, page_token=token), metadata=c.auth
    ),
    # the request is checked before the agent is looked up: any agent id will do
    "ListUsers": lambda c, e, size, token: c.episodes.ListUsers(
        es.ListUsersRequest(agent_id="any-agent", page_size=size, page_token=token), metadata=c.auth
    ),
}


async def outcome(call: Awaitable[object], field: str) -> str:
    """What a call that should be INVALID_ARGUMENT naming `field` did instead (if anything),
    so that one test can report on every listing at once."""
    try:
        await call
    except grpc.aio.AioRpcError as err:
        if err.code() == grpc.StatusCode.INVALID_ARGUMENT and field in violations(err):
            return f"INVALID_ARGUMENT naming {field}"
        return describe(err)
    return "OK"


async def expect_every_listing_invalid(
    alice: Client, episode: str, size: int, token: str, field: str
) -> None:
    outcomes = {
        name: await outcome(call(alice, episode, size, token), field) for name, call in LISTINGS.items()
    }
    assert outcomes == dict.fromkeys(LISTINGS, f"INVALID_ARGUMENT naming {field}")


@pytest.mark.parametrize("size", [-1, -(2**31)])
async def test_a_negative_page_size_is_invalid_argument(alice: Client, size: int) -> None:
    episode = await alice.open_episode()
    await expect_every_listing_invalid(alice, episode, size, "", "page_size")


async def test_a_huge_page_size_is_read_as_the_maximum_of_1000(alice: Client) -> None:
    episode = await alice.open_episode()
    for start, count in ((0, 500), (500, 500), (1000, 1)):
        await alice.add(episode, *(user_message(f"turn {i}") for i in range(start, start + count)))
    page = await alice.episodes.ListMessages(
        es.ListMessagesRequest(episode_id=episode, page_size=INT32_MAX), metadata=alice.auth
    )
    assert len(page.messages) == 1000 and page.next_page_token
    assert (page.messages[0].seq, page.messages[-1].seq) == (1001, 2)
    rest = await alice.episodes.ListMessages(
        es.ListMessagesRequest(episode_id=episode, page_size=INT32_MAX, page_token=page.next_page_token),
        metadata=alice.auth,
    )
    assert [m.seq for m in rest.messages] == [1] and not rest.next_page_token
    for listing in ("ListEpisodes", "ListAgents"):
        await LISTINGS[listing](alice, episode, INT32_MAX, "")


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


GARBAGE_TOKENS = {
    "not-base64": "this is not a token!",
    "non-ascii": "tökén",
    "base64-not-json": b64(b"\x00\x01\x02garbage"),
    "json-list": b64(b"[1, 2, 3]"),
    "json-without-position": b64(b'{"q": "0000000000000000"}'),
    "position-not-an-object": b64(b'{"p": [1], "q": "0000000000000000"}'),
    "deeply-nested-json": b64(b"[" * 10_000),
}


@pytest.mark.parametrize("token", list(GARBAGE_TOKENS.values()), ids=list(GARBAGE_TOKENS))
async def test_a_garbage_page_token_is_invalid_argument(alice: Client, token: str) -> None:
    episode = await alice.open_episode()
    await expect_every_listing_invalid(alice, episode, 10, token, "page_token")


def tampered(token: str, position: dict[str, object]) -> str:
    """A server-issued token with its position replaced, as a client might edit it."""
    try:
        body = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        body["p"] = position
    except (binascii.Error, ValueError, TypeError, KeyError):  # tokens became opaque: still tamper
        return token[:-4] + "AAAA"
    return b64(json.dumps(body).encode())


TAMPERED_POSITIONS: dict[str, tuple[str, dict[str, object]]] = {
    "messages-seq-as-text": ("ListMessages", {"before_seq": "2"}),
    "messages-seq-beyond-int64": ("ListMessages", {"before_seq": 10**30}),
    "episodes-time-not-a-time": ("ListEpisodes", {"started_at": "yesterday", "episode_id": "x"}),
    "episodes-time-without-zone": ("ListEpisodes", {"started_at": "2020-01-01T00:00:00", "episode_id": "x"}),
    "episodes-time-out-of-range": (
        "ListEpisodes",
        {"started_at": "9999-12-31T23:59:59-14:00", "episode_id": "x"},
    ),
    "agents-unknown-key": ("ListAgents", {"agent": "x"}),
}


@pytest.mark.parametrize("case", list(TAMPERED_POSITIONS))
async def test_a_tampered_page_token_is_invalid_argument(alice: Client, case: str) -> None:
    listing, position = TAMPERED_POSITIONS[case]
    agent = await alice.create_agent()  # two agents, two episodes, two messages: two pages each
    await alice.create_agent()
    episode = await alice.open_episode(agent)
    await alice.open_episode(agent)
    if listing == "ListMessages":
        await alice.add(episode, user_message("one"), user_message("two"))
    first = await LISTINGS[listing](alice, episode, 1, "")
    token = first.next_page_token  # type: ignore[attr-defined]
    assert token, "need a second page to have a token to tamper with"
    await expect_invalid(LISTINGS[listing](alice, episode, 1, tampered(token, position)), "page_token")


async def test_a_page_token_replayed_against_another_query_is_invalid_argument(alice: Client) -> None:
    agent = await alice.create_agent()
    first, second = await alice.open_episode(agent), await alice.open_episode(agent)
    for episode in (first, second):
        await alice.add(episode, user_message("one"), user_message("two"))
    page = await alice.episodes.ListMessages(
        es.ListMessagesRequest(episode_id=first, page_size=1), metadata=alice.auth
    )
    other_episode = es.ListMessagesRequest(episode_id=second, page_size=1, page_token=page.next_page_token)
    await expect_invalid(alice.episodes.ListMessages(other_episode, metadata=alice.auth), "page_token")

    await alice.open_episode(agent, user_id="mary")
    listing = await alice.episodes.ListEpisodes(
        es.ListEpisodesRequest(user_id="mary", page_size=1), metadata=alice.auth
    )
    token = listing.next_page_token
    assert token
    for changed in (
        es.ListEpisodesRequest(user_id="john", page_token=token),
        es.ListEpisodesRequest(user_id="mary", agent_id=agent, page_token=token),
        es.ListEpisodesRequest(user_id="mary", state=episode_pb2.Episode.STATE_OPEN, page_token=token),
        es.ListEpisodesRequest(page_token=token),
    ):
        await expect_invalid(alice.episodes.ListEpisodes(changed, metadata=alice.auth), "page_token")
    agents_request = agent_service_pb2.ListAgentsRequest(page_token=token)
    await expect_invalid(alice.agents.ListAgents(agents_request, metadata=alice.auth), "page_token")
    messages_request = es.ListMessagesRequest(episode_id=first, page_token=token)
    await expect_invalid(alice.episodes.ListMessages(messages_request, metadata=alice.auth), "page_token")


async def test_an_unknown_state_filter_is_invalid_argument(alice: Client) -> None:
    request = es.ListEpisodesRequest(state=episode_pb2.Episode.State.ValueType(99))
    await expect_invalid(alice.episodes.ListEpisodes(request, metadata=alice.auth), "state")


# --- tenants ----------------------------------------------------------------------------


async def test_another_tenants_episode_is_not_found_and_left_untouched(alice: Client, bob: Client) -> None:
    episode = await alice.open_episode()
    await alice.add(episode, user_message("private"))
    not_found = grpc.StatusCode.NOT_FOUND
    await expect_code(bob.get_episode(episode), not_found)
    await expect_code(add_message(bob, episode, user_message("intrusion")), not_found)
    await expect_code(bob.add(episode, user_message("intrusion")), not_found)
    await expect_code(
        bob.episodes.CloseEpisode(es.CloseEpisodeRequest(episode_id=episode), metadata=bob.auth), not_found
    )
    await expect_code(
        bob.episodes.ListMessages(es.ListMessagesRequest(episode_id=episode), metadata=bob.auth), not_found
    )
    after = await alice.get_episode(episode)
    assert after.state == episode_pb2.Episode.STATE_OPEN
    assert [m.content for m in await alice.log_of(episode)] == ["private"]


async def test_another_tenants_agents_and_episodes_never_show_up(alice: Client, bob: Client) -> None:
    agent = await alice.create_agent()
    episode = await alice.open_episode(agent, user_id="mary")
    await bob.open_episode(await bob.create_agent(), user_id="mary")
    await expect_code(
        bob.agents.GetAgent(agent_service_pb2.GetAgentRequest(agent_id=agent), metadata=bob.auth),
        grpc.StatusCode.NOT_FOUND,
    )
    await expect_code(bob.open_episode(agent_id=agent), grpc.StatusCode.NOT_FOUND)
    for where in (
        es.ListEpisodesRequest(page_size=1000),
        es.ListEpisodesRequest(agent_id=agent),
        es.ListEpisodesRequest(user_id="mary", page_size=1000),
        es.ListEpisodesRequest(state=episode_pb2.Episode.STATE_OPEN, page_size=1000),
    ):
        seen = await bob.episodes.ListEpisodes(where, metadata=bob.auth)
        assert episode not in {e.episode_id for e in seen.episodes}
        assert agent not in {e.agent_id for e in seen.episodes}
    agents = await bob.agents.ListAgents(
        agent_service_pb2.ListAgentsRequest(page_size=1000), metadata=bob.auth
    )
    assert agent not in {a.agent_id for a in agents.agents}


async def test_another_tenant_can_use_the_same_ids_without_touching_the_first(
    alice: Client, bob: Client
) -> None:
    agent, episode = unique("agent"), unique("ep")
    await alice.create_agent(agent)
    await alice.open_episode(agent, episode_id=episode)
    await alice.add(episode, user_message("alice's"))
    await bob.create_agent(agent)
    opened = await bob.episodes.OpenEpisode(
        es.OpenEpisodeRequest(agent_id=agent, user_id="mary", episode_id=episode), metadata=bob.auth
    )
    assert opened.created
    await bob.add(episode, user_message("bob's"))
    await bob.episodes.CloseEpisode(es.CloseEpisodeRequest(episode_id=episode), metadata=bob.auth)
    assert [m.content for m in await alice.log_of(episode)] == ["alice's"]
    assert (await alice.get_episode(episode)).state == episode_pb2.Episode.STATE_OPEN


# --- episode lifecycle ------------------------------------------------------------------


async def close(c: Client, episode_id: str, **fields: object) -> episode_pb2.Episode:
    request = es.CloseEpisodeRequest(episode_id=episode_id, **fields)  # type: ignore[arg-type]
    return (await c.episodes.CloseEpisode(request, metadata=c.auth)).episode


async def test_appending_to_a_closed_episode_is_failed_precondition(alice: Client) -> None:
    episode = await alice.open_episode()
    await alice.add(episode, user_message("before"))
    await close(alice, episode)
    precondition = grpc.StatusCode.FAILED_PRECONDITION
    await expect_code(add_message(alice, episode, user_message("after")), precondition)
    await expect_code(alice.add(episode, user_message("after"), user_message("again")), precondition)
    assert [m.content for m in await alice.log_of(episode)] == ["before"]


async def test_reopening_a_closed_episode_id_is_failed_precondition(alice: Client) -> None:
    agent, episode = await alice.create_agent(), unique("ep")
    await alice.open_episode(agent, episode_id=episode)
    await close(alice, episode)
    await expect_code(alice.open_episode(agent, episode_id=episode), grpc.StatusCode.FAILED_PRECONDITION)
    assert (await alice.get_episode(episode)).state == episode_pb2.Episode.STATE_CLOSED


async def test_opening_an_existing_id_for_another_user_is_already_exists(alice: Client) -> None:
    agent, episode = await alice.create_agent(), unique("ep")
    await alice.open_episode(agent, user_id="mary", episode_id=episode)
    await expect_code(
        alice.open_episode(agent, user_id="john", episode_id=episode), grpc.StatusCode.ALREADY_EXISTS
    )
    assert (await alice.get_episode(episode)).user_id == "mary"


async def test_closing_twice_is_idempotent_and_keeps_the_original_end_time(alice: Client) -> None:
    episode = await alice.open_episode()
    first = await close(alice, episode, note="bye")
    later = timestamp(datetime.now(UTC) + timedelta(hours=1))
    second = await close(
        alice, episode, reason=episode_pb2.CLOSE_REASON_AGENT_DECISION, note="again", end_time=later
    )
    assert second.state == episode_pb2.Episode.STATE_CLOSED
    assert second.end_time == first.end_time
    assert (second.close_reason, second.close_note) == (episode_pb2.CLOSE_REASON_USER_ENDED, "bye")
    assert (await alice.get_episode(episode)).end_time == first.end_time


@pytest.mark.parametrize(
    "reason", [episode_pb2.CLOSE_REASON_IDLE_TIMEOUT, 99], ids=["idle-timeout-is-server-only", "unknown"]
)
async def test_a_close_reason_a_client_may_not_send_is_invalid_argument(alice: Client, reason: int) -> None:
    episode = await alice.open_episode()
    await expect_invalid(close(alice, episode, reason=reason), "reason")
    assert (await alice.get_episode(episode)).state == episode_pb2.Episode.STATE_OPEN


async def test_an_end_time_before_the_start_time_is_invalid_argument(alice: Client) -> None:
    episode = await alice.open_episode()
    started = (await alice.get_episode(episode)).start_time.ToDatetime(tzinfo=UTC)
    await expect_invalid(close(alice, episode, end_time=timestamp(started - timedelta(days=1))), "end_time")
    assert (await alice.get_episode(episode)).state == episode_pb2.Episode.STATE_OPEN


async def test_timestamps_and_durations_out_of_range_are_invalid_argument(alice: Client) -> None:
    agent = await alice.create_agent()
    episode = await alice.open_episode(agent)
    beyond_year_9999 = timestamp_pb2.Timestamp(seconds=253_402_300_800)
    bad_nanos = timestamp_pb2.Timestamp(seconds=1, nanos=-1)
    for ts in (beyond_year_9999, bad_nanos):
        message = user_message("hi")
        message.create_time.CopyFrom(ts)
        await expect_invalid(add_message(alice, episode, message), "message.create_time")
        open_request = es.OpenEpisodeRequest(agent_id=agent, user_id="mary", start_time=ts)
        await expect_invalid(alice.episodes.OpenEpisode(open_request, metadata=alice.auth), "start_time")
        await expect_invalid(close(alice, episode, end_time=ts), "end_time")
    await alice.add(episode, tool_call_message("call-1"))
    result = tool_result_message("call-1")
    result.tool_result.duration.CopyFrom(duration_pb2.Duration(seconds=-5))
    await expect_invalid(add_message(alice, episode, result), "message.tool_result.duration")
    assert len(await alice.log_of(episode)) == 1


# --- retries ----------------------------------------------------------------------------


async def test_a_retried_client_message_id_returns_the_original_without_a_new_row(alice: Client) -> None:
    episode = await alice.open_episode()
    first = await alice.episodes.AddMessage(
        es.AddMessageRequest(episode_id=episode, message=user_message("hello", client_id="m-1")),
        metadata=alice.auth,
    )
    assert not first.deduplicated
    retry = await alice.episodes.AddMessage(
        es.AddMessageRequest(episode_id=episode, message=user_message("hello", client_id="m-1")),
        metadata=alice.auth,
    )
    assert retry.deduplicated and retry.message == first.message
    batch = await alice.add(episode, user_message("hello", client_id="m-1"), user_message("next"))
    assert [m.seq for m in batch] == [1, 2]
    assert [m.content for m in await alice.log_of(episode)] == ["hello", "next"]


async def test_a_client_message_id_reused_with_different_content_is_already_exists(alice: Client) -> None:
    episode = await alice.open_episode()
    await alice.add(episode, user_message("hello", client_id="m-1"))
    exists = grpc.StatusCode.ALREADY_EXISTS
    await expect_code(add_message(alice, episode, user_message("changed", client_id="m-1")), exists)
    await expect_code(
        alice.add(episode, user_message("new"), user_message("changed", client_id="m-1")), exists
    )
    await expect_code(
        alice.add(episode, user_message("a", client_id="m-2"), user_message("b", client_id="m-2")), exists
    )
    assert [m.content for m in await alice.log_of(episode)] == ["hello"]


# --- tool payloads and the tool protocol ------------------------------------------------


NON_FINITE = {"nan": math.nan, "infinity": math.inf, "minus-infinity": -math.inf}


@pytest.mark.parametrize("number", list(NON_FINITE.values()), ids=list(NON_FINITE))
async def test_non_finite_numbers_in_json_payloads_are_invalid_argument(alice: Client, number: float) -> None:
    agent = await alice.create_agent()
    episode = await alice.open_episode(agent)
    await alice.add(episode, tool_call_message("call-1"))

    tool_input = struct_pb2.Struct()
    tool_input.fields["limit"].number_value = number
    await expect_invalid(
        add_message(alice, episode, assistant_calling(tool_input)), "message.tool_calls[0].input"
    )

    nested = struct_pb2.Struct()
    nested.fields["rows"].list_value.values.add().struct_value.fields["score"].number_value = number
    await expect_invalid(
        add_message(alice, episode, assistant_calling(nested)), "message.tool_calls[0].input"
    )

    result = tool_result_message("call-1")
    result.tool_result.output.number_value = number
    await expect_invalid(add_message(alice, episode, result), "message.tool_result.output")

    labelled = user_message("hi")
    labelled.metadata.fields["weight"].number_value = number
    await expect_invalid(add_message(alice, episode, labelled), "message.metadata")
    open_request = es.OpenEpisodeRequest(agent_id=agent, user_id="mary", metadata=labelled.metadata)
    await expect_invalid(alice.episodes.OpenEpisode(open_request, metadata=alice.auth), "metadata")
    assert len(await alice.log_of(episode)) == 1


def nested_lists(depth: int) -> struct_pb2.Struct:
    """{"n": [[[...1...]]]}: cheap in protobuf nesting, so the request still decodes."""
    root = struct_pb2.Struct()
    node = root.fields["n"]
    for _ in range(depth):
        node = node.list_value.values.add()
    node.number_value = 1
    return root


def nested_structs(depth: int) -> struct_pb2.Struct:
    """{"n": {"n": ...}}, built in place (copying it would trip the client's own parser)."""
    root = struct_pb2.Struct()
    node = root
    for _ in range(depth):
        node = node.fields["n"].struct_value
    node.fields["leaf"].number_value = 1
    return root


async def test_a_tool_input_nested_40_deep_is_invalid_argument(alice: Client) -> None:
    episode = await alice.open_episode()
    lists = tool_call_message("call-1")
    lists.tool_calls[0].input.CopyFrom(nested_lists(40))
    named = await expect_invalid(add_message(alice, episode, lists), "message.tool_calls[0].input")
    assert "deep" in named["message.tool_calls[0].input"]

    request = es.AddMessageRequest(episode_id=episode, message=tool_call_message("call-1"))
    deep = request.message.tool_calls[0].input
    for _ in range(40):
        deep = deep.fields["n"].struct_value
    # Nested Structs are too deep for protobuf's own decoder (limit 100 message levels),
    # so the server cannot see which field it was and names the request.
    named = await expect_invalid(alice.episodes.AddMessage(request, metadata=alice.auth), "request")
    assert len(named) == 1
    assert await alice.log_of(episode) == []


async def test_json_payloads_over_64_kib_are_invalid_argument(alice: Client) -> None:
    agent = await alice.create_agent()
    episode = await alice.open_episode(agent)
    big = struct_pb2.Struct()
    big.update({"blob": "x" * (64 * 1024)})
    labelled = user_message("hi")
    labelled.metadata.CopyFrom(big)
    await expect_invalid(add_message(alice, episode, labelled), "message.metadata")
    await expect_invalid(add_message(alice, episode, assistant_calling(big)), "message.tool_calls[0].input")
    open_request = es.OpenEpisodeRequest(agent_id=agent, user_id="mary", metadata=big)
    await expect_invalid(alice.episodes.OpenEpisode(open_request, metadata=alice.auth), "metadata")
    assert await alice.log_of(episode) == []


async def test_a_tool_result_for_an_unknown_call_is_failed_precondition(alice: Client) -> None:
    episode = await alice.open_episode()
    await alice.add(episode, tool_call_message("call-1"))
    await expect_code(
        add_message(alice, episode, tool_result_message("call-2")), grpc.StatusCode.FAILED_PRECONDITION
    )
    assert len(await alice.log_of(episode)) == 1


async def test_a_second_result_for_the_same_call_is_failed_precondition(alice: Client) -> None:
    episode = await alice.open_episode()
    await alice.add(episode, tool_call_message("call-1"), tool_result_message("call-1"))
    precondition = grpc.StatusCode.FAILED_PRECONDITION
    await expect_code(add_message(alice, episode, tool_result_message("call-1")), precondition)
    await expect_code(
        alice.add(
            episode, tool_call_message("call-2"), tool_result_message("call-2"), tool_result_message("call-2")
        ),
        precondition,
    )
    assert len(await alice.log_of(episode)) == 2


async def test_a_tool_call_id_used_twice_is_rejected(alice: Client) -> None:
    episode = await alice.open_episode()
    await alice.add(episode, tool_call_message("call-1"))
    await expect_code(
        add_message(alice, episode, tool_call_message("call-1")), grpc.StatusCode.ALREADY_EXISTS
    )
    await expect_invalid(
        add_message(alice, episode, tool_call_message("call-2", "call-2")),
        "message.tool_calls[1].tool_call_id",
    )
    assert len(await alice.log_of(episode)) == 1


@pytest.mark.parametrize(
    "role",
    [episode_pb2.ROLE_USER, episode_pb2.ROLE_SYSTEM, episode_pb2.ROLE_CONTEXT, episode_pb2.ROLE_TOOL],
    ids=["user", "system", "context", "tool"],
)
async def test_tool_calls_on_a_non_assistant_message_are_invalid_argument(alice: Client, role: int) -> None:
    episode = await alice.open_episode()
    message = tool_call_message("call-1")
    message.role = episode_pb2.Role.ValueType(role)
    message.content = "hi"
    await expect_invalid(add_message(alice, episode, message), "message.tool_calls")
    assert await alice.log_of(episode) == []


async def test_tool_results_belong_on_tool_messages_only(alice: Client) -> None:
    episode = await alice.open_episode()
    await alice.add(episode, tool_call_message("call-1"))
    misplaced = tool_result_message("call-1")
    misplaced.role = episode_pb2.ROLE_USER
    await expect_invalid(add_message(alice, episode, misplaced), "message.tool_result")
    bare = episode_pb2.MessageInput(role=episode_pb2.ROLE_TOOL, content="the result, but unstructured")
    await expect_invalid(add_message(alice, episode, bare), "message.tool_result")
    too_many = tool_call_message(*(f"call-{i}" for i in range(100, 165)))
    await expect_invalid(add_message(alice, episode, too_many), "message.tool_calls")
    assert len(await alice.log_of(episode)) == 1


# --- agents -----------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["p50k_base", "nope", "CL100K_BASE", "gpt2"])
async def test_an_unknown_token_encoding_is_invalid_argument(alice: Client, encoding: str) -> None:
    agent_id = unique("agent")
    request = agent_service_pb2.CreateAgentRequest(
        agent=agent_pb2.Agent(agent_id=agent_id, model="gpt-4o", token_encoding=encoding)
    )
    await expect_invalid(alice.agents.CreateAgent(request, metadata=alice.auth), "agent.token_encoding")
    await expect_code(
        alice.agents.GetAgent(agent_service_pb2.GetAgentRequest(agent_id=agent_id), metadata=alice.auth),
        grpc.StatusCode.NOT_FOUND,
    )


async def test_agent_updates_with_bad_input_are_rejected(alice: Client) -> None:
    agent = await alice.create_agent()
    missing = agent_service_pb2.UpdateAgentRequest(agent=agent_pb2.Agent(agent_id=unique("agent")))
    await expect_code(alice.agents.UpdateAgent(missing, metadata=alice.auth), grpc.StatusCode.NOT_FOUND)
    bad_mask = agent_service_pb2.UpdateAgentRequest(
        agent=agent_pb2.Agent(agent_id=agent), update_mask=field_mask_pb2.FieldMask(paths=["agent_id"])
    )
    await expect_invalid(alice.agents.UpdateAgent(bad_mask, metadata=alice.auth), "update_mask")
    bad_encoding = agent_service_pb2.UpdateAgentRequest(
        agent=agent_pb2.Agent(agent_id=agent, token_encoding="nope"),
        update_mask=field_mask_pb2.FieldMask(paths=["token_encoding"]),
    )
    await expect_invalid(alice.agents.UpdateAgent(bad_encoding, metadata=alice.auth), "agent.token_encoding")
    got = await alice.agents.GetAgent(agent_service_pb2.GetAgentRequest(agent_id=agent), metadata=alice.auth)
    assert got.agent.token_encoding == "cl100k_base"


async def test_creating_an_existing_agent_is_already_exists(alice: Client) -> None:
    agent = await alice.create_agent()
    await expect_code(alice.create_agent(agent), grpc.StatusCode.ALREADY_EXISTS)


async def test_opening_an_episode_for_a_missing_agent_is_not_found(alice: Client) -> None:
    ghost = unique("ghost")
    await expect_code(alice.open_episode(agent_id=ghost), grpc.StatusCode.NOT_FOUND)
    listed = await alice.episodes.ListEpisodes(es.ListEpisodesRequest(agent_id=ghost), metadata=alice.auth)
    assert not listed.episodes


# --- credentials ------------------------------------------------------------------------


CREDENTIALS = {
    "none": (),
    "unknown-key": bearer("epk_not_a_key_anyone_was_given"),
    "empty-bearer": (("authorization", "Bearer "),),
    "basic-scheme": (("authorization", f"Basic {KEY_A}"),),
    "key-without-scheme": (("authorization", KEY_A),),
}


@pytest.mark.parametrize("auth", list(CREDENTIALS.values()), ids=list(CREDENTIALS))
async def test_missing_or_unknown_credentials_are_unauthenticated(
    channel: grpc.aio.Channel, alice: Client, auth: tuple[tuple[str, str], ...]
) -> None:
    agent = await alice.create_agent()
    episode = await alice.open_episode(agent)
    stranger = dataclasses.replace(alice, auth=auth)
    unauthenticated = grpc.StatusCode.UNAUTHENTICATED
    await expect_code(stranger.get_episode(episode), unauthenticated)
    await expect_code(add_message(stranger, episode, user_message("hi")), unauthenticated)
    await expect_code(stranger.create_agent(), unauthenticated)
    await expect_code(
        stranger.agents.GetAgent(agent_service_pb2.GetAgentRequest(agent_id=agent), metadata=auth),
        unauthenticated,
    )
    await expect_code(
        stranger.diagnostics.Echo(diagnostics_service_pb2.EchoRequest(payload=b"x"), metadata=auth),
        unauthenticated,
    )
    assert await alice.log_of(episode) == []


# --- batches ----------------------------------------------------------------------------


def _bad_empty(m: episode_pb2.MessageInput) -> None:
    m.content = ""


def _bad_role(m: episode_pb2.MessageInput) -> None:
    m.role = episode_pb2.Role.ValueType(99)


def _bad_tool_input(m: episode_pb2.MessageInput) -> None:
    m.CopyFrom(tool_call_message("call-9"))
    m.tool_calls[0].input.fields["x"].number_value = math.nan


def _bad_client_id(m: episode_pb2.MessageInput) -> None:
    m.client_message_id = "has space"


def _bad_too_long(m: episode_pb2.MessageInput) -> None:
    m.content = "x" * (MAX_CONTENT_BYTES + 1)


INVALID_THIRD_MESSAGE = {
    "empty-content": (_bad_empty, "messages[2].content"),
    "unknown-role": (_bad_role, "messages[2].role"),
    "nan-tool-input": (_bad_tool_input, "messages[2].tool_calls[0].input"),
    "malformed-client-id": (_bad_client_id, "messages[2].client_message_id"),
    "oversized-content": (_bad_too_long, "messages[2].content"),
}


@pytest.mark.parametrize("case", list(INVALID_THIRD_MESSAGE))
async def test_a_batch_whose_third_message_is_invalid_stores_nothing(alice: Client, case: str) -> None:
    spoil, field = INVALID_THIRD_MESSAGE[case]
    episode = await alice.open_episode()
    await alice.add(episode, user_message("already there"))
    batch = [user_message(f"batch {i}", client_id=f"b-{i}") for i in range(5)]
    spoil(batch[2])
    named = await expect_invalid(alice.add(episode, *batch), field)
    assert all(f.startswith("messages[2]") for f in named), named
    assert [m.content for m in await alice.log_of(episode)] == ["already there"]
    # Nothing of the batch was kept, not even its client ids: the good messages go in fresh.
    stored = await alice.add(episode, *(m for i, m in enumerate(batch) if i != 2))
    assert [m.seq for m in stored] == [2, 3, 4, 5]


async def test_a_batch_failing_in_the_store_is_all_or_nothing(alice: Client) -> None:
    episode = await alice.open_episode()
    batch = [
        tool_call_message("call-1"),
        tool_result_message("call-1"),
        tool_result_message("call-404"),  # no such call: found only while writing
        user_message("after"),
        user_message("last"),
    ]
    await expect_code(alice.add(episode, *batch), grpc.StatusCode.FAILED_PRECONDITION)
    assert await alice.log_of(episode) == []
    # The tool call of the failed batch was not recorded either: it can be issued again.
    await alice.add(episode, tool_call_message("call-1"), tool_result_message("call-1"))
    assert len(await alice.log_of(episode)) == 2


@pytest.mark.parametrize("count", [0, 501], ids=["empty", "over-500"])
async def test_a_batch_of_the_wrong_size_is_invalid_argument(alice: Client, count: int) -> None:
    episode = await alice.open_episode()
    await expect_invalid(alice.add(episode, *(user_message(f"m{i}") for i in range(count))), "messages")
    assert await alice.log_of(episode) == []


async def test_a_batch_of_exactly_500_messages_is_accepted(alice: Client) -> None:
    episode = await alice.open_episode()
    stored = await alice.add(episode, *(user_message(f"m{i}") for i in range(500)))
    assert [m.seq for m in stored] == list(range(1, 501))


# --- text that some databases cannot store ----------------------------------------------


async def test_nul_characters_are_stored_faithfully_or_rejected_naming_the_field(alice: Client) -> None:
    """U+0000 is valid in a proto string and in JSON, but PostgreSQL text and jsonb refuse
    it. Either answer is fine (store it, or INVALID_ARGUMENT naming the field); INTERNAL is not."""
    agent = await alice.create_agent()
    episode = await alice.open_episode(agent)
    labelled = user_message("labelled")
    labelled.metadata.update({"note": "a\x00b"})
    tool_input = struct_pb2.Struct()
    tool_input.update({"query": "a\x00b"})
    prompt = agent_service_pb2.CreateAgentRequest(
        agent=agent_pb2.Agent(agent_id=unique("agent"), system_prompt="a\x00b")
    )
    cases: list[tuple[str, Callable[[], Awaitable[object]]]] = [
        ("message.content", lambda: add_message(alice, episode, user_message("a\x00b"))),
        ("message.metadata", lambda: add_message(alice, episode, labelled)),
        ("message.tool_calls[0].input", lambda: add_message(alice, episode, assistant_calling(tool_input))),
        ("agent.system_prompt", lambda: alice.agents.CreateAgent(prompt, metadata=alice.auth)),
        ("note", lambda: close(alice, episode, note="a\x00b")),
    ]
    outcomes: dict[str, str] = {}
    for field, call in cases:
        try:
            await call()
            outcomes[field] = "OK"
        except grpc.aio.AioRpcError as err:
            outcomes[field] = describe(err)
            if err.code() == grpc.StatusCode.INVALID_ARGUMENT and field in violations(err):
                outcomes[field] = "INVALID_ARGUMENT"
    unclean = {f: o for f, o in outcomes.items() if o not in ("OK", "INVALID_ARGUMENT")}
    assert not unclean, "NUL characters were not handled cleanly:\n" + "\n".join(
        f"  {f}: {o}" for f, o in unclean.items()
    )
    stored = [m.content for m in await alice.log_of(episode) if m.role == episode_pb2.ROLE_USER]
    assert set(stored) <= {"a\x00b", "labelled"}


# --- the wire itself --------------------------------------------------------------------


UNDECODABLE = {
    "invalid-wire-type": b"\x0f",
    "endless-varint": b"\xff" * 12,
    "truncated-field": b"\x0a\x10abc",
    "invalid-utf8-in-string": b"\x0a\x02\xff\xfe",
    "field-number-zero": b"\x00",
}


@pytest.mark.parametrize("garbage", list(UNDECODABLE.values()), ids=list(UNDECODABLE))
async def test_undecodable_request_bytes_are_invalid_argument(
    channel: grpc.aio.Channel, alice: Client, garbage: bytes
) -> None:
    episode = await alice.open_episode()
    for method in ("/episodic.v1.EpisodeService/AddMessage", "/episodic.v1.AgentService/CreateAgent"):
        raw = channel.unary_unary(method, request_serializer=lambda b: b, response_deserializer=lambda b: b)
        await expect_invalid(raw(garbage, metadata=alice.auth), "request")
    assert await alice.log_of(episode) == []


async def test_an_oversized_echo_payload_is_invalid_argument(alice: Client) -> None:
    request = diagnostics_service_pb2.EchoRequest(payload=b"x" * (64 * 1024 + 1))
    await expect_invalid(alice.diagnostics.Echo(request, metadata=alice.auth), "payload")


# --- durations, times, tool arguments, reused ids (issue "Fair share", findings 7 and 8) --


def update_session_data(c: Client, episode_id: str, ttl: duration_pb2.Duration) -> Awaitable[object]:
    data = struct_pb2.Struct()
    data.update({"cart": 1})
    request = memory_service_pb2.UpdateSessionDataRequest(episode_id=episode_id, data=data, ttl=ttl)
    return c.memories.UpdateSessionData(request, metadata=c.auth)


def call_tool(c: Client, episode_id: str, name: str, arguments: str) -> Awaitable[object]:
    request = memory_service_pb2.CallMemoryToolRequest(episode_id=episode_id, name=name, arguments=arguments)
    return c.memories.CallMemoryTool(request, metadata=c.auth)


@pytest.mark.parametrize(
    ("seconds", "nanos"),
    [(315_576_000_000, 0), (315_576_000_001, 0), (0, 2_000_000_000), (5, -1), (-5, 1)],
    ids=["max-seconds-overflows-a-date", "seconds-out-of-range", "nanos-2e9", "plus-minus", "minus-plus"],
)
async def test_a_session_ttl_outside_the_rules_is_invalid_argument_naming_ttl(
    alice: Client, seconds: int, nanos: int
) -> None:
    episode = await alice.open_episode()
    ttl = duration_pb2.Duration(seconds=seconds, nanos=nanos)
    await expect_invalid(update_session_data(alice, episode, ttl), "ttl")
    read = memory_service_pb2.GetSessionDataRequest(episode_id=episode)
    assert not (await alice.memories.GetSessionData(read, metadata=alice.auth)).session_data.data.fields


async def test_tool_arguments_nested_3000_deep_are_invalid_argument(alice: Client) -> None:
    episode = await alice.open_episode()
    deep = '{"query": "tea", "kinds": ' + "[" * 3000 + "]" * 3000 + "}"
    await expect_invalid(call_tool(alice, episode, "search_memory", deep), "arguments")


@pytest.mark.parametrize("top_k", ["true", "1e308", "NaN", "0"])
async def test_a_tool_top_k_not_an_integer_in_bounds_is_invalid(alice: Client, top_k: str) -> None:
    episode = await alice.open_episode()
    arguments = f'{{"query": "tea", "top_k": {top_k}}}'
    await expect_invalid(call_tool(alice, episode, "search_memory", arguments), "arguments.top_k")


@pytest.mark.parametrize("when", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"])
async def test_a_tool_event_time_beyond_the_calendar_is_invalid(alice: Client, when: str) -> None:
    episode = await alice.open_episode()
    arguments = json.dumps({"text": "Flies to Oslo", "kind": "event", "event_time": when, "long_term": True})
    await expect_invalid(call_tool(alice, episode, "add_memory", arguments), "arguments.event_time")


async def test_a_lone_surrogate_escaped_in_tool_arguments_is_invalid_argument(alice: Client) -> None:
    episode = await alice.open_episode()
    for arguments, field in (
        ('{"text": "Likes \\ud800 tea", "kind": "fact", "long_term": true}', "arguments.text"),
        ('{"text": "Likes tea", "kind": "fact", "topics": ["\\udfff"]}', "arguments.topics"),
        ('{"query": "\\ud800"}', "arguments.query"),
    ):
        name = "search_memory" if "query" in arguments else "add_memory"
        await expect_invalid(call_tool(alice, episode, name, arguments), field)


async def test_finalizing_a_draft_whose_id_an_add_message_took_is_already_exists(alice: Client) -> None:
    episode = await alice.open_episode()
    push = es.PushAssistantDeltaRequest(episode_id=episode, draft_id="reply-1", offset=0, text="streamed")
    await alice.episodes.PushAssistantDelta(push, metadata=alice.auth)
    taken = user_message("other content")
    taken.client_message_id = "reply-1"
    await add_message(alice, episode, taken)
    finalize = es.FinalizeAssistantMessageRequest(episode_id=episode, draft_id="reply-1")
    err = await expect_code(alice.episodes.FinalizeAssistantMessage(finalize, metadata=alice.auth), ALREADY)
    assert "draft_id 'reply-1'" in (err.details() or "")
    assert [m.content for m in await alice.log_of(episode)] == ["other content"]
