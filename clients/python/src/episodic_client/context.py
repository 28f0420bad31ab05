"""The result of BuildContext, joined from the frames of its stream (shared by both clients).

The server packs the rendered messages into frames under its maximum message size; a
message larger than a frame arrives as parts with the same `index`, all but the last with
`content_continues` set. The report rides on the last frame."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import grpc

from episodic_client.errors import EpisodicClientError
from episodic_client.v1 import context_pb2, context_service_pb2


@dataclass(frozen=True, slots=True)
class BuiltContext:
    """What the model should see, whole: `messages` in order (as stored in the model call
    `report.model_call_id`), and the report of the call. `record_pending`: the report was
    sent before the call's record was durable (the stream's end confirms it)."""

    messages: list[context_pb2.ContextMessage]
    report: context_pb2.ContextReport
    record_pending: bool = False


def join_frames(frames: Iterable[context_service_pb2.BuildContextResponse]) -> BuiltContext:
    """The messages of every frame with their parts joined, and the last frame's report."""
    received = list(frames)
    if len(received) == 1 and received[0].HasField("report"):  # the usual stream: one whole frame
        (whole,) = received
        if not any(m.content_continues for m in whole.messages):
            return BuiltContext(list(whole.messages), whole.report, whole.record_pending)
    messages: list[context_pb2.ContextMessage] = []
    report: context_pb2.ContextReport | None = None
    pending = False
    for frame in received:
        for part in frame.messages:
            _add_part(messages, part)
        if frame.HasField("report"):
            report, pending = frame.report, frame.record_pending
    if report is None or (messages and messages[-1].content_continues):
        raise _broken_stream("the BuildContext stream ended before its report or mid-message")
    return BuiltContext(messages, report, pending)


def _add_part(messages: list[context_pb2.ContextMessage], part: context_pb2.ContextMessage) -> None:
    """Appends part as a new message, or its content to the message it continues."""
    last = messages[-1] if messages else None
    if last is not None and last.content_continues:
        if part.index != last.index:
            raise _broken_stream(f"message {last.index} continues, but the next part is message {part.index}")
        last.content += part.content
        last.content_continues = part.content_continues
        return
    whole = context_pb2.ContextMessage()
    whole.CopyFrom(part)
    messages.append(whole)


def _broken_stream(message: str) -> EpisodicClientError:
    return EpisodicClientError(grpc.StatusCode.INTERNAL, message)
