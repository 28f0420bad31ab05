"""WatchEpisode, PushAssistantDelta and FinalizeAssistantMessage: proto -> domain call ->
proto, for EpisodeServicer. No decisions here."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, TypeAlias

import grpc

from episodic.domain.watch import (
    DraftDiscarded,
    DraftFinalized,
    DraftText,
    EpisodeClosed,
    Heartbeat,
    MessageAppended,
    WatchEvent,
)
from episodic.edges.grpc import convert as c
from episodic.edges.grpc.interceptors import current_caller
from episodic.service.watch import WatchService
from episodic.v1 import episode_service_pb2 as pb

Response = pb.WatchEpisodeResponse
Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"


async def watch_episode(
    service: WatchService, request: pb.WatchEpisodeRequest, context: Context
) -> AsyncIterator[Response]:
    # Headers now, not with the first event (which may be a heartbeat away): the client
    # knows at once that its watch is being served.
    await context.send_initial_metadata(())
    after_seq = request.after_seq if request.HasField("after_seq") else None
    async for event in service.watch(current_caller(), request.episode_id, after_seq):
        yield event_out(event)


async def push_delta(
    service: WatchService, request: pb.PushAssistantDeltaRequest
) -> pb.PushAssistantDeltaResponse:
    length = await service.push(
        current_caller(), request.episode_id, request.draft_id, request.offset, request.text
    )
    return pb.PushAssistantDeltaResponse(length=length)


async def finalize(
    service: WatchService, request: pb.FinalizeAssistantMessageRequest
) -> pb.FinalizeAssistantMessageResponse:
    message = await service.finalize(
        current_caller(),
        request.episode_id,
        request.draft_id,
        length=request.length if request.HasField("length") else None,
        metadata=c.struct_in(request.metadata, "metadata"),
        tool_calls=[c.tool_call_in(t, f"tool_calls[{i}]") for i, t in enumerate(request.tool_calls)],
    )
    return pb.FinalizeAssistantMessageResponse(message=c.message_out(message))


def event_out(event: WatchEvent) -> Response:
    if isinstance(event, MessageAppended):
        return Response(message_appended=c.message_out(event.message))
    if isinstance(event, DraftText):
        text = pb.DraftText(draft_id=event.draft_id, offset=event.offset, text=event.text)
        return Response(draft_text=text)
    if isinstance(event, DraftFinalized):
        return Response(draft_finalized=pb.DraftFinalized(draft_id=event.draft_id, seq=event.seq))
    if isinstance(event, DraftDiscarded):
        return Response(draft_discarded=pb.DraftDiscarded(draft_id=event.draft_id))
    if isinstance(event, EpisodeClosed):
        return Response(episode_closed=c.episode_out(event.episode))
    assert isinstance(event, Heartbeat)
    return Response(heartbeat=pb.WatchHeartbeat(last_seq=event.last_seq))
