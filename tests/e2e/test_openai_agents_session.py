"""The OpenAI Agents SDK's Session kept in Episodic (clients/python's [openai-agents] extra),
against a live server and the real SDK: items round-trip exactly, a limit reads the latest,
pop_item retracts, clear_session moves on to the next episode, what cannot be stored is
refused by name, a Runner's model sees what it would see with the SDK's own SQLiteSession,
and a second session's context (EpisodicContextSession) carries what the user said in the
first. The example and the doc's usage snippet are run against the server too."""

from __future__ import annotations

import ast
import copy
import json
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession, Usage, function_tool
from agents.items import TResponseInputItem
from agents.memory import Session
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodic_client import AsyncEpisodicClient, message_input, tool_call, tool_result
from episodic_client.integrations.openai_agents import EpisodicContextSession, EpisodicSession, context_items
from episodic_client.v1 import context_pb2, episode_pb2
from tests.conftest import unique
from tests.e2e.helpers import DIGEST_SETTLE_SECONDS, clean_environment, run_process
from tests.polling import eventually
from tests.server_harness import KEY_A, RunningServer

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "clients" / "python" / "examples" / "integrations" / "openai_agents.py"
DOC = REPO / "docs" / "integrations" / "openai-agents.md"
NO_TRACES = RunConfig(tracing_disabled=True)  # nothing leaves the machine

# a digest's settled states, in the client's enum: a call waiting for one ends on them
SETTLED_DIGESTS = frozenset({episode_pb2.DIGEST_STATE_READY, episode_pb2.DIGEST_STATE_FAILED})


@pytest.fixture
def database_url(sqlite_url: str) -> str:
    """One backend: what these tests check is the same over either store (the stores are
    held to one behaviour on both by tests/contracts and tests/integration)."""
    return sqlite_url


@asynccontextmanager
async def connected(server: RunningServer) -> AsyncIterator[tuple[AsyncEpisodicClient, str]]:
    """A client of tenant A and a new agent."""
    async with AsyncEpisodicClient(server.address, api_key=KEY_A, timeout=30.0) as client:
        yield client, (await client.create_agent(unique("agent"))).agent.agent_id


async def digest_settled(client: AsyncEpisodicClient, episode_id: str) -> None:
    """Returns once the episode's digest is READY or FAILED, waiting on the state (polled)."""

    async def settled() -> bool:
        return (await client.get_episode(episode_id)).episode.digest.state in SETTLED_DIGESTS

    assert await eventually(settled, DIGEST_SETTLE_SECONDS), "the digest did not settle"


def items(*given: dict[str, Any]) -> list[TResponseInputItem]:
    return [dict(item) for item in given]  # type: ignore[misc]


def conversation() -> list[TResponseInputItem]:
    arguments = {"city": "Zürich", "days": 2, "nested": {"x": [1, 2.5, None, True], "big": 2**60}}
    return items(
        {"role": "developer", "content": [{"type": "input_text", "text": "Answer briefly."}]},
        {"role": "user", "content": "Weather in Zürich? 🌧"},
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Two days, "},
                {"type": "input_text", "text": "please."},
            ],
        },
        {
            "arguments": json.dumps(arguments, ensure_ascii=False),
            "call_id": "call_1",
            "name": "weather",
            "type": "function_call",
            "id": "fc_1",
            "status": "completed",
        },
        {"call_id": "call_1", "output": '{"temp": 3}', "type": "function_call_output"},
        {
            "id": "msg_1",
            "content": [{"annotations": [], "text": "3 °C and rain.", "type": "output_text", "logprobs": []}],
            "role": "assistant",
            "status": "completed",
            "type": "message",
        },
        {
            "id": "msg_2",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "refusal", "refusal": "I can't say more."}],
        },
    )


async def test_items_round_trip_exactly_and_the_log_reads_as_a_conversation(server: RunningServer) -> None:
    async with connected(server) as (client, agent_id):
        session = EpisodicSession(unique("s"), client, agent_id, "mary")
        as_protocol: Session = session  # the SDK's structural contract
        await as_protocol.add_items(conversation())
        read = await session.get_items()
        reread = await EpisodicSession(session.session_id, client, agent_id, "mary").get_items()
        latest, none = await session.get_items(limit=2), await session.get_items(limit=0)
        log = [m async for m in client.iter_messages(session.episode_id)][::-1]

    assert read == conversation() and reread == conversation()
    assert latest == conversation()[-2:] and none == []
    assert session.episode_id == session.session_id
    roles = [episode_pb2.Role.Name(m.role) for m in log]
    assert (
        roles
        == ["ROLE_SYSTEM", "ROLE_USER", "ROLE_USER", "ROLE_ASSISTANT", "ROLE_TOOL"] + ["ROLE_ASSISTANT"] * 2
    )
    assert [m.content for m in log] == [
        "Answer briefly.",
        "Weather in Zürich? 🌧",
        "Two days, please.",
        "",
        '{"temp": 3}',
        "3 °C and rain.",
        "I can't say more.",
    ], "the log reads as the conversation (the digest and the inspector read it)"
    (call,) = log[3].tool_calls
    assert (call.tool_call_id, call.tool_name, call.input["city"]) == ("call_1", "weather", "Zürich")
    assert log[4].tool_result.tool_call_id == "call_1"


async def test_messages_other_clients_wrote_read_as_the_items_they_say(server: RunningServer) -> None:
    async with connected(server) as (client, agent_id):
        session = EpisodicSession(unique("s"), client, agent_id, "mary")
        assert await session.get_items() == []  # opens the episode
        calls = [tool_call("c1", "weather", {"days": 2}), tool_call("c2", "radar")]
        written = [
            message_input("user", "Rain tomorrow?"),
            message_input("assistant", "Let me check.", tool_calls=calls),
            message_input("tool", "rain", tool_result=tool_result("c1")),
            message_input("tool", "timeout", tool_result=tool_result("c2", succeeded=False)),
            message_input("context", "[Note] prefers metric units"),
        ]
        await client.add_messages(session.episode_id, written)
        read = await session.get_items()
        popped = [await session.pop_item() for _ in range(3)]
        with pytest.raises(ValueError, match="message 2 reads as 3 items"):
            await session.pop_item()

    assert read == items(
        {"role": "user", "content": "Rain tomorrow?"},
        {"role": "assistant", "content": "Let me check."},
        {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": '{"days":2}'},
        {"type": "function_call", "call_id": "c2", "name": "radar", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "rain"},
        {"type": "function_call_output", "call_id": "c2", "output": "timeout"},
        {"role": "system", "content": "[Note] prefers metric units"},
    )
    assert popped == read[:-4:-1]


async def test_what_cannot_be_stored_is_refused_by_name_and_nothing_is_written(server: RunningServer) -> None:
    refused: dict[str, dict[str, Any]] = {
        "items of type 'reasoning'": {"type": "reasoning", "id": "rs_1", "summary": []},
        "items of type 'computer_call'": {"type": "computer_call", "call_id": "c1", "id": "cu_1"},
        "an item without a type or role": {"id": "msg_1"},
        "content part of type 'input_image'": {
            "role": "user",
            "content": [{"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"}],
        },
        "content part of type 'input_file'": {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": [{"type": "input_file", "file_id": "file_1"}],
        },
        "a message without text": {"role": "assistant", "content": ""},
        "a message of role 'tool'": {"role": "tool", "content": "x"},
        "a lone surrogate": {"role": "user", "content": "\ud800"},
        "name '_private' is not an Episodic id": {
            "type": "function_call",
            "call_id": "call_2",
            "name": "_private",
            "arguments": "{}",
        },
    }
    async with connected(server) as (client, agent_id):
        session = EpisodicSession(unique("s"), client, agent_id, "mary")
        await session.add_items(items({"role": "user", "content": "hello"}))
        for named, item in refused.items():
            with pytest.raises(ValueError, match=f"item 1: .*{named}"):
                await session.add_items(items({"role": "user", "content": "kept out"}, item))
        stored = await session.get_items()

    assert stored == items({"role": "user", "content": "hello"}), "a refused batch writes nothing"


async def test_clear_session_closes_the_episode_and_the_session_goes_on_in_the_next(
    server: RunningServer,
) -> None:
    async with connected(server) as (client, agent_id):
        session = EpisodicSession(unique("s"), client, agent_id, "mary")
        await session.add_items(items({"role": "user", "content": "I'm vegetarian."}))
        first = session.episode_id
        await session.clear_session()
        cleared = await session.get_items()
        await session.add_items(items({"role": "user", "content": "second"}))
        await session.clear_session()
        await session.add_items(items({"role": "user", "content": "third"}))
        idle_closed = session.episode_id
        await client.close_episode(idle_closed)  # as the idle timeout would
        await session.add_items(items({"role": "user", "content": "fourth"}))
        found = EpisodicSession(session.session_id, client, agent_id, "mary")
        states = [(await client.get_episode(e)).episode.state for e in (first, idle_closed)]
        found_items, found_episode = await found.get_items(), found.episode_id
        with pytest.raises(ValueError, match="belongs to another agent or user"):
            await EpisodicSession(session.session_id, client, agent_id, "bob").get_items()

    assert cleared == [] and first == session.session_id
    assert states == [episode_pb2.Episode.STATE_CLOSED] * 2
    assert idle_closed == f"{session.session_id}:3" and session.episode_id == f"{session.session_id}:4"
    assert found_episode == session.episode_id and found_items == items({"role": "user", "content": "fourth"})


async def test_pop_item_retracts_the_newest_item_and_the_log_keeps_it(server: RunningServer) -> None:
    async with connected(server) as (client, agent_id):
        session = EpisodicSession(unique("s"), client, agent_id, "mary")
        await session.add_items(conversation()[1:])
        popped = [await session.pop_item() for _ in range(4)]  # refusal, answer, result, call
        left = await session.get_items()
        await session.add_items([item for item in popped[1::-1] if item is not None])
        restored = await session.get_items()
        log = [m async for m in client.iter_messages(session.episode_id)][::-1]
        emptied = [await session.pop_item() for _ in range(len(restored) + 1)]

    assert popped == conversation()[:2:-1] and left == conversation()[1:3]
    assert restored == conversation()[1:3] + conversation()[5:], "a popped message can be added again"
    assert [m.HasField("retract_time") for m in log] == [False, False] + [True] * 4 + [False] * 2
    assert emptied[-1] is None and emptied[:-1] == restored[::-1]


async def test_a_popped_tool_call_can_be_added_again(server: RunningServer) -> None:
    """Retraction frees a call's id and unanswers its result in the server's tool-call
    registry: adding them again (the SDK does when it undoes a rewind) stores them anew."""
    async with connected(server) as (client, agent_id):
        session = EpisodicSession(unique("s"), client, agent_id, "mary")
        await session.add_items(conversation()[3:5])
        result, call = await session.pop_item(), await session.pop_item()
        assert [call, result] == conversation()[3:5]
        await session.add_items([item for item in (call, result) if item is not None])
        assert await session.get_items() == conversation()[3:5]


@function_tool
def weather(city: str, days: int) -> str:
    """The forecast for a city."""
    return f"Rain in {city} for {days} days."


def first_session_script() -> list[ModelStep]:
    usage = Usage(requests=1, input_tokens=40, output_tokens=9, total_tokens=49)
    return [
        ModelStep(
            output=[function_call("weather", {"city": "Zürich", "days": 2}, call_id="call_w1")], usage=usage
        ),
        ModelStep(output=[assistant_message("Rain for two days.", item_id="msg_a1")]),
        ModelStep(output=[assistant_message("Noted.", item_id="msg_a2")]),
    ]


async def two_turns(session: Session) -> ScriptedModel:
    model = ScriptedModel(first_session_script())
    agent = Agent(name="helper", model=model, tools=[weather])
    await Runner.run(
        agent, "What's the weather in Zürich for two days?", session=session, run_config=NO_TRACES
    )
    await Runner.run(agent, "My cat is called Miso, remember that.", session=session, run_config=NO_TRACES)
    return model


async def test_a_runners_model_sees_what_it_would_with_the_sdks_own_session(server: RunningServer) -> None:
    with closing(SQLiteSession("reference")) as sqlite:
        reference = await two_turns(sqlite)
    async with connected(server) as (client, agent_id):
        ours = await two_turns(EpisodicSession(unique("s"), client, agent_id, "mary"))

    assert [c.input for c in ours.calls] == [c.input for c in reference.calls]
    assert "Rain in Zürich for 2 days." in json.dumps(ours.calls[2].input, ensure_ascii=False)


async def test_the_second_session_context_carries_what_the_user_said_in_the_first(
    server: RunningServer,
) -> None:
    async with connected(server) as (client, agent_id):
        first = EpisodicSession(unique("s"), client, agent_id, "mary")
        await two_turns(first)
        closed = first.episode_id
        await first.clear_session()
        await client.close_episode(closed)  # idempotent
        await digest_settled(client, closed)

        usage = Usage(requests=1, input_tokens=300, output_tokens=6, total_tokens=306)
        model = ScriptedModel([ModelStep(output=[assistant_message("Miso.", item_id="m")], usage=usage)])
        second = EpisodicContextSession(unique("s"), client, agent_id, "mary")
        agent = Agent(name="helper", model=model, tools=[weather])
        await Runner.run(agent, "What is my cat called?", session=second, run_config=NO_TRACES)
        (call,) = [c async for c in client.iter_model_calls(second.episode_id)]
        raw = await second.get_items(limit=5)
        context = second.last_context

    seen = model.calls[0].input
    assert isinstance(seen, list) and seen[-1] == {"role": "user", "content": "What is my cat called?"}
    assert "Miso" in json.dumps(seen[:-1]), "the first session reached the model through recall"
    assert context is not None and call.model_call_id == context.report.model_call_id
    reply = call.reply
    assert (reply.input_tokens, reply.output_tokens, reply.assistant_message_seq) == (300, 6, 2)
    assert [item.get("role") for item in raw] == ["user", "assistant"], "a limit reads the raw log"


def test_the_rendered_context_reads_as_responses_items() -> None:
    """No server needed: BuildContext's messages as the items the model gets."""
    rendered = [
        context_pb2.ContextMessage(role=episode_pb2.ROLE_SYSTEM, content=""),  # no system prompt
        context_pb2.ContextMessage(role=episode_pb2.ROLE_CONTEXT, content="[Known Facts]\n- cat: Miso"),
        context_pb2.ContextMessage(role=episode_pb2.ROLE_TOOL, content="sunny", tool_call_id="call_cut"),
        context_pb2.ContextMessage(
            role=episode_pb2.ROLE_ASSISTANT,
            tool_calls=[tool_call("call_b", "weather", {"city": "Zürich", "days": 2, "x": [1.5]})],
        ),
        context_pb2.ContextMessage(role=episode_pb2.ROLE_TOOL, content="rain", tool_call_id="call_b"),
        context_pb2.ContextMessage(role=episode_pb2.ROLE_ASSISTANT, content="Rain."),
    ]

    got = context_items(rendered)
    arguments = json.loads(got[1].pop("arguments"))  # a Struct keeps no key order

    assert arguments == {"city": "Zürich", "days": 2, "x": [1.5]} and isinstance(arguments["days"], int)
    assert got == [
        {"role": "system", "content": "[Known Facts]\n- cat: Miso"},
        {"type": "function_call", "call_id": "call_b", "name": "weather"},
        {"type": "function_call_output", "call_id": "call_b", "output": "rain"},
        {"role": "assistant", "content": "Rain."},
    ], "an empty system prompt and a result whose call was cut off are not sent"


async def test_the_example_runs_against_the_server(sqlite_server: RunningServer) -> None:
    env = {**clean_environment(), "EPISODIC_ADDRESS": sqlite_server.address, "EPISODIC_API_KEY": KEY_A}
    done = await run_process(sys.executable, str(EXAMPLE), timeout=90, env=env)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "Miso" in done.stdout
    assert "trace export" not in done.stderr, "the SDK's tracing is off: it says nothing"


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", markdown, flags=re.DOTALL | re.MULTILINE)


async def test_the_docs_usage_snippet_runs_and_its_second_session_recalls_the_first(
    sqlite_server: RunningServer,
) -> None:
    """The snippet as written, its address and model name swapped for the test server's and
    a scripted model: nothing but `clear_session` stands between the two sessions."""
    (snippet,) = python_blocks(DOC.read_text(encoding="utf-8"))
    swaps = {'"127.0.0.1:50051"': "address", 'model="gpt-4o"': "model=model"}
    for written, swapped in swaps.items():
        assert snippet.count(written) == 1, f"the snippet names {written} once"
        snippet = snippet.replace(written, swapped)
    model = ScriptedModel(
        [
            [assistant_message("Exciting! Good luck with the move.", item_id="m1")],
            [assistant_message("Zürich.")],
        ]
    )
    given = {"address": sqlite_server.address, "key": KEY_A, "model": model}
    code = compile(snippet, str(DOC), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    running = eval(code, given)  # top-level `async with`: evaluating the module makes a coroutine
    await running

    first, second = (call.input for call in model.calls)
    assert isinstance(first, list) and isinstance(second, list) and len(model.calls) == 2
    assert second[-1] == {"role": "user", "content": "Where do I live now?"}
    assert "moving to Zürich in June" in json.dumps(second[:-1], ensure_ascii=False), (
        "the second session's model input carries what the user said in the first"
    )


# --- property: any conversation of supported items round-trips ----------------------------

CHARACTERS = st.characters(exclude_categories=["Cs"], exclude_characters="\x00")  # the server's text
TEXT = st.text(CHARACTERS, min_size=1, max_size=30)
ANY_TEXT = st.text(CHARACTERS, max_size=30)
IDS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,20}", fullmatch=True)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ANY_TEXT, inner, max_size=3),
    max_leaves=8,
)


def message_items() -> st.SearchStrategy[list[dict[str, Any]]]:
    easy = st.builds(
        lambda role, text: {"role": role, "content": text}, st.sampled_from(["user", "assistant"]), TEXT
    )
    parts = st.builds(
        lambda role, texts: {
            "type": "message",
            "role": role,
            "content": [{"type": "input_text", "text": t} for t in texts],
        },
        st.sampled_from(["user", "system", "developer"]),
        st.lists(TEXT, min_size=1, max_size=3),
    )
    output = st.builds(
        lambda item_id, text, status: {
            "id": item_id,
            "type": "message",
            "role": "assistant",
            "status": status,
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
        },
        IDS,
        TEXT,
        st.sampled_from(["completed", "incomplete"]),
    )
    return st.one_of(easy, parts, output).map(lambda item: [item])


def tool_exchange() -> st.SearchStrategy[list[dict[str, Any]]]:
    """A call and its output; its call_id is made unique in conversations()."""
    arguments = st.dictionaries(ANY_TEXT, JSON, max_size=4).map(lambda a: json.dumps(a, ensure_ascii=False))
    return st.builds(
        lambda name, args, output, item_id: [
            {"type": "function_call", "call_id": "", "name": name, "arguments": args, "id": item_id},
            {"type": "function_call_output", "call_id": "", "output": output},
        ],
        IDS,
        arguments,
        ANY_TEXT,
        IDS,
    )


Op = tuple[str, Any]


def numbered(ops: list[Op]) -> list[Op]:
    """Every tool exchange gets its own call_id: a call id is used once per episode."""
    calls = 0
    for op, argument in ops:
        if op != "add":
            continue
        for turn in argument:
            calls += 1
            for item in turn:
                if "call_id" in item:
                    item["call_id"] = f"call_{calls}"
    return [(op, [i for turn in a for i in turn] if op == "add" else a) for op, a in ops]


def operations() -> st.SearchStrategy[list[Op]]:
    """A conversation added, then adds, pops, reads (with or without a limit) and clears."""
    batch = st.lists(message_items() | tool_exchange(), min_size=1, max_size=3)
    op = st.one_of(
        st.tuples(st.just("add"), batch),
        st.tuples(st.just("pop"), st.none()),
        st.tuples(st.just("get"), st.none() | st.integers(0, 6)),
        st.tuples(st.just("clear"), st.none()),
    )
    first = st.tuples(st.just("add"), st.lists(message_items() | tool_exchange(), min_size=1, max_size=5))
    return st.builds(lambda head, rest: [head, *rest], first, st.lists(op, max_size=6)).map(numbered)


async def applied(session: Session, ops: list[Op]) -> list[Any]:
    """What each operation returned, and the items the session holds at the end."""
    out: list[Any] = []
    for op, argument in ops:
        if op == "add":
            await session.add_items(copy.deepcopy(argument))
            out.append("added")
        elif op == "pop":
            out.append(await session.pop_item())
        elif op == "get":
            out.append(await session.get_items(argument))
        else:
            await session.clear_session()
            out.append("cleared")
    return [*out, await session.get_items()]


@settings(
    max_examples=20,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=operations())
async def test_any_sequence_of_operations_reads_as_the_sdks_own_session(
    server: RunningServer, ops: list[Op]
) -> None:
    """The SDK's SQLiteSession is the reference: every item round-trips exactly, a limit
    reads the latest, pop_item returns the newest, clear_session empties."""
    with closing(SQLiteSession("reference")) as sqlite:
        expected = await applied(sqlite, ops)
    async with connected(server) as (client, agent_id):
        got = await applied(EpisodicSession(unique("s"), client, agent_id, "mary"), ops)

    assert got == expected
