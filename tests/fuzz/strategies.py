"""Hypothesis strategies for any request message of a protobuf schema, walked from its
descriptor at run time: hostile values (empty, huge and unicode-edge strings, boundary
numbers, unknown enum numbers, deep and wide Structs, out-of-range Timestamps and
Durations, repeated fields with many elements), plausible values that get past validation
into the service code (ids that exist, for the fuzzed tenant and for the other one), and
raw bodies that are not a valid message of the method's type at all.

Hypothesis is used as a generator, not as a test runner: `draw_examples` runs a recording
`@given` function for `count` examples (generate phase only, no database, no shrinking)
and returns what it drew. That keeps generation synchronous and seedable, while the
requests are replayed asynchronously against a live server afterwards."""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import json
import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeAlias, TypeVar

from google.protobuf import duration_pb2, field_mask_pb2, message_factory, struct_pb2, timestamp_pb2
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from episodic.v1 import agent_pb2, context_service_pb2, episode_pb2, memory_pb2, memory_service_pb2

T = TypeVar("T")
F = FieldDescriptor
Setter: TypeAlias = Callable[[Message], None]

MAX_NESTING = 8  # message levels the generic walker descends (Structs nest on their own)
MAX_REPEATED_BYTES = 6 * 1024 * 1024  # "many elements" stops growing a field past this
PLAUSIBLE_HOSTILITY = 8  # percent of fields of a plausible request that still get hostile values
MARKER_FIELD = "client_message_id"

# --- weights --------------------------------------------------------------------------


Table: TypeAlias = "tuple[tuple[Fraction, SearchStrategy[Any]], ...]"
TABLE_ATTRIBUTE = "episodic_fuzz_weights"  # a weighted strategy's table, kept on the strategy itself
PICK_RESOLUTION = 1000  # Hypothesis draws integers uniformly only from small ranges


def weighted(*choices: tuple[int, SearchStrategy[T]]) -> SearchStrategy[T]:
    """One of the strategies, picked in proportion to its weight (0 leaves it out).
    Choices that are themselves `weighted` are merged into one table, so that a value
    costs Hypothesis one pick however deeply the weights nest (drawing, not building
    strategies, is what limits the requests per second)."""
    total = sum(weight for weight, _ in choices)
    table: list[tuple[Fraction, SearchStrategy[Any]]] = []
    for weight, strategy in choices:
        if weight:
            table += [(Fraction(weight, total) * share, leaf) for share, leaf in _table_of(strategy)]
    return _pick(tuple(table))


def mapped(strategy: SearchStrategy[Any], function: Callable[[Any], T]) -> SearchStrategy[T]:
    """strategy.map(function), keeping a weighted table mergeable by mapping its leaves."""
    table = _table_of(strategy)
    if len(table) == 1:
        return strategy.map(function)
    return _pick(tuple((share, leaf.map(function)) for share, leaf in table))


def _table_of(strategy: SearchStrategy[Any]) -> Table:
    table: Table = getattr(strategy, TABLE_ATTRIBUTE, ((Fraction(1), strategy),))
    return table


def _pick(table: Table) -> SearchStrategy[Any]:
    bounds = list(itertools.accumulate(max(1, round(share * PICK_RESOLUTION)) for share, _ in table))
    leaves = [leaf for _, leaf in table]
    picked = st.integers(0, bounds[-1] - 1).flatmap(lambda n: leaves[bisect.bisect_right(bounds, n)])
    setattr(picked, TABLE_ATTRIBUTE, table)
    return picked


cached = functools.lru_cache(maxsize=4096)  # building strategies costs more than drawing them


# --- strings and bytes ------------------------------------------------------------------

EDGE_TEXTS: tuple[str, ...] = (
    "", " ", "\x00", "a\x00b", "\t\r\n", "\x1b[31mred\x1b[0m", "\x7f", "\x85", "\u2028\u2029",
    "\u200e", "\u200f", "\u202e", "abc\u202edcba", "\u2066x\u2069", "\u200b", "\u200d", "\ufeff", "\xad",
    "e\u0301", "\u0301", "\u0e01\u0e34\u0e4d", "\u0915\u094d\u200d\u0937",
    "\U0001f469\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466", "\U0001f3f3\ufe0f\u200d\U0001f308",
    "\U0001f1fa\U0001f1f3", "\U0001f44d\U0001f3fd", "\ue000", "\U000f0000", "\U0010fffd", "\U0010ffff",
    "\uffff", "\ufffe", "\ufdd0", "\ufffd", "\xdf", "\u0130", "\ufb03", "\ufdfa", "\U0001d573\U0001d58a",
    "\u65e5\u672c\u8a9e", "\u0645\u0631\u062d\u0628\u0627", "\u05e9\u05dc\u05d5\u05dd",
    "'; DROP TABLE episodes; --", "%s%n%x", "{{7*7}}", "${jndi:ldap://x}", "../../etc/passwd", "\\",
    '"', "null", "NaN", "-0", "1e309", "9" * 40, '{"a": 1}', "[" * 64, "<script>alert(1)</script>",
)  # fmt: skip
GRAPHEME_UNITS = (
    "a", "\xe9", "\u0301", "\U0001f469\u200d\U0001f467", "\u200d", "\U0010fffd", "\u65e5", "\u202e",
)  # fmt: skip
HUGE_SIZES = (4 * 1024, 64 * 1024, 64 * 1024 + 1, 256 * 1024, 256 * 1024 + 1, 1024 * 1024)
ID_START = "abcxyzABCXYZ0189"
ID_REST = ID_START + "._:@-"
PHRASES = (
    "hello", "What is the weather in Paris tomorrow?", "I prefer window seats.", "ok", "Thanks!",
    "My order number is 12345.", "Remind me about the dentist on Friday.", "Summarize our chat.",
)  # fmt: skip


@cached
def valid_ids() -> SearchStrategy[str]:
    return st.builds(str.__add__, st.sampled_from(ID_START), st.text(ID_REST, max_size=24))


@cached
def boundary_length_ids() -> SearchStrategy[str]:
    return st.sampled_from((127, 128, 129, 1000)).map(lambda n: "a" * n)


def _repeat_to_bytes(unit: str, size: int) -> str:
    """About `size` UTF-8 bytes: a base letter and `unit` over and over (with a combining
    mark, one grapheme of a million bytes)."""
    return "a" + unit * (size // len(unit.encode()))


@cached
def huge_texts() -> SearchStrategy[str]:
    return st.builds(_repeat_to_bytes, st.sampled_from(GRAPHEME_UNITS), st.sampled_from(HUGE_SIZES))


@cached
def small_hostile_texts() -> SearchStrategy[str]:
    edge = st.sampled_from(EDGE_TEXTS)
    return weighted(
        (4, edge),
        (3, st.text(st.characters(codec="utf-8"), max_size=24)),
        (2, st.lists(edge | st.text(max_size=4), max_size=8).map("".join)),
        (3, valid_ids()),
        (1, boundary_length_ids()),
    )


@cached
def hostile_texts() -> SearchStrategy[str]:
    return weighted((14, small_hostile_texts()), (1, huge_texts()))


@cached
def hostile_bytes() -> SearchStrategy[bytes]:
    edge = st.sampled_from((b"", b"\x00", b"\xff" * 16, b"\xed\xa0\x80", bytes(range(256))))
    huge = st.sampled_from(HUGE_SIZES).map(lambda n: bytes(range(256)) * (n // 256))
    return weighted((4, st.binary(max_size=64)), (2, edge), (1, huge))


@cached
def plausible_texts() -> SearchStrategy[str]:
    return weighted(
        (5, st.sampled_from(PHRASES)),
        (2, st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=40)),
        (1, st.sampled_from([t for t in EDGE_TEXTS if t and "\x00" not in t])),
    )


# --- numbers and enums ------------------------------------------------------------------

INT_RANGES: dict[int, tuple[int, int]] = {
    **dict.fromkeys((F.TYPE_INT32, F.TYPE_SINT32, F.TYPE_SFIXED32), (-(2**31), 2**31 - 1)),
    **dict.fromkeys((F.TYPE_INT64, F.TYPE_SINT64, F.TYPE_SFIXED64), (-(2**63), 2**63 - 1)),
    **dict.fromkeys((F.TYPE_UINT32, F.TYPE_FIXED32), (0, 2**32 - 1)),
    **dict.fromkeys((F.TYPE_UINT64, F.TYPE_FIXED64), (0, 2**64 - 1)),
}
INTERESTING_INTS = (
    0, 1, 2, -1, -2, 31, 32, 33, 63, 64, 65, 99, 100, 101, 127, 128, 129, 499, 500, 501, 999, 1000, 1001,
    4096, 65535, 65536, 10**6, 10**9, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**32 - 1, 2**32,
    2**53, 2**53 + 1, 2**63 - 1, -(2**63), 2**64 - 1,
)  # fmt: skip
EDGE_DOUBLES = (
    0.0, -0.0, 1.0, -1.0, 0.5, 1e-300, 5e-324, 1.7976931348623157e308, -1.7976931348623157e308,
    math.inf, -math.inf, math.nan, 2.0**53, 2.0**63, 1.0000000000000002,
)  # fmt: skip
EDGE_FLOATS = (0.0, -0.0, 1.0, -1.0, 0.5, 1.401298464324817e-45, 3.4028234663852886e38, math.inf, -math.inf)
PLAUSIBLE_INTS = (0, 1, 2, 3, 5, 10, 50, 100, 1000, 4096, 8192, 128_000)


@cached
def boundary_ints(low: int, high: int) -> SearchStrategy[int]:
    interesting = sorted({n for n in INTERESTING_INTS if low <= n <= high} | {low, low + 1, high - 1, high})
    return weighted((3, st.sampled_from(interesting)), (1, st.integers(low, high)))


@cached
def hostile_doubles() -> SearchStrategy[float]:
    return weighted((2, st.sampled_from(EDGE_DOUBLES)), (1, st.floats()))


@cached
def hostile_floats() -> SearchStrategy[float]:
    return weighted((2, st.sampled_from((*EDGE_FLOATS, math.nan))), (1, st.floats(width=32)))


@cached
def hostile_enums(enum: EnumDescriptor) -> SearchStrategy[int]:
    declared = [v.number for v in enum.values]
    beyond = (max(declared) + 1, min(declared) - 1, 99, -1, 2**31 - 1, -(2**31))
    return weighted(
        (3, st.sampled_from(declared)), (2, st.sampled_from(beyond)), (1, st.integers(-(2**31), 2**31 - 1))
    )


# --- JSON (google.protobuf.Struct, Value, ListValue) ------------------------------------


class EmptyValue:
    """A google.protobuf.Value with no kind set: valid protobuf, but no JSON value."""


EMPTY = EmptyValue()
JsonTree: TypeAlias = "bool | float | str | EmptyValue | list[JsonTree] | dict[str, JsonTree] | None"


@cached
def json_leaves(hostile: bool) -> SearchStrategy[JsonTree]:
    numbers = hostile_doubles() if hostile else st.floats(-1e6, 1e6)
    texts = small_hostile_texts() if hostile else plausible_texts()
    return weighted(
        (1, st.none()), (1, st.booleans()), (2, numbers), (3, texts), (1 if hostile else 0, st.just(EMPTY))
    )


@cached
def json_keys(hostile: bool) -> SearchStrategy[str]:
    return small_hostile_texts() if hostile else st.sampled_from(("source", "lang", "city", "score", "k"))


@cached
def small_json(hostile: bool) -> SearchStrategy[JsonTree]:
    leaves, keys = json_leaves(hostile), json_keys(hostile)
    return st.recursive(
        leaves,
        lambda kids: st.lists(kids, max_size=4) | st.dictionaries(keys, kids, max_size=4),
        max_leaves=6,
    )


def _nest(depth: int, style: str, leaf: JsonTree) -> JsonTree:
    tree = leaf
    for level in range(depth):
        as_list = style == "lists" or (style == "alternating" and level % 2 == 1)
        tree = [tree] if as_list else {"n": tree}
    return tree


@cached
def deep_json() -> SearchStrategy[JsonTree]:
    """Up to ~110 levels: past the server's JSON depth limit and past protobuf's own
    decoder limit of 100 message levels (a Struct level is three message levels)."""
    depths = weighted((1, st.integers(1, 30)), (2, st.integers(30, 40)), (2, st.integers(40, 110)))
    styles = st.sampled_from(("structs", "lists", "alternating"))
    return st.builds(_nest, depths, styles, json_leaves(hostile=True))


@cached
def wide_json() -> SearchStrategy[JsonTree]:
    widths = st.sampled_from((100, 1000, 5000, 20_000))
    return st.builds(lambda width, leaf: {f"k{i}": leaf for i in range(width)}, widths, json_leaves(True))


@cached
def hostile_json() -> SearchStrategy[JsonTree]:
    return weighted((4, small_json(hostile=True)), (2, deep_json()), (1, wide_json()))


def as_object(tree: JsonTree) -> dict[str, JsonTree]:
    return tree if isinstance(tree, dict) else {"v": tree}


def write_value(target: struct_pb2.Value, tree: JsonTree) -> None:
    """Writes the tree into the message in place, one protobuf object at a time."""
    if isinstance(tree, EmptyValue):
        return
    if tree is None:
        target.null_value = struct_pb2.NULL_VALUE
    elif isinstance(tree, bool):
        target.bool_value = tree
    elif isinstance(tree, float):
        target.number_value = tree
    elif isinstance(tree, str):
        target.string_value = tree
    elif isinstance(tree, list):
        write_list(target.list_value, tree)
    else:
        write_struct(target.struct_value, tree)


def write_list(target: struct_pb2.ListValue, items: list[JsonTree]) -> None:
    target.SetInParent()
    for item in items:
        write_value(target.values.add(), item)


def write_struct(target: struct_pb2.Struct, fields: dict[str, JsonTree]) -> None:
    target.SetInParent()
    for key, item in fields.items():
        write_value(target.fields[key], item)


def _struct_of(tree: JsonTree) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    write_struct(struct, as_object(tree))
    return struct


def _value_of(tree: JsonTree) -> struct_pb2.Value:
    value = struct_pb2.Value()
    write_value(value, tree)
    return value


def _list_of(tree: JsonTree) -> struct_pb2.ListValue:
    values = struct_pb2.ListValue()
    write_list(values, tree if isinstance(tree, list) else [tree])
    return values


# --- the world: ids that exist, and markers ---------------------------------------------


@dataclass(frozen=True, slots=True)
class World:
    """What exists on the server when a batch is drawn: for an id field's name (agent_id,
    episode_id, ...), ids of the fuzzed tenant (`own`) and of the other one (`foreign`).
    Hashable, so strategies built for it are cached."""

    own: tuple[tuple[str, tuple[str, ...]], ...]
    foreign: tuple[tuple[str, tuple[str, ...]], ...]
    marker_prefix: str
    now_seconds: int

    @classmethod
    def of(
        cls,
        own: Mapping[str, Sequence[str]],
        foreign: Mapping[str, Sequence[str]],
        marker_prefix: str,
        now: int,
    ) -> World:
        def frozen(ids: Mapping[str, Sequence[str]]) -> tuple[tuple[str, tuple[str, ...]], ...]:
            return tuple(sorted((name, tuple(values)) for name, values in ids.items() if values))

        return cls(frozen(own), frozen(foreign), marker_prefix, now)

    def own_ids(self, name: str) -> tuple[str, ...]:
        return dict(self.own).get(name, ())

    def foreign_ids(self, name: str) -> tuple[str, ...]:
        return dict(self.foreign).get(name, ())


@cached
def markers(world: World) -> SearchStrategy[str]:
    """Client message ids unique in the run (64 random bits after the run's prefix, so
    worker processes need no coordination), to find a request's messages in the logs."""
    return st.builds(lambda: f"{world.marker_prefix}-{uuid.uuid4().hex[:16]}")


@cached
def _known_ids(world: World, name: str) -> SearchStrategy[str]:
    own, foreign = world.own_ids(name), world.foreign_ids(name)
    return weighted(
        (6 if own else 0, st.sampled_from(own or ("-",))),
        (2 if foreign else 0, st.sampled_from(foreign or ("-",))),
        (2, valid_ids()),
    )


PLAUSIBLE_STRINGS: dict[str, Callable[[World], SearchStrategy[str]]] = {
    MARKER_FIELD: lambda w: weighted((8, markers(w)), (1, st.sampled_from(("m-1", "m-2"))), (1, st.just(""))),
    "user_id": lambda w: weighted((6, st.sampled_from(("mary", "john", "u-1"))), (1, valid_ids())),
    "page_token": lambda w: weighted((9, st.just("")), (1, small_hostile_texts())),
    "model": lambda w: st.sampled_from(("", "", "", "gpt-4", "gpt-4", "gpt-4o", "o1", "no-such-model")),
    "token_encoding": lambda w: st.sampled_from(("", "", "", "", "cl100k_base", "o200k_base", "no-such-one")),
    "tool_name": lambda w: st.sampled_from(("search", "calculator", "weather")),
}


@cached
def plausible_strings(name: str, world: World) -> SearchStrategy[str]:
    if world.own_ids(name) or world.foreign_ids(name):
        return _known_ids(world, name)
    if name in PLAUSIBLE_STRINGS:
        return PLAUSIBLE_STRINGS[name](world)
    if name.endswith("_id"):
        return weighted((1, st.just("")), (3, valid_ids()))
    return plausible_texts()


@cached
def plausible_ints(name: str, low: int, high: int) -> SearchStrategy[int]:
    if name == "page_size":
        return weighted((3, st.integers(0, 20)), (1, st.sampled_from((1000, 1001))))
    if name.endswith("percent"):
        return st.integers(max(low, 50), min(high, 100))
    if name.endswith("top_k"):
        return st.integers(max(low, 1), min(high, 10))
    if name.endswith(("_seq", "verbatim")):
        return st.integers(max(low, 0), min(high, 20))
    if name.endswith("tokens"):  # a budget (max_...) well inside a window
        sizes = (500, 1000, 2000) if name.startswith("max_") else (8192, 32_000, 128_000)
        return st.sampled_from([n for n in sizes if low <= n <= high])
    return st.sampled_from([n for n in PLAUSIBLE_INTS if low <= n <= high])


def plausible_enums(enum: EnumDescriptor) -> SearchStrategy[int]:
    """Mostly a declared value other than the zero one (which usually means "not set")."""
    declared = [v.number for v in enum.values]
    named = [n for n in declared if n != 0] or declared
    return weighted((5, st.sampled_from(named)), (1, st.sampled_from(declared)))


# --- well-known messages ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scope:
    """How a message is drawn: the world's ids, the percent of fields given hostile values
    (100: every field), and the field-mask paths that make sense in this request."""

    world: World
    hostility: int
    mask_paths: tuple[str, ...] = ()

    def hostile(self) -> Scope:
        return dataclasses.replace(self, hostility=100)


def _mixed(scope: Scope, plausible: SearchStrategy[T], hostile: SearchStrategy[T]) -> SearchStrategy[T]:
    return weighted((100 - scope.hostility, plausible), (scope.hostility, hostile))


@cached
def structs(scope: Scope) -> SearchStrategy[Message]:
    plausible = st.dictionaries(json_keys(False), json_leaves(hostile=False), max_size=3)
    return mapped(_mixed(scope, plausible, hostile_json()), _struct_of)


@cached
def values(scope: Scope) -> SearchStrategy[Message]:
    return mapped(_mixed(scope, small_json(hostile=False), hostile_json()), _value_of)


@cached
def list_values(scope: Scope) -> SearchStrategy[Message]:
    return mapped(_mixed(scope, small_json(hostile=False), hostile_json()), _list_of)


TIMESTAMP_SECONDS = (-62_135_596_800, -62_135_596_801, -1, 0, 253_402_300_799, 253_402_300_800)
DURATION_SECONDS = (0, 1, -1, 315_576_000_000, 315_576_000_001, -315_576_000_000, -315_576_000_001)
NANOS = (0, 1, -1, 999_999_999, 1_000_000_000, -999_999_999, 2**31 - 1, -(2**31))


def _boundary_seconds(named: tuple[int, ...]) -> SearchStrategy[int]:
    return weighted((2, st.sampled_from(named)), (1, boundary_ints(-(2**63), 2**63 - 1)))


@cached
def timestamps(scope: Scope) -> SearchStrategy[Message]:
    now = scope.world.now_seconds
    plausible = st.builds(
        timestamp_pb2.Timestamp, seconds=st.integers(now, now + 600), nanos=st.integers(0, 10**9 - 1)
    )
    hostile = st.builds(
        timestamp_pb2.Timestamp, seconds=_boundary_seconds(TIMESTAMP_SECONDS), nanos=st.sampled_from(NANOS)
    )
    return _mixed(scope, plausible, hostile)


@cached
def durations(scope: Scope) -> SearchStrategy[Message]:
    plausible = st.builds(
        duration_pb2.Duration, seconds=st.integers(1, 3600), nanos=st.integers(0, 10**9 - 1)
    )
    hostile = st.builds(
        duration_pb2.Duration, seconds=_boundary_seconds(DURATION_SECONDS), nanos=st.sampled_from(NANOS)
    )
    return _mixed(scope, plausible, hostile)


@cached
def field_masks(scope: Scope) -> SearchStrategy[Message]:
    known = st.sampled_from(scope.mask_paths or ("display_name",))
    plausible = st.lists(known, min_size=1, max_size=3, unique=True)
    hostile = st.lists(known | small_hostile_texts(), max_size=10) | st.sampled_from((500, 5000)).map(
        lambda n: ["display_name"] * n
    )
    return mapped(_mixed(scope, plausible, hostile), lambda paths: field_mask_pb2.FieldMask(paths=paths))


WELL_KNOWN: dict[str, Callable[[Scope], SearchStrategy[Message]]] = {
    "google.protobuf.Struct": structs,
    "google.protobuf.Value": values,
    "google.protobuf.ListValue": list_values,
    "google.protobuf.Timestamp": timestamps,
    "google.protobuf.Duration": durations,
    "google.protobuf.FieldMask": field_masks,
}


@cached
def mask_paths_of(descriptor: Descriptor) -> tuple[str, ...]:
    """Paths a FieldMask in this request could name: the fields of its non-well-known
    message fields (agent: display_name, memory_config.recall_top_k, ...)."""
    paths: list[str] = []
    for field in descriptor.fields:
        if field.message_type is None or field.message_type.full_name in WELL_KNOWN:
            continue
        for inner in field.message_type.fields:
            paths.append(inner.name)
            if inner.message_type is not None and inner.message_type.full_name not in WELL_KNOWN:
                paths += [f"{inner.name}.{leaf.name}" for leaf in inner.message_type.fields]
    return tuple(paths)


# --- plausible messages the generic walker would rarely get right -----------------------


@cached
def _calls(world: World) -> SearchStrategy[list[episode_pb2.ToolCall]]:
    call = st.builds(
        episode_pb2.ToolCall,
        tool_call_id=markers(world).map(lambda marker: f"call-{marker}"),
        tool_name=PLAUSIBLE_STRINGS["tool_name"](world),
        input=structs(Scope(world, hostility=0)),
    )
    return st.lists(call, max_size=3)


@cached
def _tool_results(world: World) -> SearchStrategy[episode_pb2.ToolResult]:
    scope = Scope(world, hostility=0)
    return st.builds(
        episode_pb2.ToolResult,
        tool_call_id=_known_ids(world, "tool_call_id"),
        output=values(scope),
        succeeded=st.booleans(),
        called_at=st.none() | timestamps(scope),
        duration=st.none() | durations(scope),
    )


@cached
def plausible_message_inputs(scope: Scope) -> SearchStrategy[Message]:
    """A message of a role with what that role needs (a tool result on ROLE_TOOL, tool calls
    only on ROLE_ASSISTANT), tagged with a unique client_message_id most of the time."""
    world = scope.world
    common = {
        "content": plausible_texts(),
        MARKER_FIELD: plausible_strings(MARKER_FIELD, world),
        "metadata": weighted((3, st.none()), (1, structs(Scope(world, hostility=0)))),
    }
    spoken = st.sampled_from((episode_pb2.ROLE_USER, episode_pb2.ROLE_SYSTEM, episode_pb2.ROLE_CONTEXT))
    return st.one_of(
        st.builds(episode_pb2.MessageInput, role=spoken, **common),
        st.builds(
            episode_pb2.MessageInput,
            role=st.just(episode_pb2.ROLE_ASSISTANT),
            tool_calls=_calls(world),
            **common,
        ),
        st.builds(
            episode_pb2.MessageInput,
            role=st.just(episode_pb2.ROLE_TOOL),
            tool_result=_tool_results(world),
            **{k: v for k, v in common.items() if k != "content"},
        ),
    )


@cached
def plausible_context_requests(scope: Scope) -> SearchStrategy[Message]:
    """BuildContext as an agent loop sends it: a client_message_id only when appending the
    user's message, defaults for most of the optional overrides."""
    world = scope.world
    common = {
        "episode_id": _known_ids(world, "episode_id"),
        "user_message": plausible_texts(),
        "system_prompt": weighted((4, st.none()), (1, plausible_texts())),
        "memory_config": weighted((3, st.none()), (1, messages(agent_pb2.MemoryConfig.DESCRIPTOR, scope, 1))),
        "model": PLAUSIBLE_STRINGS["model"](world),
        "recall_query": weighted((3, st.just("")), (1, plausible_texts())),
        "request_id": weighted((1, st.just("")), (1, valid_ids())),
    }
    appending = st.builds(
        context_service_pb2.BuildContextRequest,
        append_user_message=st.just(True),
        client_message_id=plausible_strings(MARKER_FIELD, world),
        **common,
    )
    return weighted((3, appending), (1, st.builds(context_service_pb2.BuildContextRequest, **common)))


_LABELS = st.lists(st.sampled_from(("travel", "food", "Lisbon", "Mary", "work")), max_size=3)
_KINDS = st.sampled_from(
    (memory_pb2.MEMORY_KIND_FACT, memory_pb2.MEMORY_KIND_PREFERENCE, memory_pb2.MEMORY_KIND_EVENT)
)


@cached
def plausible_memory_inputs(scope: Scope) -> SearchStrategy[Message]:
    """A memory as a client or its model writes one: a short statement of a known kind."""
    return st.builds(
        memory_service_pb2.MemoryInput,
        memory_id=weighted((3, st.just("")), (1, plausible_strings("memory_id", scope.world))),
        text=plausible_texts().filter(lambda t: len(t) <= 2000),
        kind=weighted((9, _KINDS), (1, hostile_enums(memory_pb2.MemoryKind.DESCRIPTOR))),
        topics=_LABELS,
        entities=_LABELS,
    )


@cached
def plausible_tool_calls(scope: Scope) -> SearchStrategy[Message]:
    """A model's memory tool call, forwarded as the model wrote it (sometimes badly)."""
    add = st.fixed_dictionaries(
        {"text": plausible_texts(), "kind": st.sampled_from(("fact", "preference", "event", "opinion"))},
        optional={"long_term": st.booleans(), "topics": _LABELS},
    )
    search = st.fixed_dictionaries({"query": plausible_texts()}, optional={"top_k": st.integers(-1, 50)})
    arguments = weighted((4, st.one_of(add, search).map(json.dumps)), (1, small_hostile_texts()))
    return st.builds(
        memory_service_pb2.CallMemoryToolRequest,
        episode_id=_known_ids(scope.world, "episode_id"),
        name=st.sampled_from(("add_memory", "search_memory", "add_memory", "forget_everything")),
        arguments=arguments,
    )


PLAUSIBLE_MESSAGES: dict[str, Callable[[Scope], SearchStrategy[Message]]] = {
    episode_pb2.MessageInput.DESCRIPTOR.full_name: plausible_message_inputs,
    context_service_pb2.BuildContextRequest.DESCRIPTOR.full_name: plausible_context_requests,
    memory_service_pb2.MemoryInput.DESCRIPTOR.full_name: plausible_memory_inputs,
    memory_service_pb2.CallMemoryToolRequest.DESCRIPTOR.full_name: plausible_tool_calls,
}

# --- any message, from its descriptor ---------------------------------------------------


def _enum_of(field: FieldDescriptor) -> EnumDescriptor:
    assert field.enum_type is not None, field.full_name
    return field.enum_type


def _nested_of(field: FieldDescriptor) -> Descriptor:
    assert field.message_type is not None, field.full_name
    return field.message_type


SCALAR_HOSTILE: dict[int, Callable[[FieldDescriptor], SearchStrategy[Any]]] = {
    F.TYPE_STRING: lambda f: hostile_texts(),
    F.TYPE_BYTES: lambda f: hostile_bytes(),
    F.TYPE_BOOL: lambda f: st.booleans(),
    F.TYPE_ENUM: lambda f: hostile_enums(_enum_of(f)),
    F.TYPE_FLOAT: lambda f: hostile_floats(),
    F.TYPE_DOUBLE: lambda f: hostile_doubles(),
    **{kind: (lambda f: boundary_ints(*INT_RANGES[f.type])) for kind in INT_RANGES},
}
SCALAR_PLAUSIBLE: dict[int, Callable[[FieldDescriptor, World], SearchStrategy[Any]]] = {
    F.TYPE_STRING: lambda f, w: plausible_strings(f.name, w),
    F.TYPE_BYTES: lambda f, w: st.binary(max_size=32),
    F.TYPE_BOOL: lambda f, w: st.booleans(),
    F.TYPE_ENUM: lambda f, w: plausible_enums(_enum_of(f)),
    F.TYPE_FLOAT: lambda f, w: st.floats(0, 1, width=32),
    F.TYPE_DOUBLE: lambda f, w: st.floats(0, 1),
    **{kind: (lambda f, w: plausible_ints(f.name, *INT_RANGES[f.type])) for kind in INT_RANGES},
}


def message_class(descriptor: Descriptor) -> type[Message]:
    return message_factory.GetMessageClass(descriptor)


@cached
def messages(descriptor: Descriptor, scope: Scope, depth: int = 0) -> SearchStrategy[Message]:
    if descriptor.full_name in WELL_KNOWN:
        return WELL_KNOWN[descriptor.full_name](scope)
    generic = _generic_messages(descriptor, scope, depth)
    special = PLAUSIBLE_MESSAGES.get(descriptor.full_name)
    return generic if special is None else _mixed(scope, special(scope), generic)


def _generic_messages(descriptor: Descriptor, scope: Scope, depth: int) -> SearchStrategy[Message]:
    setters = [_field_setters(field, scope, depth) for field in descriptor.fields]
    return st.tuples(*setters).map(lambda chosen: _assemble(descriptor, chosen))


def _assemble(descriptor: Descriptor, setters: Sequence[Setter | None]) -> Message:
    message = message_class(descriptor)()
    for setter in setters:
        if setter is not None:
            setter(message)
    return message


def _field_setters(field: FieldDescriptor, scope: Scope, depth: int) -> SearchStrategy[Setter | None]:
    if field.message_type is not None and depth >= MAX_NESTING:
        return st.none()
    if _is_map(field):
        setter = _map_setters(field, scope, depth)
    elif field.is_repeated:
        setter = _repeated_setters(field, scope, depth)
    else:
        setter = mapped(_values(field, scope, depth), lambda value: _setter(field, value))
    present = _presence(field) if scope.hostility < 100 else 70
    return weighted((present, setter), (100 - present, st.none()))


def _presence(field: FieldDescriptor) -> int:
    """Percent of plausible requests that set the field: almost always the plain fields
    (most are required), seldom the optional extras (explicit presence, well-known types)."""
    if field.is_repeated:
        return 100
    optional_scalar = field.message_type is None and field.has_presence
    extra_message = field.message_type is not None and field.message_type.full_name in WELL_KNOWN
    return 30 if optional_scalar or extra_message else 95


def _values(field: FieldDescriptor, scope: Scope, depth: int) -> SearchStrategy[Any]:
    if field.message_type is not None:
        hostile = messages(field.message_type, scope.hostile(), depth + 1)
        if scope.hostility == 100:
            return hostile
        return _mixed(scope, messages(field.message_type, scope, depth + 1), hostile)
    plausible = SCALAR_PLAUSIBLE[field.type](field, scope.world)
    return _mixed(scope, plausible, SCALAR_HOSTILE[field.type](field))


def _setter(field: FieldDescriptor, value: Any) -> Setter:
    if field.message_type is not None:
        return lambda message: getattr(message, field.name).CopyFrom(value)
    return lambda message: setattr(message, field.name, value)


MANY = (64, 65, 500, 501, 1000, 5000)


def _repeated_setters(field: FieldDescriptor, scope: Scope, depth: int) -> SearchStrategy[Setter]:
    element = _values(field, scope, depth)
    few = st.lists(element, min_size=0 if scope.hostility == 100 else 1, max_size=4)
    many = st.tuples(element, st.sampled_from(MANY)).map(lambda pair: [pair[0]] * pair[1])
    return mapped(weighted((8, few), (1, many)), lambda items: _appender(field, items))


def _appender(field: FieldDescriptor, items: list[Any]) -> Setter:
    """Appends the items, but stops once the field passes MAX_REPEATED_BYTES."""

    def append(message: Message) -> None:
        target, added = getattr(message, field.name), 0
        for item in items:
            if field.message_type is not None:
                target.add().CopyFrom(item)
                added += item.ByteSize() + 4
            else:
                target.append(item)
                added += len(item) if isinstance(item, str | bytes) else 10
            if added > MAX_REPEATED_BYTES:
                return

    return append


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def _map_setters(field: FieldDescriptor, scope: Scope, depth: int) -> SearchStrategy[Setter]:
    key_field, value_field = (_nested_of(field).fields_by_name[name] for name in ("key", "value"))
    entries = st.dictionaries(
        _values(key_field, scope, depth), _values(value_field, scope, depth), max_size=4
    )
    return entries.map(lambda chosen: _map_putter(field, value_field, chosen))


def _map_putter(field: FieldDescriptor, value_field: FieldDescriptor, entries: dict[Any, Any]) -> Setter:
    def put(message: Message) -> None:
        target = getattr(message, field.name)
        for key, value in entries.items():
            if value_field.message_type is not None:
                target[key].CopyFrom(value)
            else:
                target[key] = value

    return put


# --- raw bodies: bytes that are not a valid message of the method's type ---------------


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def tag(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def length_delimited(number: int, payload: bytes) -> bytes:
    return tag(number, 2) + varint(len(payload)) + payload


BAD_UTF8 = (
    b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"a\xe2\x82", b"\x80",
)  # fmt: skip
MALFORMED_WIRE = (
    b"\x08", b"\x08" + b"\xff" * 11, b"\x0a\x05ab", b"\x0a" + varint(2**62) + b"x",
    b"\x0a" + varint(2**64 - 1), b"\x0b", b"\x0c", b"\x0e", b"\x0f", b"\x00\x01", b"\x07",
    tag(2**29 - 1, 0) + b"\x01", b"\x8f\xff\xff\xff\xff",
)  # fmt: skip


def _string_fields(descriptor: Descriptor) -> list[int]:
    return [f.number for f in descriptor.fields if f.type == F.TYPE_STRING] or [1]


def invalid_utf8(descriptor: Descriptor) -> SearchStrategy[bytes]:
    """A string field carrying bytes that are not UTF-8 (lone surrogates included)."""
    return st.builds(length_delimited, st.sampled_from(_string_fields(descriptor)), st.sampled_from(BAD_UTF8))


def wrong_wire_types(descriptor: Descriptor) -> SearchStrategy[bytes]:
    numbers = st.sampled_from([f.number for f in descriptor.fields] or [1])
    return st.builds(
        lambda n, wt, tail: tag(n, wt) + tail, numbers, st.integers(0, 7), st.binary(max_size=12)
    )


def struct_bomb(depth: int) -> bytes:
    """A Struct nested `depth` levels on the wire: {"n": {"n": ...}}."""
    body = b""
    for _ in range(depth):
        entry = length_delimited(1, b"n") + length_delimited(2, length_delimited(5, body))
        body = length_delimited(1, entry)
    return body


def nesting_bombs(descriptor: Descriptor) -> SearchStrategy[bytes]:
    """Deep nesting through any message field (a Struct's, when the request has one)."""
    message_fields = [f.number for f in descriptor.fields if f.message_type is not None] or [1]
    return st.builds(
        lambda number, depth: length_delimited(number, struct_bomb(depth)),
        st.sampled_from(message_fields),
        st.sampled_from((101, 200, 1000, 5000)),
    )


def _truncate(body: bytes, fraction: float) -> bytes:
    return body[: int(len(body) * fraction)]


def _flip(body: bytes, position: int, mask: int) -> bytes:
    if not body:
        return bytes([mask])
    i = position % len(body)
    return body[:i] + bytes([body[i] ^ mask]) + body[i + 1 :]


@cached
def raw_bodies(descriptor: Descriptor, scope: Scope) -> SearchStrategy[bytes]:
    typed = mapped(messages(descriptor, scope), lambda m: m.SerializeToString())
    huge_unknown = st.sampled_from((1024, 1024 * 1024, 5 * 1024 * 1024)).map(
        lambda n: length_delimited(2**29 - 1, b"x" * n)
    )
    return weighted(
        (3, st.binary(max_size=256)),
        (2, st.builds(_truncate, typed, st.floats(0, 0.999))),
        (2, st.builds(_flip, typed, st.integers(0, 2**16), st.integers(1, 255))),
        (2, invalid_utf8(descriptor)),
        (2, wrong_wire_types(descriptor)),
        (2, st.sampled_from(MALFORMED_WIRE)),
        (1, nesting_bombs(descriptor)),
        (1, st.builds(bytes.__add__, typed, huge_unknown)),
    )


# --- whole requests ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Request:
    """One generated call: the body as sent, how it was made, and which credential to send
    ("valid", "missing", "unknown" or "malformed"; the runner holds the keys)."""

    body: bytes
    kind: str
    credential: str


@cached
def credentials() -> SearchStrategy[str]:
    return weighted(
        (92, st.just("valid")), (3, st.just("missing")), (3, st.just("unknown")), (2, st.just("malformed"))
    )


@cached
def typed_bodies(descriptor: Descriptor, world: World, hostility: int) -> SearchStrategy[bytes]:
    scope = Scope(world, hostility, mask_paths_of(descriptor))
    return mapped(messages(descriptor, scope), lambda m: m.SerializeToString())


KIND_SHARES = {"plausible": 50, "hostile": 30, "raw": 10, "other-type": 10}  # percent of the requests


def bodies(
    method: MethodDescriptor, world: World, other_types: Sequence[Descriptor], kind: str
) -> SearchStrategy[bytes]:
    """Bodies of one kind: plausible (past validation into the service), hostile (every
    field), raw (not a valid message of the type) or other-type (a message of another
    method's request type)."""
    own = method.input_type
    if kind == "plausible":
        return typed_bodies(own, world, PLAUSIBLE_HOSTILITY)
    if kind == "hostile":
        return typed_bodies(own, world, 100)
    if kind == "raw":
        return raw_bodies(own, Scope(world, 100, mask_paths_of(own)))
    hostilities = (PLAUSIBLE_HOSTILITY, 100)
    return weighted(
        *((1, typed_bodies(d, world, h)) for d in other_types if d is not own for h in hostilities)
    )


def requests(
    method: MethodDescriptor, world: World, other_types: Sequence[Descriptor], kind: str
) -> SearchStrategy[Request]:
    return st.builds(Request, bodies(method, world, other_types, kind), st.just(kind), credentials())


def kind_counts(count: int) -> dict[str, int]:
    """How many of `count` requests are of each kind (Hypothesis picks branches far from
    uniformly, so the split is made here rather than by a weighted choice)."""
    counts = {kind: count * share // 100 for kind, share in KIND_SHARES.items()}
    counts["plausible"] += count - sum(counts.values())
    return counts


# --- drawing ----------------------------------------------------------------------------


def draw_examples(strategy: SearchStrategy[T], count: int, seed_value: int) -> list[T]:
    """`count` examples of the strategy, reproducible from the seed. Hypothesis may stop a
    run early (it found the space exhausted, or examples overran its buffer), so runs with
    derived seeds are added until there are enough."""
    drawn: list[T] = []
    for attempt in range(100):
        _record_examples(strategy, count - len(drawn), seed_value * 1000 + attempt, drawn)
        if len(drawn) >= count:
            return drawn[:count]
    return (drawn * (count // max(1, len(drawn)) + 1))[:count]


def _record_examples(strategy: SearchStrategy[T], count: int, seed_value: int, into: list[T]) -> None:
    @seed(seed_value)
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def record(example: T) -> None:
        into.append(example)

    record()
