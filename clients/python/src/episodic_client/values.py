"""Python values -> protobuf values: enum names, JSON objects and values, datetimes, durations.

Enums accept the generated number (``episode_pb2.ROLE_USER``), a plain ``int``, the full
enum name (``"ROLE_USER"``) or its short form (``"user"``), case-insensitively."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeAlias, TypeVar

from google.protobuf import duration_pb2, struct_pb2, timestamp_pb2

from episodic_client.v1 import episode_pb2, episode_service_pb2, memory_pb2

JsonValue: TypeAlias = "str | float | bool | Mapping[str, JsonValue] | Sequence[JsonValue] | None"
JsonObject: TypeAlias = "Mapping[str, JsonValue]"
RoleLike: TypeAlias = "str | int"
CloseReasonLike: TypeAlias = "str | int"
StateLike: TypeAlias = "str | int"
SearchModeLike: TypeAlias = "str | int"
MemoryStateLike: TypeAlias = "str | int"

V = TypeVar("V", bound=int)


def _names(items: Iterable[tuple[str, V]], prefix: str) -> dict[str, V]:
    """Short lower-case names of an enum's values: ROLE_USER -> "user". The zero value
    (…_UNSPECIFIED) means "not set": the server refuses it, so it is not offered as a name."""
    return {name.removeprefix(prefix).lower(): number for name, number in items if number != 0}


_ROLES = _names(episode_pb2.Role.items(), "ROLE_")
_CLOSE_REASONS = _names(episode_pb2.CloseReason.items(), "CLOSE_REASON_")
_STATES = _names(episode_pb2.Episode.State.items(), "STATE_")
_SEARCH_MODES = _names(episode_service_pb2.SearchMode.items(), "SEARCH_MODE_")
_MEMORY_STATES = _names(memory_pb2.MemoryState.items(), "MEMORY_STATE_")


def _lookup(table: Mapping[str, V], value: str, prefix: str) -> V:
    key = value.strip().upper().removeprefix(prefix).lower()
    if key not in table:
        raise ValueError(f"unknown {prefix.rstrip('_').lower()} {value!r}; expected one of {sorted(table)}")
    return table[key]


def role(value: RoleLike) -> episode_pb2.Role.ValueType:
    if isinstance(value, str):
        return _lookup(_ROLES, value, "ROLE_")
    return episode_pb2.Role.ValueType(value)


def close_reason(value: CloseReasonLike) -> episode_pb2.CloseReason.ValueType:
    if isinstance(value, str):
        return _lookup(_CLOSE_REASONS, value, "CLOSE_REASON_")
    return episode_pb2.CloseReason.ValueType(value)


def episode_state(value: StateLike) -> episode_pb2.Episode.State.ValueType:
    if isinstance(value, str):
        return _lookup(_STATES, value, "STATE_")
    return episode_pb2.Episode.State.ValueType(value)


def search_mode(value: SearchModeLike) -> episode_service_pb2.SearchMode.ValueType:
    if isinstance(value, str):
        return _lookup(_SEARCH_MODES, value, "SEARCH_MODE_")
    return episode_service_pb2.SearchMode.ValueType(value)


def memory_state(value: MemoryStateLike) -> memory_pb2.MemoryState.ValueType:
    if isinstance(value, str):
        return _lookup(_MEMORY_STATES, value, "MEMORY_STATE_")
    return memory_pb2.MemoryState.ValueType(value)


def struct(data: JsonObject | struct_pb2.Struct | None) -> struct_pb2.Struct | None:
    """A JSON object as a Struct; None stays None (the field is left unset)."""
    if data is None or isinstance(data, struct_pb2.Struct):
        return data
    out = struct_pb2.Struct()
    out.update(data)
    return out


def json_value(data: JsonValue) -> struct_pb2.Value:
    """Any JSON value (None is JSON null) as a Value."""
    holder = struct_pb2.Struct()
    holder.update({"v": data})
    return holder.fields["v"]


def timestamp(value: datetime | None) -> timestamp_pb2.Timestamp | None:
    """A datetime as a Timestamp; a naive datetime is read as UTC."""
    if value is None:
        return None
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(value)
    return out


def duration(value: timedelta | None) -> duration_pb2.Duration | None:
    if value is None:
        return None
    out = duration_pb2.Duration()
    out.FromTimedelta(value)
    return out


MAX_EXACT_INT = 2**53  # a JSON number (a double) holds every integer up to this exactly


def integral_numbers(value: Any) -> Any:
    """JSON read back from a protobuf Struct has every number as a float: an integral one
    (within a double's exact range) reads as an int again, at any depth."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_EXACT_INT:
        return int(value)
    if isinstance(value, dict):
        return {k: integral_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integral_numbers(v) for v in value]
    return value
