"""Shape rules: every violation is collected and names its field."""

from __future__ import annotations

import pytest

from episodic.domain.model import NewMessage, Role, ToolCall, ToolResult
from episodic.domain.validation import (
    Limits,
    Violations,
    check_batch,
    check_id,
    check_new_message,
    resolve_page_size,
)
from episodic.errors import InvalidArgument

LIMITS = Limits(max_content_bytes=100, max_batch_messages=3, max_json_depth=4)


def violations_of(msg: NewMessage) -> dict[str, str]:
    v = Violations()
    check_new_message(v, "message", msg, LIMITS)
    return {x.field: x.description for x in v.items}


@pytest.mark.parametrize("value", ["a", "ep_123", "user@example.com", "A.b:c-d_e", "x" * 128])
def test_ids_of_the_documented_shape_are_accepted(value: str) -> None:
    v = Violations()
    check_id(v, "id", value)
    assert v.items == []


@pytest.mark.parametrize("value", ["", " ", "-lead", "has space", "x" * 129, "émile", "a/b", "a\nb"])
def test_malformed_ids_are_rejected(value: str) -> None:
    v = Violations()
    check_id(v, "id", value)
    assert [x.field for x in v.items] == ["id"]


def test_empty_content_without_tool_payload_is_rejected() -> None:
    assert "message.content" in violations_of(NewMessage(Role.USER, ""))


def test_content_over_the_byte_limit_is_rejected_counting_utf8_bytes() -> None:
    assert "message.content" in violations_of(NewMessage(Role.USER, "é" * 51))
    assert violations_of(NewMessage(Role.USER, "é" * 50)) == {}


def test_tool_calls_are_only_for_assistant_messages() -> None:
    msg = NewMessage(Role.USER, "x", tool_calls=(ToolCall("c1", "t"),))
    assert "message.tool_calls" in violations_of(msg)


def test_a_tool_message_needs_a_result_and_only_tool_messages_may_have_one() -> None:
    assert "message.tool_result" in violations_of(NewMessage(Role.TOOL, "x"))
    assert "message.tool_result" in violations_of(NewMessage(Role.USER, "x", tool_result=ToolResult("c1")))


def test_non_finite_and_too_deep_json_is_rejected() -> None:
    nan = NewMessage(Role.ASSISTANT, "", tool_calls=(ToolCall("c1", "t", {"x": float("nan")}),))
    assert "not valid JSON" in violations_of(nan)["message.tool_calls[0].input"]
    deep: dict[str, object] = {}
    node = deep
    for _ in range(10):
        node["k"] = {}
        node = node["k"]  # type: ignore[assignment]
    msg = NewMessage(Role.USER, "x", metadata=deep)  # type: ignore[arg-type]
    assert "nested too deeply" in violations_of(msg)["message.metadata"]


def test_repeated_tool_call_ids_in_one_message_are_rejected() -> None:
    msg = NewMessage(Role.ASSISTANT, "", tool_calls=(ToolCall("c1", "t"), ToolCall("c1", "t")))
    assert "message.tool_calls[1].tool_call_id" in violations_of(msg)


def test_a_batch_names_the_index_of_each_bad_message() -> None:
    v = Violations()
    check_batch(v, "messages", [NewMessage(Role.USER, "ok"), NewMessage(Role.USER, "")], LIMITS)
    assert [x.field for x in v.items] == ["messages[1].content"]


def test_empty_and_oversized_batches_are_rejected() -> None:
    for batch in ([], [NewMessage(Role.USER, "x")] * 4):
        v = Violations()
        check_batch(v, "messages", batch, LIMITS)
        assert [x.field for x in v.items] == ["messages"]


@pytest.mark.parametrize(("requested", "expected"), [(0, 50), (10, 10), (5000, 1000), (2**31 - 1, 1000)])
def test_page_sizes_default_and_cap(requested: int, expected: int) -> None:
    v = Violations()
    assert resolve_page_size(v, "page_size", requested, Limits()) == expected and not v.items


def test_a_negative_page_size_is_rejected() -> None:
    v = Violations()
    resolve_page_size(v, "page_size", -1, Limits())
    with pytest.raises(InvalidArgument) as err:
        v.raise_if_any()
    assert err.value.violations[0].field == "page_size"
