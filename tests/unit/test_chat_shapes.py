"""Rendered context in the chat shapes of OpenAI, Anthropic and Gemini: context becomes
system text, tool calls and results keep their ids and arguments, turns alternate."""

from __future__ import annotations

import json

import pytest
from google.protobuf import struct_pb2

from episodic_client import to_chat_messages
from episodic_client.v1 import context_pb2, episode_pb2

R = episode_pb2


def message(index: int, role: int, content: str = "", **fields: object) -> context_pb2.ContextMessage:
    return context_pb2.ContextMessage(index=index, role=role, content=content, **fields)  # type: ignore[arg-type]


def rendered() -> list[context_pb2.ContextMessage]:
    args = struct_pb2.Struct()
    args.update({"city": "Zürich", "days": 2})
    call = episode_pb2.ToolCall(tool_call_id="call_1", tool_name="weather", input=args)
    return [
        message(0, R.ROLE_SYSTEM, "You are helpful."),
        message(1, R.ROLE_CONTEXT, "[Known Facts]\n- Alice is vegetarian"),
        message(2, R.ROLE_USER, "Weather in Zürich?"),
        message(3, R.ROLE_ASSISTANT, "", tool_calls=[call]),
        message(4, R.ROLE_TOOL, '{"temp": 3}', tool_call_id="call_1"),
        message(5, R.ROLE_USER, "And tomorrow?"),
    ]


def test_openai_keeps_context_inline_as_system_and_tool_calls_with_json_arguments() -> None:
    prompt = to_chat_messages(rendered(), "openai")
    assert prompt.system == ""
    assert [m["role"] for m in prompt.messages] == ["system", "system", "user", "assistant", "tool", "user"]
    call = prompt.messages[3]["tool_calls"][0]
    assert call["id"] == "call_1" and call["function"]["name"] == "weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Zürich", "days": 2}
    assert "Zürich" in call["function"]["arguments"]  # not escaped
    assert prompt.messages[3]["content"] is None
    assert prompt.messages[4] == {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 3}'}


def test_anthropic_joins_instructions_into_system_and_tool_results_go_in_user_turns() -> None:
    prompt = to_chat_messages(rendered(), "anthropic")
    assert prompt.system == "You are helpful.\n\n[Known Facts]\n- Alice is vegetarian"
    assert [m["role"] for m in prompt.messages] == ["user", "assistant", "user"]
    assert prompt.messages[1]["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Zürich", "days": 2.0}}
    ]
    result, text = prompt.messages[2]["content"]  # the tool result and the next question, one turn
    assert result == {"type": "tool_result", "tool_use_id": "call_1", "content": '{"temp": 3}'}
    assert text == {"type": "text", "text": "And tomorrow?"}


def test_gemini_names_a_function_response_after_its_call() -> None:
    prompt = to_chat_messages(rendered(), "gemini")
    assert [m["role"] for m in prompt.messages] == ["user", "model", "user"]
    assert prompt.messages[1]["parts"] == [
        {"function_call": {"name": "weather", "args": {"city": "Zürich", "days": 2.0}}}
    ]
    response = prompt.messages[2]["parts"][0]["function_response"]
    assert response == {"name": "weather", "response": {"content": '{"temp": 3}'}}


def test_what_no_shape_can_carry_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="message 0 has role 0"):
        to_chat_messages([message(0, R.ROLE_UNSPECIFIED, "?")])
    with pytest.raises(ValueError, match="join the frames"):
        to_chat_messages([message(0, R.ROLE_USER, "par", content_continues=True)])
    with pytest.raises(ValueError, match="call_9"):
        to_chat_messages([message(0, R.ROLE_TOOL, "x", tool_call_id="call_9")], "gemini")
    with pytest.raises(ValueError, match="unknown chat shape"):
        to_chat_messages([], "cohere")  # type: ignore[arg-type]
