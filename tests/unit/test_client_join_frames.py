"""The Python client joins a BuildContext stream into whole messages and the report, whether
it came as one frame (the usual case) or as parts over several."""

from __future__ import annotations

import pytest

from episodic_client.context import join_frames
from episodic_client.errors import EpisodicClientError
from episodic_client.v1 import context_pb2, context_service_pb2

Message, Frame = context_pb2.ContextMessage, context_service_pb2.BuildContextResponse
REPORT = context_pb2.ContextReport(total_tokens=42)


def test_one_whole_frame_gives_its_messages_and_report() -> None:
    frame = Frame(
        messages=[Message(index=0, content="Be brief."), Message(index=1, content="Hi")], report=REPORT
    )
    built = join_frames([frame])
    assert [m.content for m in built.messages] == ["Be brief.", "Hi"] and built.report == REPORT


def test_a_message_split_over_frames_is_joined_whole() -> None:
    frames = [
        Frame(
            messages=[
                Message(index=0, content="Be "),
                Message(index=1, content="long ", content_continues=True),
            ]
        ),
        Frame(messages=[Message(index=1, content="text")], report=REPORT),
    ]
    built = join_frames(frames)
    assert [m.content for m in built.messages] == ["Be ", "long text"]
    assert not built.messages[1].content_continues and built.report == REPORT


def test_a_single_frame_ending_mid_message_is_a_broken_stream() -> None:
    frame = Frame(messages=[Message(index=0, content="cut", content_continues=True)], report=REPORT)
    with pytest.raises(EpisodicClientError, match="mid-message"):
        join_frames([frame])
