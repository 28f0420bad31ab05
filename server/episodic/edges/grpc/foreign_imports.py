"""Other systems' exports, loaded through the public API (`episodic import --from ...`).

- `openai-chat`: OpenAI chat-completions transcripts, one JSON object per line with a
  "messages" list (the fine-tuning / stored-completions shape): each line becomes a closed
  episode of the agent and user given; roles system, user, assistant (with tool_calls) and
  tool (answering a tool_call_id) are kept; "create_time" / "created" (epoch seconds) on the
  line dates the episode. Content given as parts keeps its text parts; other parts are
  refused by name.
- `mem0`: a mem0 export, the JSON that `Memory.get_all()` returns ({"results": [...]}) or a
  list of its items: each item ("id", "memory", "user_id", "created_at", "metadata") becomes
  a long-term memory (kind fact) under id "mem0-<id>", its metadata kept.

Ids are derived from the file's content and position (episodes, messages) or the source's
ids (memories), so running an import again adds nothing twice.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import struct_pb2, timestamp_pb2

from episodic.v1 import episode_pb2, memory_pb2, memory_service_pb2
from episodic.v1 import episode_service_pb2 as pb
from episodic.v1.episode_service_pb2_grpc import EpisodeServiceStub
from episodic.v1.memory_service_pb2_grpc import MemoryServiceStub

Auth = tuple[tuple[str, str], ...]
ROLES = {
    "system": episode_pb2.ROLE_SYSTEM,
    "developer": episode_pb2.ROLE_SYSTEM,
    "user": episode_pb2.ROLE_USER,
    "assistant": episode_pb2.ROLE_ASSISTANT,
    "tool": episode_pb2.ROLE_TOOL,
}
BATCH = 100  # the server's CreateMemories limit; AddMessages takes up to 500


def import_foreign(
    channel: grpc.Channel, auth: Auth, source: str, path: Path, agent_id: str, user_id: str
) -> str:
    if not agent_id:
        raise ValueError(f"--from {source} needs --agent (the agent to import into)")
    if source == "openai-chat":
        if not user_id:
            raise ValueError("--from openai-chat needs --user (the transcripts name no user)")
        return _openai_chat(EpisodeServiceStub(channel), auth, path, agent_id, user_id)
    return _mem0(MemoryServiceStub(channel), auth, path, agent_id, user_id)


# --- OpenAI chat transcripts ----------------------------------------------------------------


def _openai_chat(stub: EpisodeServiceStub, auth: Auth, path: Path, agent_id: str, user_id: str) -> str:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    episodes = messages = again = 0
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            record = _object(line, number)
            inputs = list(chat_messages(record, number))
            episode_id = f"oa-{digest}-{number}"
            if _closed(stub, auth, episode_id):
                again += 1  # imported before (an open one was interrupted: it is completed)
                continue
            opened = pb.OpenEpisodeRequest(
                agent_id=agent_id, user_id=user_id, episode_id=episode_id, start_time=_started(record)
            )
            stub.OpenEpisode(opened, metadata=auth)
            for start in range(0, len(inputs), 500):
                stub.AddMessages(
                    pb.AddMessagesRequest(episode_id=episode_id, messages=inputs[start : start + 500]),
                    metadata=auth,
                )
            stub.CloseEpisode(pb.CloseEpisodeRequest(episode_id=episode_id), metadata=auth)
            episodes += 1
            messages += len(inputs)
    return f"imported {episodes} conversations ({again} already there), {messages} messages"


def _closed(stub: EpisodeServiceStub, auth: Auth, episode_id: str) -> bool:
    try:
        found = stub.GetEpisode(pb.GetEpisodeRequest(episode_id=episode_id), metadata=auth)
    except grpc.RpcError as exc:
        if isinstance(exc, grpc.Call) and exc.code() == grpc.StatusCode.NOT_FOUND:
            return False
        raise
    return found.episode.state == episode_pb2.Episode.STATE_CLOSED


def _object(line: str, number: int) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise ValueError(f"line {number} is not JSON: {exc}") from exc
    if not isinstance(record, dict) or not isinstance(record.get("messages"), list):
        raise ValueError(f'line {number}: expected an object with a "messages" list')
    return record


def _started(record: dict[str, Any]) -> timestamp_pb2.Timestamp | None:
    seconds = record.get("create_time", record.get("created"))
    if not isinstance(seconds, (int, float)):
        return None
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(datetime.fromtimestamp(seconds, UTC))
    return stamp


def chat_messages(record: dict[str, Any], number: int) -> Iterator[episode_pb2.MessageInput]:
    for index, message in enumerate(record["messages"]):
        where = f"line {number} message {index}"
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise ValueError(f"{where}: role must be one of {', '.join(ROLES)}")
        role = message["role"]
        text = _text(message.get("content"), where)
        out = episode_pb2.MessageInput(
            role=ROLES[role], content=text, client_message_id=f"l{number}-m{index}"
        )
        if role == "assistant":
            out.tool_calls.extend(_tool_calls(message.get("tool_calls") or [], where))
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise ValueError(f"{where}: a tool message needs its tool_call_id")
            result = episode_pb2.ToolResult(tool_call_id=call_id, succeeded=True)
            result.output.string_value = text
            out.tool_result.CopyFrom(result)
            out.content = ""
        yield out


def _text(content: object, where: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise ValueError(f"{where}: content must be a string or a list of parts")
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind != "text":
            raise ValueError(f"{where}: a {kind!r} content part cannot be imported (text only)")
        texts.append(str(part.get("text", "")))
    return "".join(texts)


def _tool_calls(calls: Sequence[Any], where: str) -> Iterator[episode_pb2.ToolCall]:
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(call.get("id"), str):
            raise ValueError(f"{where}: a tool call needs an id and a function")
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError as exc:
            raise ValueError(f"{where}: tool call {call['id']} arguments are not JSON") from exc
        if not isinstance(arguments, dict):
            arguments = {"arguments": arguments}
        inputs = struct_pb2.Struct()
        inputs.update(arguments)
        yield episode_pb2.ToolCall(
            tool_call_id=call["id"], tool_name=str(function.get("name", "")), input=inputs
        )


# --- mem0 ----------------------------------------------------------------------------------


def _mem0(stub: MemoryServiceStub, auth: Auth, path: Path, agent_id: str, user_id: str) -> str:
    data = json.loads(path.read_text(encoding="utf-8"))
    items = data.get("results", data.get("memories")) if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ValueError('expected mem0\'s get_all() JSON: {"results": [...]} or a list of memories')
    by_user: dict[str, list[memory_service_pb2.MemoryInput]] = {}
    for index, item in enumerate(items):
        memory, owner = _mem0_memory(item, index)
        by_user.setdefault(user_id or owner, []).append(memory)
    made = same = 0
    for user, memories in by_user.items():
        if not user:
            raise ValueError("a mem0 memory names no user_id: pass --user")
        for start in range(0, len(memories), BATCH):
            request = memory_service_pb2.CreateMemoriesRequest(
                agent_id=agent_id, user_id=user, placement=memory_service_pb2.MEMORY_PLACEMENT_EAGER,
                memories=memories[start : start + BATCH], keep_separate=True,
            )  # fmt: skip
            for result in stub.CreateMemories(request, metadata=auth).results:
                made += result.outcome == memory_service_pb2.MEMORY_OUTCOME_CREATED
                same += result.outcome == memory_service_pb2.MEMORY_OUTCOME_UNCHANGED
    return f"imported {made} memories ({same} already there) for {len(by_user)} users"


def _mem0_memory(item: object, index: int) -> tuple[memory_service_pb2.MemoryInput, str]:
    if not isinstance(item, dict) or not isinstance(item.get("memory"), str) or not item.get("id"):
        raise ValueError(f'memory {index}: expected an object with "id" and "memory"')
    metadata = struct_pb2.Struct()
    metadata.update(
        {"mem0": {k: v for k, v in item.items() if k in ("hash", "metadata", "created_at", "updated_at")}}
    )
    out = memory_service_pb2.MemoryInput(
        memory_id=f"mem0-{item['id']}",
        text=item["memory"],
        kind=memory_pb2.MEMORY_KIND_FACT,
        metadata=metadata,
    )
    return out, str(item.get("user_id") or "")
