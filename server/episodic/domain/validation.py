"""Shape rules for requests: ids, sizes, roles and tool payloads. Pure functions that
collect every violation, so a client learns all that is wrong in one round trip."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

from episodic.domain.model import JsonValue, NewMessage, Role
from episodic.domain.recall import SearchMode
from episodic.errors import FieldViolation, InvalidArgument

ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")
ID_RULE = "must be 1-128 characters of letters, digits and . _ : @ -, starting with a letter or digit"


@dataclass(frozen=True, slots=True)
class Limits:
    """Size limits every request is checked against (configurable, see docs/configuration.md)."""

    max_content_bytes: int = 256 * 1024
    max_batch_messages: int = 500
    max_json_bytes: int = 64 * 1024
    max_json_depth: int = 32
    max_tool_calls_per_message: int = 64
    max_text_field_bytes: int = 64 * 1024
    default_page_size: int = 50
    max_page_size: int = 1000
    max_context_tokens: int = 1_000_000  # what BuildContext renders, whatever an agent asks


# An error is sent back in the call's trailers, twice (the status message and the BadRequest
# in grpc-status-details-bin), and gRPC clients refuse trailers past 8-16 KiB with
# RESOURCE_EXHAUSTED, hiding the INVALID_ARGUMENT: 1,000 bad update_mask paths made ~100 KB.
# So at most MAX_LISTED violations are listed, within MAX_LISTED_BYTES of field and
# description in all as the status message sends them (a byte beyond ASCII percent-encoded
# as 3), each cut to its own bound; one more says how many were left out. The trailers then
# stay under ~4.5 KiB whatever the text (the BadRequest travels in a Status that holds the
# message too: three copies in all).
MAX_LISTED = 100
MAX_LISTED_BYTES = 1024
MAX_FIELD_BYTES = 160  # as sent, like MAX_LISTED_BYTES
MAX_DESCRIPTION_BYTES = 480


class Violations:
    """Collects field violations; `raise_if_any` turns them into one InvalidArgument."""

    def __init__(self) -> None:
        self.items: list[FieldViolation] = []  # those listed
        self.unlisted = 0  # beyond MAX_LISTED or MAX_LISTED_BYTES: counted, not kept
        self._listed_bytes = 0

    def add(self, field: str, description: str) -> None:
        field, description = _cut(field, MAX_FIELD_BYTES), _cut(description, MAX_DESCRIPTION_BYTES)
        size = _sent_size(field) + _sent_size(description)
        full = len(self.items) >= MAX_LISTED or self._listed_bytes + size > MAX_LISTED_BYTES
        if self.items and full:  # the first is always listed: cut, it fits the budget
            self.unlisted += 1
            return
        self.items.append(FieldViolation(field, description))
        self._listed_bytes += size

    def raise_if_any(self, subject: str = "request") -> None:
        if not self.items:
            return
        listed = list(self.items)
        if self.unlisted:
            listed.append(FieldViolation(subject, f"and {self.unlisted} more violations, not listed"))
        raise InvalidArgument(listed, subject=subject)


def _cut(text: str, max_sent: int) -> str:
    """`text`, or as much of it as `max_sent` bytes send, and "..."."""
    if _sent_size(text) <= max_sent:
        return text
    if text.isascii():
        return text[: max_sent - 3] + "..."
    head = text.encode("utf-8", "surrogatepass")[: max_sent // 3 - 1]
    return head.decode("utf-8", "ignore") + "..."  # a character cut in two, or a lone surrogate, goes


def _sent_size(text: str) -> int:
    return len(text) if text.isascii() else 3 * len(text.encode("utf-8", "surrogatepass"))


def check_id(v: Violations, field: str, value: str, *, required: bool = True) -> None:
    if not value:
        if required:
            v.add(field, "is required")
        return
    if not ID_PATTERN.fullmatch(value):
        v.add(field, ID_RULE)


NUL_RULE = "contains a NUL character (U+0000), which cannot be stored"
SURROGATE_RULE = "contains a lone surrogate (U+D800-U+DFFF), which is not valid Unicode text"
TIME_RULE = "is out of range: it must fall within years 1-9999 in UTC"


def text_problem(value: str) -> str:
    """Why `value` cannot be stored as text ("" when it can): the one check of every text.
    Lone surrogates reach us through JSON escapes ("\\ud800": MCP, tool arguments); protobuf
    refuses them on the wire. They are the only code points strict UTF-8 cannot encode, so
    the encoder finds them: ~100x faster than a regex scan (a 4 MB batch held the event loop
    ~90 ms), and an ASCII string (a flag CPython keeps) cannot hold one at all."""
    return _problem_and_size(value)[0]


def check_text(v: Violations, field: str, value: str, max_bytes: int) -> None:
    problem, size = _problem_and_size(value)
    if problem:
        v.add(field, problem)
    if size > max_bytes:
        v.add(field, f"is {size} bytes, over the limit of {max_bytes}")


def _problem_and_size(value: str) -> tuple[str, int]:
    """`text_problem`, and the text's size in UTF-8 (a lone surrogate as 3 bytes), encoding
    it at most once when it can be stored: an ASCII string's size is its length."""
    problem = ""
    if value.isascii():
        size = len(value)
    else:
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError:
            size, problem = len(value.encode("utf-8", "surrogatepass")), SURROGATE_RULE
    return (NUL_RULE if "\x00" in value else problem), size


def check_json(v: Violations, field: str, value: JsonValue, limits: Limits) -> None:
    """JSON payloads must be finite, shallow enough and small enough to store and render."""
    problem = _json_problem(value, limits.max_json_depth)
    if problem:
        v.add(field, problem)
        return
    size = len(json.dumps(value, ensure_ascii=False).encode())
    if size > limits.max_json_bytes:
        v.add(field, f"is {size} bytes as JSON, over the limit of {limits.max_json_bytes}")


def check_time(v: Violations, field: str, value: datetime | None) -> None:
    """A time with an offset may leave datetime's range once moved to UTC (as it is stored)."""
    if value is None or value.tzinfo is None:
        return
    try:
        value.astimezone(UTC)
    except OverflowError:
        v.add(field, TIME_RULE)


def json_problem(value: object, max_depth: int = Limits().max_json_depth) -> str:
    """Why a JSON value cannot be stored ("" when it can): NaN, Infinity, too deep, bad text."""
    return _json_problem(cast(JsonValue, value), max_depth)


def _json_problem(value: JsonValue, max_depth: int) -> str:
    """Walked with a stack, not recursion: the nesting is the client's to choose."""
    stack: list[tuple[JsonValue, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            return "is nested too deeply"
        if isinstance(item, float) and not math.isfinite(item):
            return "is not valid JSON: contains NaN or Infinity"
        if isinstance(item, str) and (problem := text_problem(item)):
            return problem
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in [*item.keys(), *item.values()])
        elif isinstance(item, list | tuple):
            stack.extend((child, depth + 1) for child in item)
    return ""


def resolve_page_size(v: Violations, field: str, requested: int, limits: Limits) -> int:
    """0 means the default; larger than the maximum is read as the maximum (AIP-158)."""
    if requested < 0:
        v.add(field, "must not be negative")
        return limits.default_page_size
    if requested == 0:
        return limits.default_page_size
    return min(requested, limits.max_page_size)


def check_new_message(v: Violations, prefix: str, msg: NewMessage, limits: Limits) -> None:
    check_text(v, f"{prefix}.content", msg.content, limits.max_content_bytes)
    check_id(v, f"{prefix}.client_message_id", msg.client_message_id or "", required=False)
    check_json(v, f"{prefix}.metadata", msg.metadata, limits)
    _check_tool_calls(v, prefix, msg, limits)
    _check_tool_result(v, prefix, msg, limits)
    if not msg.content and not msg.tool_calls and msg.tool_result is None:
        v.add(f"{prefix}.content", "is required unless the message carries tool_calls or tool_result")


def _check_tool_calls(v: Violations, prefix: str, msg: NewMessage, limits: Limits) -> None:
    if msg.tool_calls and msg.role is not Role.ASSISTANT:
        v.add(f"{prefix}.tool_calls", "are only allowed on ROLE_ASSISTANT messages")
    if len(msg.tool_calls) > limits.max_tool_calls_per_message:
        v.add(f"{prefix}.tool_calls", f"has more than {limits.max_tool_calls_per_message} entries")
    seen: set[str] = set()
    for i, call in enumerate(msg.tool_calls):
        field = f"{prefix}.tool_calls[{i}]"
        check_id(v, f"{field}.tool_call_id", call.tool_call_id)
        check_id(v, f"{field}.tool_name", call.tool_name)
        check_json(v, f"{field}.input", call.input, limits)
        if call.tool_call_id in seen:
            v.add(f"{field}.tool_call_id", "is repeated within the message")
        seen.add(call.tool_call_id)


def _check_tool_result(v: Violations, prefix: str, msg: NewMessage, limits: Limits) -> None:
    result = msg.tool_result
    if msg.role is Role.TOOL and result is None:
        v.add(f"{prefix}.tool_result", "is required on ROLE_TOOL messages")
    if result is None:
        return
    field = f"{prefix}.tool_result"
    if msg.role is not Role.TOOL:
        v.add(field, "is only allowed on ROLE_TOOL messages")
    check_id(v, f"{field}.tool_call_id", result.tool_call_id)
    check_json(v, f"{field}.output", result.output, limits)
    check_text(v, f"{field}.error", result.error, limits.max_text_field_bytes)
    if result.duration is not None and result.duration.total_seconds() < 0:
        v.add(f"{field}.duration", "must not be negative")


def check_batch(v: Violations, field: str, messages: Sequence[NewMessage], limits: Limits) -> None:
    if not messages:
        v.add(field, "must contain at least one message")
    if len(messages) > limits.max_batch_messages:
        v.add(field, f"has {len(messages)} messages, over the limit of {limits.max_batch_messages}")
        return
    for i, msg in enumerate(messages):
        check_new_message(v, f"{field}[{i}]", msg, limits)


SEARCH_DEFAULT_TOP_K = 5
SEARCH_MAX_TOP_K = 100


def check_search(v: Violations, mode: SearchMode | None, query: str, top_k: int) -> int:
    """What every search request (episodes, memories, knowledge) shares: a mode, a query
    unless the search is by recency, and top_k (0: the default). Returns top_k."""
    if mode is None:
        v.add("mode", "is required: SEARCH_MODE_RECENCY, SEARCH_MODE_SEMANTIC or SEARCH_MODE_HYBRID")
    elif mode is not SearchMode.RECENCY and not query.strip():
        v.add("query", f"is required in {mode.value} mode")
    if top_k == 0:
        return SEARCH_DEFAULT_TOP_K
    if not 1 <= top_k <= SEARCH_MAX_TOP_K:
        v.add("top_k", f"must be between 1 and {SEARCH_MAX_TOP_K}, got {top_k}")
    return top_k
