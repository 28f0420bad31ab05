"""LangChain's chat message history over one Episodic episode (`pip install
"episodic-client[langchain]"`): `EpisodicChatMessageHistory` is a `langchain-core`
`BaseChatMessageHistory`, so `RunnableWithMessageHistory` and every chain that takes one keep
their conversation in Episodic's durable log.

What maps to what:
- the history is one episode of (agent, user); `HumanMessage` is a user message,
  `AIMessage` an assistant message with its `tool_calls` as tool-call records, `ToolMessage` a
  tool message whose result answers its `tool_call_id` (status "error": not succeeded),
  `SystemMessage` a system message; a context message of the log reads as a `SystemMessage`;
- a message's `id`, when it is a valid Episodic id, is its `client_message_id`, so a retried
  `add_messages` appends nothing twice; read back, a message's id is that id, else its seq;
- `clear()` cannot delete from an append-only log: it closes the episode (its digest makes it
  recallable, the inspector and audit keep it) and opens a new one; the history then reads
  empty. It waits for the digest (at most the client's timeout, 30 s on the server), so the
  user's next conversation recalls this one at once; `wait_for_digest=False` returns at the
  close. Erasing a user is `EpisodicClient.erase_user`.

Limits: content is text; a multi-part content's text parts are joined, and any other part
(image, audio, file) is refused with a ValueError naming it, never dropped. Tool-call
arguments are JSON objects (protobuf Struct): numbers read back as JSON numbers (an integral
value as an int)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from google.protobuf import json_format
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from episodic_client.requests import message_input, tool_call, tool_result
from episodic_client.sync_client import EpisodicClient
from episodic_client.v1 import episode_pb2
from episodic_client.values import integral_numbers

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")  # the server's rule for ids


class EpisodicChatMessageHistory(BaseChatMessageHistory):
    """The chat history of (agent_id, user_id) in one episode: `episode_id` names an existing
    or a new one (empty: the server picks an id). `wait_for_digest`: `clear()` returns once the
    closed episode's digest is made (READY or FAILED), so the next conversation recalls it."""

    def __init__(
        self,
        client: EpisodicClient,
        agent_id: str,
        user_id: str,
        *,
        episode_id: str = "",
        wait_for_digest: bool = True,
    ) -> None:
        self.wait_for_digest = wait_for_digest
        self._client = client
        self._agent_id = agent_id
        self._user_id = user_id
        self.episode_id = client.open_episode(agent_id, user_id, episode_id=episode_id).episode.episode_id

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]  # a property, as documented
        log = list(self._client.iter_messages(self.episode_id))
        log.reverse()  # the log pages newest first
        return [to_langchain(m) for m in log]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Appends them in one call (all or none), after checking every one."""
        inputs = [to_episodic(i, m) for i, m in enumerate(messages)]
        if inputs:
            self._client.add_messages(self.episode_id, inputs)

    def clear(self) -> None:
        """Closes this episode (waiting for its digest, unless `wait_for_digest` is False) and
        opens a new one: the log keeps what was said."""
        self._client.close_episode(self.episode_id, wait_for_digest=self.wait_for_digest)
        self.episode_id = self._client.open_episode(self._agent_id, self._user_id).episode.episode_id


def to_episodic(index: int, message: BaseMessage) -> episode_pb2.MessageInput:
    """One LangChain message as a message to append; `index` names it in errors."""
    text = _text(index, message)
    given = message.id if isinstance(message.id, str) and _ID.fullmatch(message.id) else ""
    if isinstance(message, HumanMessage):
        return message_input("user", text, client_message_id=given)
    if isinstance(message, SystemMessage):
        return message_input("system", text, client_message_id=given)
    if isinstance(message, AIMessage):
        if message.invalid_tool_calls:
            raise ValueError(f"message {index}: invalid tool calls cannot be stored (no JSON arguments)")
        calls = [tool_call(c["id"] or "", c["name"], c["args"]) for c in message.tool_calls]
        return message_input("assistant", text, client_message_id=given, tool_calls=calls)
    if isinstance(message, ToolMessage):
        result = tool_result(message.tool_call_id, succeeded=message.status != "error")
        return message_input("tool", text, client_message_id=given, tool_result=result)
    raise ValueError(f"message {index}: {type(message).__name__} is not supported (human, ai, tool, system)")


def to_langchain(message: episode_pb2.Message) -> BaseMessage:
    """One logged message as LangChain's."""
    given = message.client_message_id or str(message.seq)
    if message.role == episode_pb2.ROLE_USER:
        return HumanMessage(message.content, id=given)
    if message.role == episode_pb2.ROLE_ASSISTANT:
        calls = [
            {"name": c.tool_name, "args": _json_object(c), "id": c.tool_call_id, "type": "tool_call"}
            for c in message.tool_calls
        ]
        return AIMessage(message.content, id=given, tool_calls=calls)
    if message.role == episode_pb2.ROLE_TOOL:
        status = "success" if message.tool_result.succeeded else "error"
        return ToolMessage(
            message.content, id=given, tool_call_id=message.tool_result.tool_call_id, status=status
        )
    return SystemMessage(message.content, id=given)  # system, and the log's context messages


def _text(index: int, message: BaseMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    parts: list[str] = []
    for part in message.content:
        if isinstance(part, str):
            parts.append(part)
        elif part.get("type") == "text" and isinstance(part.get("text"), str):
            parts.append(part["text"])
        else:
            raise ValueError(
                f"message {index}: a content part of type {part.get('type')!r} is not supported (text only)"
            )
    return "".join(parts)


def _json_object(call: episode_pb2.ToolCall) -> dict[str, Any]:
    if not call.HasField("input"):
        return {}
    return {key: integral_numbers(value) for key, value in json_format.MessageToDict(call.input).items()}
