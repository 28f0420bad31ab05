"""Rendered context (BuildContext's messages) in the chat shapes of model APIs: OpenAI's Chat
Completions, Anthropic's Messages and Gemini's contents. Every framework adapter uses these.

- `ROLE_SYSTEM` and `ROLE_CONTEXT` (recalled conversations, known facts, knowledge) are
  instructions to the model, not turns: OpenAI gets them as `system` messages where they were
  rendered; Anthropic and Gemini take one system text, so they are joined into it, in order.
- An assistant message's tool calls become OpenAI `tool_calls`, Anthropic `tool_use` blocks
  and Gemini `function_call` parts; a tool message answers its call as a `tool` message, a
  `tool_result` block (in a user turn) or a `function_response` part (named after its call).
- Anthropic and Gemini want turns to alternate: consecutive turns of one side are merged.

A message these shapes cannot carry is refused with a ValueError naming it, never dropped."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from google.protobuf import json_format

from episodic_client.v1 import context_pb2, episode_pb2
from episodic_client.values import integral_numbers

Shape = Literal["openai", "anthropic", "gemini"]
Chat = dict[str, Any]

_INSTRUCTIONS = (episode_pb2.ROLE_SYSTEM, episode_pb2.ROLE_CONTEXT)
_CARRIED = (*_INSTRUCTIONS, episode_pb2.ROLE_USER, episode_pb2.ROLE_ASSISTANT, episode_pb2.ROLE_TOOL)


@dataclass(frozen=True, slots=True)
class ChatPrompt:
    """`messages` in the API's shape; `system` is the system text for APIs that take it apart
    (Anthropic's `system`, Gemini's `system_instruction`), "" for OpenAI (inline)."""

    system: str
    messages: list[Chat] = field(default_factory=list)


def to_chat_messages(messages: Iterable[context_pb2.ContextMessage], shape: Shape = "openai") -> ChatPrompt:
    """The rendered context as `shape`'s chat messages (see the module's notes)."""
    rendered = list(messages)
    for m in rendered:
        if m.content_continues:
            raise ValueError(f"message {m.index} is a part of a streamed message: join the frames first")
        if m.role not in (
            *_INSTRUCTIONS,
            episode_pb2.ROLE_USER,
            episode_pb2.ROLE_ASSISTANT,
            episode_pb2.ROLE_TOOL,
        ):
            raise ValueError(f"message {m.index} has role {m.role}, which no chat shape carries")
    if shape == "openai":
        return ChatPrompt("", [_openai(m) for m in rendered])
    if shape == "anthropic":
        return ChatPrompt(_system(rendered), _merged([_anthropic(m) for m in _turns(rendered)], "content"))
    if shape == "gemini":
        names = {c.tool_call_id: c.tool_name for m in rendered for c in m.tool_calls}
        turns = [_gemini(m, names) for m in _turns(rendered)]
        return ChatPrompt(_system(rendered), _merged(turns, "parts"))
    raise ValueError(f"unknown chat shape {shape!r}; expected 'openai', 'anthropic' or 'gemini'")


def _system(messages: Sequence[context_pb2.ContextMessage]) -> str:
    return "\n\n".join(m.content for m in messages if m.role in _INSTRUCTIONS and m.content)


def _turns(messages: Sequence[context_pb2.ContextMessage]) -> list[context_pb2.ContextMessage]:
    return [m for m in messages if m.role not in _INSTRUCTIONS]


def _arguments(call: episode_pb2.ToolCall) -> dict[str, Any]:
    return integral_numbers(json_format.MessageToDict(call.input)) if call.HasField("input") else {}


def _openai(m: context_pb2.ContextMessage) -> Chat:
    if m.role in _INSTRUCTIONS:
        return {"role": "system", "content": m.content}
    if m.role == episode_pb2.ROLE_USER:
        return {"role": "user", "content": m.content}
    if m.role == episode_pb2.ROLE_TOOL:
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    out: Chat = {"role": "assistant", "content": m.content or None}
    if m.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.tool_call_id,
                "type": "function",
                "function": {"name": c.tool_name, "arguments": json.dumps(_arguments(c), ensure_ascii=False)},
            }
            for c in m.tool_calls
        ]
    return out


def _anthropic(m: context_pb2.ContextMessage) -> Chat:
    if m.role == episode_pb2.ROLE_TOOL:
        block = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
        return {"role": "user", "content": [block]}
    blocks: list[Chat] = [{"type": "text", "text": m.content}] if m.content else []
    blocks += [
        {"type": "tool_use", "id": c.tool_call_id, "name": c.tool_name, "input": _arguments(c)}
        for c in m.tool_calls
    ]
    return {"role": "assistant" if m.role == episode_pb2.ROLE_ASSISTANT else "user", "content": blocks}


def _gemini(m: context_pb2.ContextMessage, names: dict[str, str]) -> Chat:
    if m.role == episode_pb2.ROLE_TOOL:
        if m.tool_call_id not in names:
            raise ValueError(f"message {m.index} answers tool call {m.tool_call_id!r}, which is not rendered")
        response = {"name": names[m.tool_call_id], "response": {"content": m.content}}
        return {"role": "user", "parts": [{"function_response": response}]}
    parts: list[Chat] = [{"text": m.content}] if m.content else []
    parts += [{"function_call": {"name": c.tool_name, "args": _arguments(c)}} for c in m.tool_calls]
    return {"role": "model" if m.role == episode_pb2.ROLE_ASSISTANT else "user", "parts": parts}


def _merged(turns: Sequence[Chat], key: str) -> list[Chat]:
    """Consecutive turns of one role as one turn (their blocks or parts in order)."""
    out: list[Chat] = []
    for turn in turns:
        if out and out[-1]["role"] == turn["role"]:
            out[-1][key] = [*out[-1][key], *turn[key]]
        else:
            out.append({"role": turn["role"], key: list(turn[key])})
    return out
