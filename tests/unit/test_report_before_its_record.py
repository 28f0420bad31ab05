"""BuildContext's report goes out once the user message is durable, saying whether the model
call's record is still being committed (`record_pending`); the stream ends only once the
record is durable, and in an error status when it could not be stored."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from episodic.domain.context import Compaction, ContextReport, ModelCall, RenderedMessage, Section, Span
from episodic.domain.model import Caller, Role
from episodic.edges.grpc import interceptors
from episodic.edges.grpc.context import ContextServicer
from episodic.errors import Unavailable
from episodic.service.context import ContextService, StartedCall
from episodic.service.model_calls import ModelCallService
from episodic.v1 import context_service_pb2 as pb

NONE = Span(0, 0)


def a_call() -> ModelCall:
    report = ContextReport(
        section_tokens={s: 4 if s is Section.USER_MESSAGE else 0 for s in Section}, reply_priming=3,
        budget=100, ceiling=200, over_budget=False, pruned=0, stubbed=0, summarized=0,
        summary_span=NONE, history_span=NONE,
        compaction=Compaction.NONE, recalled=(), pending_digests=0, model="gpt-4o",
        token_encoding="o200k_base", model_call_id="mc_1", user_message_seq=1,
    )  # fmt: skip
    messages = (RenderedMessage(Role.USER, "hello", Section.USER_MESSAGE, 4, seq=1),)
    return ModelCall("t", "mc_1", "ep", "a", "u", datetime(2026, 1, 1, tzinfo=UTC), messages, report)


class Turn:
    """A started turn whose user message's commit and record's commit the test settles."""

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self.appended: asyncio.Future[None] = loop.create_future()
        self.stored: asyncio.Future[tuple[ModelCall, bool]] = loop.create_future()

    async def start(self, caller: Caller, request: Any) -> StartedCall:
        return StartedCall(a_call(), self.stored, self.appended)


def frames_of(turn: Turn) -> AsyncIterator[pb.BuildContextResponse]:
    servicer = ContextServicer(cast(ContextService, turn), cast(ModelCallService, None), 4 * 1024 * 1024)
    interceptors._caller.set(Caller("t"))
    request = pb.BuildContextRequest(episode_id="ep", user_message="hello", append_user_message=True)
    return servicer.BuildContext(request, cast(Any, None))


async def next_frame(stream: AsyncIterator[pb.BuildContextResponse]) -> asyncio.Task[pb.BuildContextResponse]:
    task = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0.01)
    return task


async def test_the_report_waits_for_the_user_message_not_for_the_record() -> None:
    turn = Turn()
    stream = frames_of(turn)
    first = await next_frame(stream)
    assert not first.done()  # the user message is not durable yet: no report
    turn.appended.set_result(None)
    frame = await asyncio.wait_for(first, 5)
    assert frame.report.model_call_id == "mc_1" and frame.record_pending
    ending = await next_frame(stream)
    assert not ending.done()  # the stream ends only once the record is durable
    turn.stored.set_result((a_call(), True))
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(ending, 5)


async def test_a_record_durable_before_the_report_is_not_pending() -> None:
    turn = Turn()
    turn.appended.set_result(None)
    turn.stored.set_result((a_call(), True))
    frames = [frame async for frame in frames_of(turn)]
    assert len(frames) == 1 and frames[0].HasField("report") and not frames[0].record_pending


async def test_a_record_that_fails_after_the_report_ends_the_stream_in_its_error() -> None:
    turn = Turn()
    turn.appended.set_result(None)
    stream = frames_of(turn)
    assert (await anext(stream)).record_pending
    turn.stored.set_exception(Unavailable("the database is unreachable"))
    with pytest.raises(Unavailable):
        await anext(stream)


async def test_a_record_that_failed_before_the_report_sends_no_report() -> None:
    turn = Turn()
    turn.appended.set_result(None)
    turn.stored.set_exception(Unavailable("the database is unreachable"))
    with pytest.raises(Unavailable):
        await anext(frames_of(turn))
