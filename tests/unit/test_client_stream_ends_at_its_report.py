"""The async client's BuildContext returns at the report frame (the last, by contract): it
reads no further, never cancels an answered stream, and lets it end before closing; asked to
wait for the record, it reads a report sent before its record was durable to the stream's end."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest

from episodic_client import AsyncEpisodicClient
from episodic_client.v1 import context_pb2, context_service_pb2


class FakeStream:
    """A BuildContext call: its frames, then a status that comes when `end` is set."""

    def __init__(self, frames: list[context_service_pb2.BuildContextResponse], fail_after: int = -1) -> None:
        self._frames, self._fail_after = frames, fail_after
        self.read_past_report = False
        self.cancelled = False
        self.end = asyncio.Event()
        self._done: list[Callable[[Any], None]] = []

    async def __aiter__(self) -> AsyncIterator[context_service_pb2.BuildContextResponse]:
        for i, frame in enumerate(self._frames):
            if i == self._fail_after:
                raise asyncio.CancelledError  # the caller is interrupted mid-stream
            yield frame
            if frame.HasField("report"):
                self.read_past_report = True
        await self.end.wait()

    def cancel(self) -> bool:
        self.cancelled = True
        return True

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        self._done.append(callback)

    async def code(self) -> grpc.StatusCode:
        await self.end.wait()
        for callback in self._done:
            callback(self)
        return grpc.StatusCode.OK


def frame(*, report: bool) -> context_service_pb2.BuildContextResponse:
    out = context_service_pb2.BuildContextResponse(messages=[context_pb2.ContextMessage(content="hi")])
    if report:
        out.report.model_call_id = "mc-1"
    return out


def client_with(stream: FakeStream) -> AsyncEpisodicClient:
    channel = grpc.aio.insecure_channel("127.0.0.1:9")  # never dialled: the stub is replaced
    client = AsyncEpisodicClient("unused", channel=channel)
    client._context = type("Stub", (), {"BuildContext": lambda self, *a, **k: stream})()
    return client


async def test_the_call_returns_at_the_report_and_the_stream_is_left_to_end() -> None:
    stream = FakeStream([frame(report=False), frame(report=True)])
    client = client_with(stream)
    built = await asyncio.wait_for(client.build_context("e1", user_message="q", append_user_message=True), 5)
    assert built.report.model_call_id == "mc-1"
    assert len(built.messages) == 2
    assert not stream.read_past_report and not stream.cancelled
    closing = asyncio.ensure_future(client.close())
    await asyncio.sleep(0.01)
    assert not closing.done()  # close waits for the answered stream's status
    stream.end.set()
    await asyncio.wait_for(closing, 5)
    assert not stream.cancelled


async def test_a_stream_interrupted_before_its_report_is_cancelled() -> None:
    stream = FakeStream([frame(report=False), frame(report=True)], fail_after=1)
    client = client_with(stream)
    with pytest.raises(asyncio.CancelledError):
        await client.build_context("e1", user_message="q", append_user_message=True)
    assert stream.cancelled
    await client.close()


async def test_waiting_for_the_record_reads_a_pending_report_to_the_end_of_the_stream() -> None:
    pending = frame(report=True)
    pending.record_pending = True
    stream = FakeStream([frame(report=False), pending])
    client = client_with(stream)
    building = asyncio.ensure_future(
        client.build_context("e1", user_message="q", append_user_message=True, wait_for_record=True)
    )
    await asyncio.sleep(0.01)
    assert not building.done()  # the record still commits: the stream's end says whether it did
    stream.end.set()
    built = await asyncio.wait_for(building, 5)
    assert built.record_pending and built.report.model_call_id == "mc-1"
    await client.close()


async def test_a_durable_report_needs_no_wait_for_the_record() -> None:
    stream = FakeStream([frame(report=True)])
    client = client_with(stream)
    built = await asyncio.wait_for(client.build_context("e1", wait_for_record=True), 5)
    assert not built.record_pending and not stream.read_past_report
    stream.end.set()
    await client.close()
