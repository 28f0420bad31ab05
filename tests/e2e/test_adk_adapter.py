"""Google ADK's session and memory services kept in Episodic (clients/python's [adk] extra),
against a live server and the real google-adk: a Runner with a scripted model remembers across
sessions through memory; events round-trip with their tool calls, ids and actions; session
reads honour their config; state scopes land where ADK expects them (temp: nowhere); listing,
deletion, retries and stale sessions behave as ADK's own services; what cannot be stored is
refused by name; and the example runs."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError as SessionExistsError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService, Session
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.tools.load_memory_tool import load_memory_tool
from google.adk.tools.preload_memory_tool import PreloadMemoryTool
from google.genai import types
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import Field

from episodic.edges.keys import config_line
from episodic_client import AsyncEpisodicClient, PermissionDeniedError
from episodic_client.integrations.adk import (
    APP_STATE_USER,
    EpisodicMemoryService,
    EpisodicSessionService,
    SessionClosedError,
    state_agent_id,
)
from episodic_client.v1 import episode_pb2
from tests.conftest import unique
from tests.e2e.helpers import run_process
from tests.server_harness import KEY_A, TENANT_A, RunningServer, running_server, settings_for

EXAMPLE = Path(__file__).resolve().parents[2] / "clients/python/examples/integrations/adk.py"


@pytest.fixture
def database_url(sqlite_url: str) -> str:
    """One backend: what these tests check is the same over either store (the stores are
    held to one behaviour on both by tests/contracts and tests/integration)."""
    return sqlite_url


@pytest.fixture
async def client(server: RunningServer) -> AsyncIterator[AsyncEpisodicClient]:
    async with AsyncEpisodicClient(server.address, api_key=KEY_A, timeout=30) as client:
        yield client


@pytest.fixture
async def app(client: AsyncEpisodicClient) -> str:
    """A new Episodic agent: the ADK app of the test."""
    return (await client.create_agent(unique("adk-app"))).agent.agent_id


class ScriptedModel(BaseLlm):
    """A model that gives its replies in turn (the last one again when they run out) and
    keeps every request it got."""

    replies: list[LlmResponse]
    requests: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request.model_copy(deep=True))
        yield self.replies[min(len(self.requests), len(self.replies)) - 1]


def said(text: str) -> LlmResponse:
    return LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))


def calls(name: str, **args: Any) -> LlmResponse:
    call = types.FunctionCall(name=name, args=args)
    return LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))


def user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def seen(request: LlmRequest) -> str:
    """Every text and tool output the model was sent."""
    texts = [str(request.config.system_instruction or "")]
    for content in request.contents:
        for part in content.parts or []:
            texts.append(part.text or "")
            if part.function_response is not None:
                texts.append(json.dumps(part.function_response.response, default=str))
    return "\n".join(texts)


async def run_turn(runner: Runner, user_id: str, session_id: str, text: str) -> list[Event]:
    return [e async for e in runner.run_async(user_id=user_id, session_id=session_id, new_message=user(text))]


def event(author: str, *parts: types.Part, role: str | None = None, **fields: Any) -> Event:
    role = role or ("user" if author == "user" else "model")
    return Event(
        author=author, invocation_id="inv-1", content=types.Content(role=role, parts=list(parts)), **fields
    )


def text(value: str, **fields: Any) -> types.Part:
    return types.Part(text=value, **fields)


def call(call_id: str, name: str, args: dict[str, Any] | None) -> types.Part:
    return types.Part(function_call=types.FunctionCall(id=call_id, name=name, args=args))


def answer(call_id: str, name: str, response: dict[str, Any]) -> types.Part:
    return types.Part(function_response=types.FunctionResponse(id=call_id, name=name, response=response))


def as_json(events: list[Event]) -> list[dict[str, Any]]:
    """Events as stored: a tool's pydantic result is its JSON in any storage of ADK's too."""
    return [e.model_dump(mode="json", exclude_none=True) for e in events]


async def log_of(client: AsyncEpisodicClient, episode_id: str) -> list[episode_pb2.Message]:
    messages = [m async for m in client.iter_messages(episode_id)]
    return messages[::-1]


# --- a runner ----------------------------------------------------------------------------


async def test_a_runner_remembers_what_the_user_said_in_an_earlier_session(
    client: AsyncEpisodicClient, app: str
) -> None:
    sessions, memory = EpisodicSessionService(client), EpisodicMemoryService(client)
    model = ScriptedModel(model="scripted", replies=[said("What a lovely name!"), said("Noted.")])
    first = Runner(
        app_name=app,
        agent=LlmAgent(name="assistant", model=model),
        session_service=sessions,
        memory_service=memory,
    )
    session = await sessions.create_session(app_name=app, user_id="mary")
    await run_turn(first, "mary", session.id, "My cat is called Zanzibar.")
    await run_turn(first, "mary", session.id, "She likes sardines.")
    assert "Zanzibar" in seen(model.requests[1]) and "What a lovely name!" in seen(model.requests[1]), (
        "the second turn's history was read back from Episodic"
    )
    stored = await sessions.get_session(app_name=app, user_id="mary", session_id=session.id)
    assert stored is not None and [e.author for e in stored.events] == ["user", "assistant"] * 2

    await memory.add_session_to_memory(stored)

    recalling = ScriptedModel(model="scripted", replies=[said("Zanzibar, of course.")])
    second = Runner(
        app_name=app,
        agent=LlmAgent(name="assistant", model=recalling, tools=[PreloadMemoryTool()]),
        session_service=sessions,
        memory_service=memory,
    )
    later = await sessions.create_session(app_name=app, user_id="mary")
    await run_turn(second, "mary", later.id, "What is my cat called?")
    assert "Zanzibar" in seen(recalling.requests[0]), seen(recalling.requests[0])
    assert (await client.get_episode(session.id)).episode.state == episode_pb2.Episode.STATE_CLOSED
    with pytest.raises(SessionClosedError, match=session.id):
        await run_turn(first, "mary", session.id, "One more thing.")


async def test_a_model_that_calls_load_memory_gets_the_memory_and_the_events_read_back_as_yielded(
    client: AsyncEpisodicClient, app: str
) -> None:
    sessions, memory = EpisodicSessionService(client), EpisodicMemoryService(client)
    biscuit = MemoryEntry(
        id="leo-dog",
        content=user("Leo's dog is called Biscuit."),
        author="crm",
        custom_metadata={"kind": "fact", "source": "crm"},
    )
    await memory.add_memory(app_name=app, user_id="leo", memories=[biscuit])
    model = ScriptedModel(model="scripted", replies=[calls("load_memory", query="dog"), said("Biscuit.")])
    runner = Runner(
        app_name=app,
        agent=LlmAgent(name="assistant", model=model, tools=[load_memory_tool]),
        session_service=sessions,
        memory_service=memory,
    )
    session = await sessions.create_session(app_name=app, user_id="leo")

    yielded = await run_turn(runner, "leo", session.id, "What is my dog called?")

    assert "Biscuit" in seen(model.requests[1]), "the tool's result reached the model"
    stored = await sessions.get_session(app_name=app, user_id="leo", session_id=session.id)
    assert stored is not None
    assert as_json(stored.events[1:]) == as_json(yielded), "the events read back as the runner made them"
    asked = stored.events[1].content.parts[0].function_call  # type: ignore[union-attr,index]
    assert asked is not None and asked.name == "load_memory" and asked.args == {"query": "dog"}
    log = await log_of(client, session.id)
    roles = (
        episode_pb2.ROLE_USER,
        episode_pb2.ROLE_ASSISTANT,
        episode_pb2.ROLE_TOOL,
        episode_pb2.ROLE_ASSISTANT,
    )
    assert tuple(m.role for m in log) == roles
    assert log[1].tool_calls[0].tool_call_id == asked.id == log[2].tool_result.tool_call_id
    assert log[2].tool_result.succeeded and "Biscuit" in str(log[2].tool_result.output)
    assert [m.client_message_id for m in log] == [e.id for e in stored.events]
    entry = next(m for m in (await memory.search_memory(app_name=app, user_id="leo", query="dog")).memories)
    assert entry.id == "leo-dog" and entry.author == "crm" and entry.custom_metadata["source"] == "crm"


# --- sessions ----------------------------------------------------------------------------


async def test_get_session_returns_the_events_its_config_asks_for(
    client: AsyncEpisodicClient, app: str
) -> None:
    sessions = EpisodicSessionService(client)
    session = await sessions.create_session(app_name=app, user_id="mary")
    appended = [
        await sessions.append_event(session, event(author, text(f"turn {i}"), timestamp=1_700_000_000.0 + i))
        for i, author in enumerate(["user", "assistant"] * 3)
    ]
    ids = [e.id for e in appended]

    async def read(**config: Any) -> list[str]:
        got = await sessions.get_session(
            app_name=app, user_id="mary", session_id=session.id, config=GetSessionConfig(**config)
        )
        assert got is not None
        return [e.id for e in got.events]

    assert await read() == ids
    assert await read(num_recent_events=2) == ids[-2:]
    assert await read(num_recent_events=0) == []
    assert await read(after_timestamp=1_700_000_002.0) == ids[2:]
    assert await read(after_timestamp=1_700_000_002.5) == ids[3:]
    assert await read(num_recent_events=3, after_timestamp=1_700_000_004.0) == ids[4:]
    whole = await sessions.get_session(app_name=app, user_id="mary", session_id=session.id)
    assert whole is not None and whole.events == appended


async def test_state_scopes_land_where_adk_keeps_them_and_temp_state_is_never_stored(
    client: AsyncEpisodicClient, app: str
) -> None:
    sessions = EpisodicSessionService(client)
    initial = {"topic": "cats", "app:greeting": "hi", "user:name": "Mary", "temp:scratch": 1}
    session = await sessions.create_session(app_name=app, user_id="mary", state=initial)
    assert session.state == {"topic": "cats", "app:greeting": "hi", "user:name": "Mary"}
    delta = {
        "topic": {"nested": [1, 2.5, None]},
        "unset": None,
        "user:name": "Mary Jane",
        "app:v": 2,
        "temp:t": "x",
    }

    appended = await sessions.append_event(
        session, event("assistant", text("ok"), actions=EventActions(state_delta=delta))
    )

    assert session.state["temp:t"] == "x", "the invocation still sees its temp: state"
    assert "temp:t" not in appended.actions.state_delta
    read = await sessions.get_session(app_name=app, user_id="mary", session_id=session.id)
    assert read is not None and read.state == {
        "topic": {"nested": [1, 2.5, None]},
        "unset": None,
        "app:greeting": "hi",
        "app:v": 2,
        "user:name": "Mary Jane",
    }
    replace = event("assistant", text("again"), actions=EventActions(state_delta={"topic": {"other": True}}))
    await sessions.append_event(read, replace)
    again = await sessions.get_session(app_name=app, user_id="mary", session_id=session.id)
    assert again is not None and again.state["topic"] == {"other": True}, "a value is replaced, not merged"
    other = await sessions.create_session(app_name=app, user_id="mary")
    stranger = await sessions.create_session(app_name=app, user_id="john")
    assert other.state == {"app:greeting": "hi", "app:v": 2, "user:name": "Mary Jane"}
    assert stranger.state == {"app:greeting": "hi", "app:v": 2}
    assert await sessions.get_user_state(app_name=app, user_id="mary") == {"name": "Mary Jane"}
    stored = [str((await client.get_session_data(session.id)).session_data)]
    stored += [str(m.metadata) for m in await log_of(client, session.id)]
    assert not [s for s in stored if "temp:" in s or "scratch" in s], "temp: state is never stored"
    listed = await sessions.list_sessions(app_name=app)
    assert {s.id for s in listed.sessions} == {session.id, other.id, stranger.id}, "holders are not sessions"
    holders = [e async for e in client.iter_episodes(agent_id=state_agent_id(app))]
    assert sorted(e.user_id for e in holders) == sorted([APP_STATE_USER, "mary"])


async def test_a_holder_the_server_closed_is_followed_by_one_that_starts_with_its_data(
    client: AsyncEpisodicClient, app: str
) -> None:
    sessions = EpisodicSessionService(client)
    initial = {"user:name": "Mary", "app:v": 1}
    first = await sessions.create_session(app_name=app, user_id="mary", state=initial)
    for holder in [e async for e in client.iter_episodes(agent_id=state_agent_id(app))]:
        await client.close_episode(holder.episode_id)  # as the idle reaper does after 30 days

    read = await sessions.get_session(app_name=app, user_id="mary", session_id=first.id)
    assert read is not None and read.state == initial, "a closed holder still reads"
    second = await sessions.create_session(app_name=app, user_id="mary", state={"user:city": "Porto"})

    assert second.state == {"user:name": "Mary", "user:city": "Porto", "app:v": 1}
    holders = [e async for e in client.iter_episodes(agent_id=state_agent_id(app), user_id="mary")]
    assert [e.state for e in holders] == [episode_pb2.Episode.STATE_OPEN, episode_pb2.Episode.STATE_CLOSED]
    assert holders[0].episode_id.endswith(".1") and holders[1].episode_id.endswith(".0")


async def test_list_and_delete_sessions_as_adk_does_over_an_append_only_log(
    client: AsyncEpisodicClient, app: str
) -> None:
    sessions = EpisodicSessionService(client)
    chosen = unique("s")
    first = await sessions.create_session(app_name=app, user_id="mary", session_id=chosen, state={"n": 1})
    second = await sessions.create_session(app_name=app, user_id="mary")
    johns = await sessions.create_session(app_name=app, user_id="john")
    await sessions.append_event(first, event("user", text("hello")))

    mine = (await sessions.list_sessions(app_name=app, user_id="mary")).sessions
    assert first.id == chosen and [s.id for s in mine] == [second.id, first.id], "least recently active first"
    assert [s.events for s in mine] == [[], []] and mine[1].state == {"n": 1}
    everyone = (await sessions.list_sessions(app_name=app)).sessions
    assert {s.id for s in everyone} == {first.id, second.id, johns.id}

    await sessions.delete_session(app_name=app, user_id="mary", session_id=first.id)
    await sessions.delete_session(app_name=app, user_id="mary", session_id=first.id)  # again: a no-op
    await sessions.delete_session(app_name=app, user_id="john", session_id=second.id)  # not john's: a no-op

    assert await sessions.get_session(app_name=app, user_id="mary", session_id=first.id) is None
    assert [s.id for s in (await sessions.list_sessions(app_name=app, user_id="mary")).sessions] == [
        second.id
    ]
    assert await sessions.get_session(app_name=app, user_id="mary", session_id=second.id) is not None
    assert (await client.get_episode(first.id)).episode.state == episode_pb2.Episode.STATE_CLOSED
    assert len(await log_of(client, first.id)) == 1, "the log keeps what was said"
    with pytest.raises(SessionClosedError, match=first.id):
        await sessions.append_event(first, event("user", text("still there?")))
    with pytest.raises(SessionExistsError):
        await sessions.create_session(app_name=app, user_id="mary", session_id=first.id)
    with pytest.raises(SessionExistsError):  # an episode id is the tenant's, not the user's
        await sessions.create_session(app_name=app, user_id="john", session_id=second.id)
    assert await sessions.get_session(app_name=app, user_id="john", session_id=second.id) is None
    with pytest.raises(ValueError, match="session id 'no spaces here' cannot be an Episodic id"):
        await sessions.create_session(app_name=app, user_id="mary", session_id="no spaces here")
    with pytest.raises(ValueError, match="has no Episodic agent"):
        await sessions.create_session(app_name=unique("missing"), user_id="mary")


async def test_partial_events_are_skipped_a_retry_adds_nothing_and_a_stale_session_is_refused(
    client: AsyncEpisodicClient, app: str
) -> None:
    sessions = EpisodicSessionService(client)
    session = await sessions.create_session(app_name=app, user_id="mary")
    await sessions.append_event(session, event("assistant", text("Hel"), partial=True))
    assert session.events == [] and await log_of(client, session.id) == []

    hello = await sessions.append_event(session, event("user", text("Hello")))
    await sessions.append_event(session, hello)  # delivered twice to one session
    unread = Session(id=session.id, app_name=app, user_id="mary")  # not read here: no etag to hold
    await sessions.append_event(unread, hello.model_copy(deep=True))  # a retry after a lost reply
    assert len(session.events) == 1 and len(await log_of(client, session.id)) == 1

    one = await sessions.get_session(app_name=app, user_id="mary", session_id=session.id)
    two = await sessions.get_session(app_name=app, user_id="mary", session_id=session.id)
    assert one is not None and two is not None
    await sessions.append_event(one, event("assistant", text("Hi!")))
    with pytest.raises(StaleSessionError):
        await sessions.append_event(two, event("user", text("late")))
    assert [m.content for m in await log_of(client, session.id)] == ["Hello", "Hi!"]


async def test_function_calls_and_responses_are_tool_call_records_and_read_back_whole(
    client: AsyncEpisodicClient, app: str
) -> None:
    sessions = EpisodicSessionService(client)
    session = await sessions.create_session(app_name=app, user_id="mary")
    args = {"city": "Zürich 🌧", "days": 2, "nested": {"x": [1, 2.5, {"deep": None}]}}
    asked = event(
        "assistant",
        text("Let me check. "),
        call("call-1", "weather", args),
        call("call-2", "radar", None),
        text("(they want the forecast)", thought=True),
    )
    answered = event(
        "assistant",
        answer("call-1", "weather", {"temp": 3}),
        answer("call-2", "radar", {"error": "timeout"}),
        role="user",
    )
    update = event("assistant", answer("call-1", "weather", {"temp": 4, "final": True}), role="user")
    unasked = event("assistant", answer("never-called", "ghost", {"x": 1}), role="user")
    transfer = Event(
        author="assistant", invocation_id="inv-1", actions=EventActions(transfer_to_agent="expert")
    )
    for each in (asked, answered, update, unasked, transfer):
        await sessions.append_event(session, each)

    log = await log_of(client, session.id)
    roles = [episode_pb2.ROLE_ASSISTANT, episode_pb2.ROLE_TOOL, episode_pb2.ROLE_TOOL] + [
        episode_pb2.ROLE_CONTEXT
    ] * 3
    assert [m.role for m in log] == roles, "a second answer, an answer to no call and a transfer are context"
    assert log[0].content == "Let me check. " and [c.tool_call_id for c in log[0].tool_calls] == [
        "call-1",
        "call-2",
    ]
    assert log[1].tool_result.tool_call_id == "call-1" and log[1].tool_result.succeeded
    assert log[2].tool_result.tool_call_id == "call-2" and log[2].tool_result.error == "timeout"
    assert not log[2].tool_result.succeeded
    assert [m.client_message_id for m in log[:3]] == [asked.id, answered.id, f"{answered.id}.1"]
    stored = await sessions.get_session(app_name=app, user_id="mary", session_id=session.id)
    assert stored is not None and stored.events == [asked, answered, update, unasked, transfer]


async def test_what_episodic_cannot_store_is_refused_by_name_and_nothing_is_written(
    client: AsyncEpisodicClient, app: str
) -> None:
    sessions, memory = EpisodicSessionService(client), EpisodicMemoryService(client)
    session = await sessions.create_session(app_name=app, user_id="mary")
    image = types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG\r\n\x1a\n\x00"))
    code = types.Part(executable_code=types.ExecutableCode(language=types.Language.PYTHON, code="print(1)"))
    mixed = types.Part(text="both", function_call=types.FunctionCall(id="c", name="f", args={}))
    huge = event("user", text("x" * 300_000))
    handle = event("assistant", text("ok"), actions=EventActions(state_delta={"handle": object()}))

    with pytest.raises(ValueError, match=r"part 1: inline_data cannot be stored"):
        await sessions.append_event(session, event("user", text("look"), image))
    with pytest.raises(ValueError, match=r"part 0: executable_code cannot be stored"):
        await sessions.append_event(session, event("assistant", code))
    with pytest.raises(ValueError, match=r"part 0: a part holding both text and function_call"):
        await sessions.append_event(session, event("assistant", mixed))
    with pytest.raises(ValueError, match=rf"event '{huge.id}' \(author 'user'\) cannot be stored.*content"):
        await sessions.append_event(session, huge)
    with pytest.raises(ValueError, match=r"state key 'handle' holds a object, which is not JSON"):
        await sessions.append_event(session, handle)
    entry = MemoryEntry(content=types.Content(role="user", parts=[image]))
    with pytest.raises(ValueError, match=r"memory 0: a part with inline_data is not supported"):
        await memory.add_memory(app_name=app, user_id="mary", memories=[entry])

    assert session.events == [] and await log_of(client, session.id) == []
    assert (await client.list_memories(app, "mary")).memories == []


async def test_a_key_restricted_to_the_app_and_its_state_agent_works_and_one_without_it_is_told(
    database_url: str,
) -> None:
    """Such a key gets `ep_<hash>` for the ids it names (docs/api.md): sessions and holders
    use the ids the server returns. Without the state agent, scoped state is refused by name."""
    app = unique("adk-app")
    both, app_only = "epk_test_adk_app_and_state_0123456789", "epk_test_adk_app_only_0123456789"
    keys = ",".join(
        [
            config_line(TENANT_A, KEY_A),
            config_line(TENANT_A, both, [app, state_agent_id(app)]),
            config_line(TENANT_A, app_only, [app]),
        ]
    )
    async with running_server(settings_for(database_url, api_keys=keys)) as server:
        async with AsyncEpisodicClient(server.address, api_key=KEY_A) as tenant:
            await tenant.create_agent(app)
        async with AsyncEpisodicClient(server.address, api_key=both) as client:
            sessions = EpisodicSessionService(client)
            chosen = await sessions.create_session(
                app_name=app, user_id="mary", session_id="chosen", state={"user:name": "Mary", "app:v": 1}
            )
            counted = event("user", text("hi"), actions=EventActions(state_delta={"n": 1}))
            await sessions.append_event(chosen, counted)
            read = await sessions.get_session(app_name=app, user_id="mary", session_id=chosen.id)
            await sessions.delete_session(app_name=app, user_id="mary", session_id=chosen.id)
            left = await sessions.list_sessions(app_name=app, user_id="mary")
        async with AsyncEpisodicClient(server.address, api_key=app_only) as client:
            sessions = EpisodicSessionService(client)
            with pytest.raises(PermissionDeniedError, match=state_agent_id(app)):
                await sessions.create_session(app_name=app, user_id="mary", state={"user:name": "Mary"})

    assert chosen.id.startswith("ep_") and chosen.id != "chosen"
    assert read is not None and read.state == {"user:name": "Mary", "app:v": 1, "n": 1}
    assert [e.content for e in read.events] == [user("hi")]
    assert left.sessions == []


# --- memory ------------------------------------------------------------------------------


async def test_memory_takes_sessions_kept_elsewhere_and_event_deltas_and_forgets_deleted_sessions(
    client: AsyncEpisodicClient, app: str
) -> None:
    memory, sessions = EpisodicMemoryService(client), EpisodicSessionService(client)
    elsewhere = InMemorySessionService()
    kept = await elsewhere.create_session(app_name=app, user_id="ana")
    for each in (
        event("user", text("I am training for the Lisbon marathon.")),
        event("assistant", text("Great!")),
    ):
        await elsewhere.append_event(kept, each)

    await memory.add_session_to_memory(kept)
    await memory.add_events_to_memory(app_name=app, user_id="ana", events=kept.events[:1], session_id=kept.id)
    await memory.add_events_to_memory(app_name=app, user_id="ana", events=kept.events[:1], session_id=kept.id)

    copies = [e async for e in client.iter_episodes(agent_id=app, user_id="ana")]
    assert len(copies) == 2 and {e.state for e in copies} == {episode_pb2.Episode.STATE_CLOSED}
    found = (await memory.search_memory(app_name=app, user_id="ana", query="marathon")).memories
    assert found and all("marathon" in (m.content.parts or [])[0].text.lower() for m in found)  # type: ignore[union-attr]
    assert (await sessions.list_sessions(app_name=app, user_id="ana")).sessions == [], (
        "copies are not sessions"
    )
    episode_entry = next(m for m in found if (m.id or "").startswith("episode:"))
    with pytest.raises(ValueError, match="append-only"):
        await memory.delete_memory(app_name=app, user_id="ana", memory_id=episode_entry.id)
    memory_entry = next(m for m in found if not (m.id or "").startswith("episode:"))
    await memory.delete_memory(app_name=app, user_id="ana", memory_id=memory_entry.id)
    await memory.delete_memory(app_name=app, user_id="ana", memory_id=memory_entry.id)  # again: a no-op
    again = (await memory.search_memory(app_name=app, user_id="ana", query="marathon")).memories
    assert memory_entry.id not in [m.id for m in again]

    parrot = await sessions.create_session(app_name=app, user_id="ana")
    await sessions.append_event(parrot, event("user", text("My parrot is called Kiwi.")))
    stored = await sessions.get_session(app_name=app, user_id="ana", session_id=parrot.id)
    assert stored is not None
    await memory.add_session_to_memory(stored)
    assert "Kiwi" in str((await memory.search_memory(app_name=app, user_id="ana", query="parrot")).memories)
    await sessions.delete_session(app_name=app, user_id="ana", session_id=parrot.id)
    assert "Kiwi" not in str(
        (await memory.search_memory(app_name=app, user_id="ana", query="parrot")).memories
    )


# --- round trips -------------------------------------------------------------------------

_text = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=16)
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=12,
)
_objects = st.dictionaries(_text, _json, max_size=4)
_names = st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True)


@st.composite
def conversations(draw: st.DrawFn) -> list[Event]:
    """A user turn, a reply with text and/or function calls, and the calls' responses."""
    count = draw(st.integers(0, 3))
    calls_made = [call(f"call-{i}", draw(_names), draw(_objects | st.none())) for i in range(count)]
    reply = [text(t) for t in draw(st.lists(_text, min_size=0 if count else 1, max_size=2))]
    if draw(st.booleans()):  # a thought, with the opaque signature Gemini wants back
        reply.insert(0, text(draw(_text), thought=True, thought_signature=draw(st.binary(max_size=8))))
    events = [event("user", text(draw(_text))), event("assistant", *reply, *calls_made)]
    if calls_made:
        answers = [answer(c.function_call.id, c.function_call.name, draw(_objects)) for c in calls_made]  # type: ignore[union-attr,arg-type]
        events.append(event("assistant", *answers, role="user"))
    return events


async def test_any_conversation_reads_back_as_the_events_appended(server: RunningServer, app: str) -> None:
    """Hypothesis drives a synchronous property on a loop of its own, in a thread, while this
    loop serves the server."""

    def work() -> int:
        tried = 0
        with asyncio.Runner() as loop:
            client = loop.run(opened(server.address))
            sessions = EpisodicSessionService(client)

            @settings(max_examples=20, deadline=None, database=None, suppress_health_check=list(HealthCheck))
            @given(conversations())
            def round_trip(events: list[Event]) -> None:
                nonlocal tried
                tried += 1
                loop.run(append_and_read(sessions, app, events))

            try:
                round_trip()
            finally:
                loop.run(client.close())
        return tried

    assert await asyncio.to_thread(work) > 1


async def opened(address: str) -> AsyncEpisodicClient:
    return AsyncEpisodicClient(address, api_key=KEY_A, timeout=30)


async def append_and_read(sessions: EpisodicSessionService, app: str, events: list[Event]) -> None:
    session = await sessions.create_session(app_name=app, user_id="prop")
    for each in events:
        await sessions.append_event(session, each.model_copy(deep=True))
    stored = await sessions.get_session(app_name=app, user_id="prop", session_id=session.id)
    assert stored is not None and stored.events == events


# --- the example -------------------------------------------------------------------------


async def test_the_example_shows_the_model_what_the_user_said_in_the_first_session(
    sqlite_server: RunningServer,
) -> None:
    env = {**os.environ, "EPISODIC_ADDRESS": sqlite_server.address, "EPISODIC_API_KEY": KEY_A}

    done = await run_process(sys.executable, str(EXAMPLE), env=env, timeout=120)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "Zanzibar" in done.stdout.split("the model received")[-1], done.stdout


def test_the_docs_scripted_model_is_the_examples() -> None:
    """docs/integrations/adk.md shows the example's scripted model, as the example has it."""
    doc = (EXAMPLE.parents[4] / "docs" / "integrations" / "adk.md").read_text(encoding="utf-8")
    shown = doc.split("class ScriptedModel(BaseLlm):", 1)[1].split("\n\n\n", 1)[0]
    assert "class ScriptedModel(BaseLlm):" + shown in EXAMPLE.read_text(encoding="utf-8")
