"""ContextService servicer: proto -> domain call -> proto. No decisions here."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, TypeAlias, TypeVar

import grpc

from episodic.edges.grpc import context_convert as cc
from episodic.edges.grpc.fitting import require_fits
from episodic.edges.grpc.interceptors import current_caller
from episodic.service.context import ContextService
from episodic.service.model_calls import ModelCallService
from episodic.v1 import context_service_pb2 as pb
from episodic.v1 import context_service_pb2_grpc as pb_grpc

Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"
R = TypeVar("R", pb.GetModelCallResponse, pb.ListModelCallsResponse)


class ContextServicer(pb_grpc.ContextServiceServicer):
    def __init__(self, service: ContextService, calls: ModelCallService, max_frame_bytes: int) -> None:
        self._service = service
        self._calls = calls
        self._max_frame_bytes = max_frame_bytes

    async def BuildContext(
        self, request: pb.BuildContextRequest, context: Context
    ) -> AsyncIterator[pb.BuildContextResponse]:
        started = await self._service.start(current_caller(), cc.context_request_in(request))
        if started.stored.done():  # a replay, or a call of a request_id: stored already
            call, _ = started.stored.result()
            for frame in cc.frames(call, self._max_frame_bytes):
                yield frame
            return
        whole = cc.one_frame(started.call, self._max_frame_bytes)  # made while the record commits
        if whole is None:  # a context of several frames: its messages go while the record commits
            for frame in cc.message_frames(started.call, self._max_frame_bytes):
                yield frame
        if started.appended is not None:  # the report acknowledges the user message: durable
            await asyncio.shield(started.appended)
        last = whole if whole is not None else cc.report_frame(started.call)
        if started.stored.done():
            started.stored.result()  # a record that failed fails the call before its report
        else:
            last.record_pending = True
        yield last
        await asyncio.shield(started.stored)  # the stream ends OK only once the record is durable

    def _fits(self, response: R) -> R:
        return require_fits(
            response, self._max_frame_bytes, "list with a smaller page_size, or raise the limit"
        )

    async def GetModelCall(
        self, request: pb.GetModelCallRequest, context: Context
    ) -> pb.GetModelCallResponse:
        call = await self._calls.get_model_call(current_caller(), request.model_call_id)
        return self._fits(pb.GetModelCallResponse(model_call=cc.model_call_out(call)))

    async def ListModelCalls(
        self, request: pb.ListModelCallsRequest, context: Context
    ) -> pb.ListModelCallsResponse:
        page = await self._calls.list_model_calls(
            current_caller(), request.episode_id, request.page_size, request.page_token
        )
        return self._fits(
            pb.ListModelCallsResponse(
                model_calls=[cc.model_call_out(m) for m in page.items], next_page_token=page.next_token
            )
        )

    async def RecordModelReply(
        self, request: pb.RecordModelReplyRequest, context: Context
    ) -> pb.RecordModelReplyResponse:
        call = await self._calls.record_reply(current_caller(), request.model_call_id, cc.reply_in(request))
        return pb.RecordModelReplyResponse(model_call=cc.model_call_out(call))
