"""Bad input is INVALID_ARGUMENT naming the field, never a crash deeper down (issue "Fair
share", findings 7 and 8): durations and timestamps outside protobuf's rules, times that
leave datetime's range in UTC, lone surrogates in any text, hostile JSON nesting, tool
arguments of the wrong type; and no existence oracle or lost text on reused ids."""

from __future__ import annotations

import urllib.parse
from datetime import datetime, timedelta

import pytest
from google.protobuf import duration_pb2, timestamp_pb2

from episodic.domain.json_text import nested_deeper_than
from episodic.domain.memories import MemoryKind, Placement
from episodic.domain.memory_rules import CreateRequest, MemoryDraft, SessionUpdate, check_session_update
from episodic.domain.model import Caller, JsonValue, NewMessage, Role
from episodic.domain.validation import (
    MAX_LISTED,
    MAX_LISTED_BYTES,
    NUL_RULE,
    SURROGATE_RULE,
    Limits,
    Violations,
    check_json,
    check_text,
    text_problem,
)
from episodic.edges.grpc.convert import duration_in, time_in
from episodic.errors import InvalidArgument
from episodic.service.memory_tools import MemoryTools
from tests.unit.use_cases import CALLER, TENANT, UseCases, use_cases

LONE = "\ud800"
LIMITS = Limits()


@pytest.fixture
async def uc() -> UseCases:
    cases = use_cases()
    await cases.new_agent()
    return cases


def fields_of(caught: pytest.ExceptionInfo[InvalidArgument]) -> list[str]:
    return [v.field for v in caught.value.violations]


def nested(depth: int) -> JsonValue:
    value: JsonValue = "leaf"
    for _ in range(depth):
        value = [value]
    return value


# --- durations and timestamps -----------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "nanos"),
    [(315_576_000_001, 0), (0, 2_000_000_000), (0, -1_000_000_000), (5, -1), (-5, 1)],
    ids=["seconds-out-of-range", "nanos-2e9", "nanos-below", "plus-minus", "minus-plus"],
)
def test_a_duration_outside_protobufs_rules_is_invalid_naming_the_field(seconds: int, nanos: int) -> None:
    with pytest.raises(InvalidArgument) as caught:
        duration_in(duration_pb2.Duration(seconds=seconds, nanos=nanos), "ttl")
    assert fields_of(caught) == ["ttl"]


def test_a_duration_at_protobufs_bounds_is_accepted() -> None:
    assert duration_in(duration_pb2.Duration(seconds=-3, nanos=-5), "ttl") < timedelta(0)
    assert duration_in(duration_pb2.Duration(seconds=315_576_000_000), "ttl").days == 3_652_500


@pytest.mark.parametrize(
    ("seconds", "nanos"), [(0, 1_000_000_000), (0, -1), (253_402_300_800, 0), (-62_135_596_801, 0)]
)
def test_a_timestamp_outside_protobufs_rules_is_invalid_naming_the_field(seconds: int, nanos: int) -> None:
    with pytest.raises(InvalidArgument) as caught:
        time_in(timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos), "memory.event_time")
    assert fields_of(caught) == ["memory.event_time"]


def test_the_largest_ttl_protobuf_allows_is_invalid_not_an_overflow() -> None:
    ttl = duration_in(duration_pb2.Duration(seconds=315_576_000_000), "ttl")
    with pytest.raises(InvalidArgument) as caught:
        check_session_update(SessionUpdate("ep-1", {"k": 1}, ttl=ttl), LIMITS)
    assert fields_of(caught) == ["ttl"]


@pytest.mark.parametrize("when", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"])
async def test_an_event_time_beyond_datetimes_range_in_utc_is_invalid(uc: UseCases, when: str) -> None:
    draft = MemoryDraft(text="Flies to Oslo", kind=MemoryKind.EVENT, event_time=datetime.fromisoformat(when))
    request = CreateRequest([draft], agent_id="helper", user_id="mary", placement=Placement.EAGER)
    with pytest.raises(InvalidArgument) as caught:
        await uc.memories.create(CALLER, request)
    assert fields_of(caught) == ["memories[0].event_time"]


# --- text -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("plain", ""),
        ("a\x00b", NUL_RULE),
        ("café ☕ 🙂", ""),
        ("é\x00", NUL_RULE),
        (f"é{LONE}", SURROGATE_RULE),
        (f"\x00{LONE}", NUL_RULE),
    ],
)
def test_a_texts_size_is_its_utf8_bytes_and_its_problem_the_one_rule_of_every_text(
    text: str, problem: str
) -> None:
    size = len(text.encode("utf-8", "surrogatepass"))
    v = Violations()
    check_text(v, "text", text, size - 1)
    assert [i.description for i in v.items] == [
        *([problem] if problem else []),
        f"is {size} bytes, over the limit of {size - 1}",
    ]
    assert text_problem(text) == problem
    fits = Violations()
    check_text(fits, "text", text, size)
    assert [i.description for i in fits.items] == ([problem] if problem else [])


def test_a_lone_surrogate_is_invalid_in_text_and_in_json_at_any_depth() -> None:
    v = Violations()
    check_text(v, "message.content", f"a{LONE}b", 100)
    check_json(v, "metadata", {"k": [f"x{LONE}"]}, LIMITS)
    check_json(v, "data", {LONE: 1}, LIMITS)
    assert [(i.field, "surrogate" in i.description) for i in v.items] == [
        ("message.content", True),
        ("metadata", True),
        ("data", True),
    ]


def test_text_outside_ascii_is_valid_unless_it_holds_a_lone_surrogate_anywhere() -> None:
    assert text_problem("café 😀 日本語 " * 1000) == ""
    assert text_problem("é" * 10_000 + "\udc80") == SURROGATE_RULE  # a low half at the very end
    assert text_problem("\ud83d" + "a") == SURROGATE_RULE  # a high half with no low half after it
    assert text_problem("a\x00é") == NUL_RULE


async def test_a_lone_surrogate_in_a_memory_or_a_message_is_invalid_naming_the_field(uc: UseCases) -> None:
    draft = MemoryDraft(text=f"Likes {LONE}", kind=MemoryKind.FACT, topics=("ok", LONE))
    request = CreateRequest([draft], agent_id="helper", user_id="mary", placement=Placement.EAGER)
    with pytest.raises(InvalidArgument) as caught:
        await uc.memories.create(CALLER, request)
    assert fields_of(caught) == ["memories[0].text", "memories[0].topics[1]"]
    episode_id = await uc.open()
    with pytest.raises(InvalidArgument) as caught:
        await uc.episodes.add_message(CALLER, episode_id, NewMessage(Role.USER, LONE))
    assert fields_of(caught) == ["message.content"]
    with pytest.raises(InvalidArgument) as caught:
        await uc.sessions.update(CALLER, SessionUpdate(episode_id, {"note": LONE}))
    assert fields_of(caught) == ["data"]


# --- JSON nesting -----------------------------------------------------------------------


def test_json_nested_thousands_deep_is_refused_without_recursion() -> None:
    v = Violations()
    check_json(v, "metadata", nested(50_000), LIMITS)
    assert [(i.field, i.description) for i in v.items] == [("metadata", "is nested too deeply")]


def test_nesting_is_measured_outside_strings() -> None:
    assert nested_deeper_than("[" * 3000 + "]" * 3000, 64)
    assert not nested_deeper_than('{"a": "[[[[[[", "b": [[1]]}', 3)
    assert not nested_deeper_than('{"a": "\\"[[[["}', 1)


# --- the memory tools' arguments --------------------------------------------------------


def tools(uc: UseCases) -> MemoryTools:
    return MemoryTools(memories=uc.memories, search=uc.memory_search, episodes=uc.episode_store)


async def call_tool(uc: UseCases, name: str, arguments: str) -> list[str]:
    episode_id = await uc.open()
    with pytest.raises(InvalidArgument) as caught:
        await tools(uc).call(CALLER, episode_id, name, arguments)
    return fields_of(caught)


async def test_arguments_nested_3000_deep_are_invalid_not_a_recursion_error(uc: UseCases) -> None:
    deep = '{"query": "x", "kinds": ' + "[" * 3000 + "]" * 3000 + "}"
    assert await call_tool(uc, "search_memory", deep) == ["arguments"]


@pytest.mark.parametrize("top_k", ["true", "1e308", "NaN", "0", "21", "2.5", '"5"', "null"])
async def test_top_k_must_be_an_integer_within_bounds(uc: UseCases, top_k: str) -> None:
    assert await call_tool(uc, "search_memory", f'{{"query": "x", "top_k": {top_k}}}') == ["arguments.top_k"]


async def test_long_term_must_be_a_boolean(uc: UseCases) -> None:
    arguments = '{"text": "Likes tea", "kind": "fact", "long_term": "yes"}'
    assert await call_tool(uc, "add_memory", arguments) == ["arguments.long_term"]


@pytest.mark.parametrize("when", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"])
async def test_a_tool_event_time_beyond_range_is_invalid(uc: UseCases, when: str) -> None:
    arguments = f'{{"text": "Flies to Oslo", "kind": "event", "event_time": "{when}"}}'
    assert await call_tool(uc, "add_memory", arguments) == ["arguments.event_time"]


async def test_a_lone_surrogate_escaped_in_tool_arguments_is_invalid(uc: UseCases) -> None:
    arguments = '{"text": "Likes \\ud800", "kind": "fact"}'
    assert await call_tool(uc, "add_memory", arguments) == ["arguments.text"]


# --- no existence oracle, no lost text --------------------------------------------------


async def test_a_restricted_key_gets_the_same_answer_for_another_agents_memory_id_as_for_an_unused_one(
    uc: UseCases,
) -> None:
    await uc.new_agent("other")
    theirs = CreateRequest(
        [MemoryDraft(text="Owns a boat", kind=MemoryKind.FACT, memory_id="m-taken")],
        agent_id="other", user_id="mary", placement=Placement.EAGER,
    )  # fmt: skip
    await uc.memories.create(CALLER, theirs)
    restricted = Caller(TENANT, agents=frozenset({"helper"}))

    async def create(memory_id: str) -> str:
        draft = MemoryDraft(text="Likes tea", kind=MemoryKind.FACT, memory_id=memory_id)
        request = CreateRequest([draft], agent_id="helper", user_id="mary", placement=Placement.EAGER)
        (made,) = await uc.memories.create(restricted, request)
        return made.memory.memory_id

    taken, unused = await create("m-taken"), await create("m-unused")
    assert taken.startswith("mem_") and unused.startswith("mem_")
    assert await create("m-taken") == taken  # a retry finds what the first call made
    assert await create(taken) == taken  # its own memory, by the id it was given
    held = await uc.memory_store.get_many(TENANT, ["m-taken"])
    assert held["m-taken"].agent_id == "other"


@pytest.mark.parametrize("wrong", ["path 'nope' is not updatable", "é" * 5000, "😀" * 5000, "x" * 100_000])
def test_a_thousand_violations_list_a_bounded_few_and_count_the_rest(wrong: str) -> None:
    v = Violations()
    for i in range(1000):
        v.add(f"update_mask[{i}]", wrong)
    with pytest.raises(InvalidArgument) as refused:
        v.raise_if_any()
    *listed, more = refused.value.violations
    assert 1 <= len(listed) <= MAX_LISTED
    assert more.field == "request"
    assert more.description == f"and {1000 - len(listed)} more violations, not listed"
    sent = sum(len(urllib.parse.quote(f.field + f.description)) for f in listed)
    assert sent <= 2 * MAX_LISTED_BYTES  # the first always listed, cut to its own bound
    assert len(refused.value.message.encode()) <= 4 * MAX_LISTED_BYTES


def test_a_few_violations_are_all_listed_as_they_were_added() -> None:
    v = Violations()
    v.add("a", "is required")
    v.add("b", "is too long")
    with pytest.raises(InvalidArgument) as refused:
        v.raise_if_any()
    listed = [(f.field, f.description) for f in refused.value.violations]
    assert listed == [("a", "is required"), ("b", "is too long")]
