"""Tool and session JSON reaches the server through protobuf Struct/Value, where every number
is a double: what is rendered as text shows 16, not 16.0, and keeps fractions and huge values."""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf import struct_pb2

from episodic.domain.json_text import integral, json_text
from episodic.domain.known_facts import facts_block
from episodic.domain.log import countable_text
from episodic.domain.model import JsonObject, Message, NewMessage, Role, ToolCall, ToolResult
from episodic.domain.reducers import from_log
from episodic.edges.grpc.convert import struct_in, value_in

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def struct(value: JsonObject) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(value)
    return s


def through_protobuf(value: JsonObject) -> JsonObject:
    return struct_in(struct(value), "input")


def test_integers_that_came_through_a_struct_render_as_integers() -> None:
    arrived = through_protobuf({"days": 16, "nested": {"ids": [1, 2, 3]}, "ratio": 0.5})
    assert arrived["days"] == 16.0 and isinstance(arrived["days"], float)  # what protobuf hands over
    assert json_text(arrived, sort_keys=True) == '{"days": 16, "nested": {"ids": [1, 2, 3]}, "ratio": 0.5}'


def test_fractions_huge_values_and_non_numbers_are_left_as_they_are() -> None:
    huge = 2.0**60
    assert integral([1.5, -2.0, huge, 2.0**53, True, None, "16.0"]) == [
        1.5,
        -2,
        huge,
        2**53,
        True,
        None,
        "16.0",
    ]
    assert json_text(huge) == "1.152921504606847e+18"


def test_a_tool_result_without_text_renders_its_output_with_integers() -> None:
    output = value_in(struct_pb2.Value(struct_value=struct({"celsius": 21, "rain": 0.25})), "output")
    message = Message("ep", 3, Role.TOOL, "", 10, "", NOW, tool_result=ToolResult("c1", output, True))
    content = from_log(message).content
    assert '"celsius": 21' in content and '"rain": 0.25' in content and "21.0" not in content


def test_the_text_a_message_is_counted_by_shows_integers_as_rendered() -> None:
    call = ToolCall("c1", "weather", through_protobuf({"days": 16}))
    assert countable_text(NewMessage(Role.ASSISTANT, "", tool_calls=(call,))) == 'weather({"days": 16})'


def test_session_data_values_render_integers_as_integers() -> None:
    session = [("guests", value_in(struct_pb2.Value(number_value=4), "v")), ("budget", {"max": 250.0})]
    message, _, keys = facts_block([], session, 500, lambda text: len(text.split()))
    assert message is not None and keys == ("guests", "budget")
    assert "- guests: 4\n" in message.content and '- budget: {"max": 250}' in message.content
