"""Builders of the request messages, shared by the sync and the asyncio client.

Each function takes plain Python values (str, dict, datetime, enum names) and returns the
generated proto message, leaving unset whatever was not given. The part builders
(`message_input`, `tool_call`, `tool_result`) are public: use them with `add_messages`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from google.protobuf import field_mask_pb2

from episodic_client import values
from episodic_client.v1 import (
    agent_pb2,
    agent_service_pb2,
    context_service_pb2,
    diagnostics_service_pb2,
    episode_pb2,
    episode_service_pb2,
    knowledge_pb2,
)
from episodic_client.values import (
    CloseReasonLike,
    JsonObject,
    JsonValue,
    RoleLike,
    SearchModeLike,
    StateLike,
)

# --- agents -----------------------------------------------------------------------------


def create_agent(
    agent_id: str,
    *,
    system_prompt: str = "",
    model: str = "",
    token_encoding: str = "",
    memory_config: agent_pb2.MemoryConfig | None = None,
    display_name: str = "",
) -> agent_service_pb2.CreateAgentRequest:
    agent = agent_pb2.Agent(
        agent_id=agent_id,
        display_name=display_name,
        system_prompt=system_prompt,
        model=model,
        token_encoding=token_encoding,
        memory_config=memory_config,
    )
    return agent_service_pb2.CreateAgentRequest(agent=agent)


def get_agent(agent_id: str) -> agent_service_pb2.GetAgentRequest:
    return agent_service_pb2.GetAgentRequest(agent_id=agent_id)


def update_agent(
    agent: agent_pb2.Agent, update_mask: Sequence[str] = ()
) -> agent_service_pb2.UpdateAgentRequest:
    """An empty update_mask means every mutable field: then fields left empty in agent are reset."""
    mask = field_mask_pb2.FieldMask(paths=list(update_mask))
    return agent_service_pb2.UpdateAgentRequest(agent=agent, update_mask=mask)


def list_agents(*, page_size: int = 0, page_token: str = "") -> agent_service_pb2.ListAgentsRequest:
    return agent_service_pb2.ListAgentsRequest(page_size=page_size, page_token=page_token)


def delete_agent(agent_id: str, *, erase_data: bool = False) -> agent_service_pb2.DeleteAgentRequest:
    return agent_service_pb2.DeleteAgentRequest(agent_id=agent_id, erase_data=erase_data)


def list_users(
    agent_id: str, *, page_size: int = 0, page_token: str = ""
) -> episode_service_pb2.ListUsersRequest:
    return episode_service_pb2.ListUsersRequest(agent_id=agent_id, page_size=page_size, page_token=page_token)


# --- episodes ---------------------------------------------------------------------------


def open_episode(
    agent_id: str,
    user_id: str,
    *,
    episode_id: str = "",
    metadata: JsonObject | None = None,
    start_time: datetime | None = None,
) -> episode_service_pb2.OpenEpisodeRequest:
    return episode_service_pb2.OpenEpisodeRequest(
        agent_id=agent_id,
        user_id=user_id,
        episode_id=episode_id,
        metadata=values.struct(metadata),
        start_time=values.timestamp(start_time),
    )


def close_episode(
    episode_id: str,
    *,
    reason: CloseReasonLike = episode_pb2.CLOSE_REASON_USER_ENDED,
    note: str = "",
    end_time: datetime | None = None,
    wait_for_digest: bool = False,
) -> episode_service_pb2.CloseEpisodeRequest:
    return episode_service_pb2.CloseEpisodeRequest(
        episode_id=episode_id,
        reason=values.close_reason(reason),
        note=note,
        end_time=values.timestamp(end_time),
        wait_for_digest=wait_for_digest,
    )


def get_episode(episode_id: str) -> episode_service_pb2.GetEpisodeRequest:
    return episode_service_pb2.GetEpisodeRequest(episode_id=episode_id)


def list_episodes(
    *,
    agent_id: str = "",
    user_id: str = "",
    state: StateLike = episode_pb2.Episode.STATE_UNSPECIFIED,
    page_size: int = 0,
    page_token: str = "",
) -> episode_service_pb2.ListEpisodesRequest:
    return episode_service_pb2.ListEpisodesRequest(
        agent_id=agent_id,
        user_id=user_id,
        state=values.episode_state(state),
        page_size=page_size,
        page_token=page_token,
    )


def search_episodes(
    agent_id: str,
    user_id: str,
    query: str = "",
    *,
    mode: SearchModeLike = episode_service_pb2.SEARCH_MODE_HYBRID,
    top_k: int = 0,
    min_score: float | None = None,
    ended_after: datetime | None = None,
    ended_before: datetime | None = None,
) -> episode_service_pb2.SearchEpisodesRequest:
    """mode is "recency", "semantic", "hybrid" or an enum; a min_score of None is left unset."""
    return episode_service_pb2.SearchEpisodesRequest(
        agent_id=agent_id,
        user_id=user_id,
        mode=values.search_mode(mode),
        query=query,
        top_k=top_k,
        min_score=min_score,
        ended_after=values.timestamp(ended_after),
        ended_before=values.timestamp(ended_before),
    )


# --- messages ---------------------------------------------------------------------------


def message_input(
    role: RoleLike,
    content: str = "",
    *,
    client_message_id: str = "",
    create_time: datetime | None = None,
    metadata: JsonObject | None = None,
    tool_calls: Sequence[episode_pb2.ToolCall] | None = None,
    tool_result: episode_pb2.ToolResult | None = None,
) -> episode_pb2.MessageInput:
    """One message to append; role is "user", "assistant", "system", "context", "tool" or an enum."""
    return episode_pb2.MessageInput(
        role=values.role(role),
        content=content,
        client_message_id=client_message_id,
        create_time=values.timestamp(create_time),
        metadata=values.struct(metadata),
        tool_calls=tool_calls,
        tool_result=tool_result,
    )


def tool_call(tool_call_id: str, tool_name: str, input: JsonObject | None = None) -> episode_pb2.ToolCall:
    """A tool-call directive for an assistant message; input is the JSON arguments object."""
    return episode_pb2.ToolCall(tool_call_id=tool_call_id, tool_name=tool_name, input=values.struct(input))


def tool_result(
    tool_call_id: str,
    output: JsonValue = None,
    *,
    succeeded: bool = True,
    error: str = "",
    called_at: datetime | None = None,
    duration: timedelta | None = None,
) -> episode_pb2.ToolResult:
    """The result of a tool call, for a tool message. An output of None is left unset."""
    return episode_pb2.ToolResult(
        tool_call_id=tool_call_id,
        output=None if output is None else values.json_value(output),
        succeeded=succeeded,
        error=error,
        called_at=values.timestamp(called_at),
        duration=values.duration(duration),
    )


def add_message(
    episode_id: str,
    role: RoleLike,
    content: str = "",
    *,
    client_message_id: str = "",
    create_time: datetime | None = None,
    metadata: JsonObject | None = None,
    tool_calls: Sequence[episode_pb2.ToolCall] | None = None,
    tool_result: episode_pb2.ToolResult | None = None,
) -> episode_service_pb2.AddMessageRequest:
    message = message_input(
        role,
        content,
        client_message_id=client_message_id,
        create_time=create_time,
        metadata=metadata,
        tool_calls=tool_calls,
        tool_result=tool_result,
    )
    return episode_service_pb2.AddMessageRequest(episode_id=episode_id, message=message)


def add_messages(
    episode_id: str, messages: Sequence[episode_pb2.MessageInput]
) -> episode_service_pb2.AddMessagesRequest:
    return episode_service_pb2.AddMessagesRequest(episode_id=episode_id, messages=messages)


def list_messages(
    episode_id: str, *, page_size: int = 0, page_token: str = ""
) -> episode_service_pb2.ListMessagesRequest:
    return episode_service_pb2.ListMessagesRequest(
        episode_id=episode_id, page_size=page_size, page_token=page_token
    )


# --- live watching --------------------------------------------------------------------


def watch_episode(
    episode_id: str, *, after_seq: int | None = None
) -> episode_service_pb2.WatchEpisodeRequest:
    """after_seq None: no replay, only what comes next; 0: the whole log first."""
    return episode_service_pb2.WatchEpisodeRequest(episode_id=episode_id, after_seq=after_seq)


def push_assistant_delta(
    episode_id: str, draft_id: str, offset: int, text: str
) -> episode_service_pb2.PushAssistantDeltaRequest:
    return episode_service_pb2.PushAssistantDeltaRequest(
        episode_id=episode_id, draft_id=draft_id, offset=offset, text=text
    )


def finalize_assistant_message(
    episode_id: str,
    draft_id: str,
    *,
    length: int | None = None,
    metadata: JsonObject | None = None,
    tool_calls: Sequence[episode_pb2.ToolCall] | None = None,
) -> episode_service_pb2.FinalizeAssistantMessageRequest:
    return episode_service_pb2.FinalizeAssistantMessageRequest(
        episode_id=episode_id,
        draft_id=draft_id,
        length=length,
        metadata=values.struct(metadata),
        tool_calls=tool_calls,
    )


# --- context ----------------------------------------------------------------------------


def build_context(
    episode_id: str,
    *,
    user_message: str = "",
    append_user_message: bool = False,
    client_message_id: str = "",
    system_prompt: str | None = None,
    memory_config: agent_pb2.MemoryConfig | None = None,
    model: str = "",
    recall_query: str = "",
    request_id: str = "",
    knowledge: Sequence[knowledge_pb2.KnowledgeItem] = (),
) -> context_service_pb2.BuildContextRequest:
    """A system_prompt of None keeps the agent's; "" overrides it with an empty prompt.
    knowledge: items retrieved elsewhere (`episodic_client.knowledge_item`), rendered in the
    "[Knowledge]" section with the agent's own documents found for the turn."""
    return context_service_pb2.BuildContextRequest(
        episode_id=episode_id,
        user_message=user_message,
        append_user_message=append_user_message,
        client_message_id=client_message_id,
        system_prompt=system_prompt,
        memory_config=memory_config,
        model=model,
        recall_query=recall_query,
        request_id=request_id,
        knowledge=knowledge,
    )


def get_model_call(model_call_id: str) -> context_service_pb2.GetModelCallRequest:
    return context_service_pb2.GetModelCallRequest(model_call_id=model_call_id)


def list_model_calls(
    episode_id: str, *, page_size: int = 0, page_token: str = ""
) -> context_service_pb2.ListModelCallsRequest:
    return context_service_pb2.ListModelCallsRequest(
        episode_id=episode_id, page_size=page_size, page_token=page_token
    )


def record_model_reply(
    model_call_id: str,
    *,
    input_tokens: int,
    output_tokens: int,
    latency: timedelta | None = None,
    assistant_message_seq: int = 0,
) -> context_service_pb2.RecordModelReplyRequest:
    return context_service_pb2.RecordModelReplyRequest(
        model_call_id=model_call_id,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        latency=values.duration(latency),
        assistant_message_seq=assistant_message_seq,
    )


# --- diagnostics ------------------------------------------------------------------------


def echo(payload: bytes) -> diagnostics_service_pb2.EchoRequest:
    return diagnostics_service_pb2.EchoRequest(payload=payload)
