"""The one frame a BuildContext usually sends carries each rendered message exactly as the
general conversion makes it: plain messages, tool calls, tool results and stubs alike."""

from __future__ import annotations

import dataclasses

from episodic.domain.context import ModelCall, RenderedMessage, Section
from episodic.domain.model import Role, ToolCall
from episodic.edges.grpc.context_convert import FRAME_SLACK_BYTES, context_message_out, frames, one_frame
from tests.unit.test_inspection_rules import call

SEARCH = ToolCall("c1", "search_hotels", {"area": "Gion", "nights": 3})
RENDERED = [
    RenderedMessage(Role.USER, "Book the quiet hotel near Gion.", Section.HISTORY, 9, seq=4),
    RenderedMessage(Role.ASSISTANT, "", Section.HISTORY, 12, (SEARCH,), seq=5),
    RenderedMessage(
        Role.TOOL, "[result elided]", Section.HISTORY, 10, tool_call_id="c1", seq=6, stubbed=True
    ),
    RenderedMessage(Role.ASSISTANT, "Done: 20000 yen a night.", Section.HISTORY, 8, seq=7),
]


def mixed_call() -> ModelCall:
    c = call(1, RENDERED, user_seq=8)
    report = dataclasses.replace(c.report, section_tokens=dict.fromkeys(Section, 5))
    return dataclasses.replace(c, report=report)


def test_one_frame_holds_every_message_as_the_general_conversion_makes_it() -> None:
    c = mixed_call()
    frame = one_frame(c, 4 * 1024 * 1024)
    assert frame is not None
    assert list(frame.messages) == [context_message_out(i, m) for i, m in enumerate(c.messages)]
    assert [m.index for m in frame.messages] == list(range(len(c.messages)))
    assert frame.messages[2].tool_calls[0].tool_name == "search_hotels"
    assert frame.messages[3].stubbed and frame.messages[3].tool_call_id == "c1"


def test_a_context_too_large_for_one_frame_streams_the_same_messages() -> None:
    c = mixed_call()
    whole = one_frame(c, 4 * 1024 * 1024)
    small = FRAME_SLACK_BYTES + 300  # too small for the one frame's bound: a message or two a frame
    assert whole is not None and one_frame(c, small) is None
    streamed = list(frames(c, small))
    assert len(streamed) >= 2
    assert [m for f in streamed for m in f.messages] == list(whole.messages)
