"""JSON as text for the model or an operator to read. JSON arrives through protobuf's
Struct and Value, whose only number is a double, so a client's 16 is stored as 16.0; shown
as text it reads 16 again. Non-integral numbers keep their fraction, and numbers beyond
2**53 (where a double no longer holds every integer) are shown as the doubles they are."""

from __future__ import annotations

import json
from collections.abc import Mapping

from episodic.domain.model import JsonValue

_EXACT = 2**53


def integral(value: JsonValue) -> JsonValue:
    """`value` with each integral double (16.0) as an int (16), at any depth."""
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) <= _EXACT else value
    if isinstance(value, Mapping):
        return {key: integral(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [integral(item) for item in value]
    return value


def json_text(value: JsonValue, *, sort_keys: bool = False) -> str:
    """Compact enough for a prompt, readable (no \\u escapes), integers as integers."""
    return json.dumps(integral(value), ensure_ascii=False, sort_keys=sort_keys)


def nested_deeper_than(text: str, limit: int) -> bool:
    """Whether JSON text opens more than `limit` arrays or objects at once, found by one scan
    and no recursion, so it can run before `json.loads` (which recurses, and raises
    RecursionError on a few thousand levels). Brackets inside strings do not count."""
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False
