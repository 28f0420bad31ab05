"""History slides by turns: a message that calls tools and the results answering it stand or
fall together; any other message is a turn of its own."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from episodic.domain.context import RenderedMessage, Section
from episodic.domain.model import Message, Role, ToolCall, ToolResult
from episodic.domain.reducers import MESSAGE_OVERHEAD, from_log, group_turns, history_views


def said(seq: int, role: Role = Role.USER) -> RenderedMessage:
    return RenderedMessage(role, f"m{seq}", Section.HISTORY, seq, seq=seq)


def calls(seq: int, *ids: str) -> RenderedMessage:
    return RenderedMessage(
        Role.ASSISTANT, "", Section.HISTORY, seq, tuple(ToolCall(i, "t") for i in ids), seq=seq
    )


def result(seq: int, call_id: str) -> RenderedMessage:
    return RenderedMessage(Role.TOOL, "ok", Section.HISTORY, seq, tool_call_id=call_id, seq=seq)


def seqs(messages: list[RenderedMessage]) -> list[list[int]]:
    return [[m.seq for m in turn.messages] for turn in group_turns(messages)]


def test_a_tool_call_and_its_results_are_one_turn_and_count_their_tokens_together() -> None:
    history = [said(1), calls(2, "a", "b"), result(3, "b"), result(4, "a"), said(5, Role.ASSISTANT)]
    assert seqs(history) == [[1], [2, 3, 4], [5]]
    assert group_turns(history)[1].tokens == 2 + 3 + 4 and group_turns(history)[1].last_seq == 4


def test_a_result_after_another_message_or_answering_no_open_call_stands_alone() -> None:
    assert seqs([calls(1, "a"), said(2), result(3, "a")]) == [[1], [2], [3]]
    assert seqs([calls(1, "a"), result(2, "a"), result(3, "a")]) == [[1, 2], [3]]  # answered already
    assert seqs([result(1, "a"), calls(2, "b"), result(3, "a")]) == [[1], [2], [3]]


def reference(messages: list[RenderedMessage]) -> list[list[int]]:
    """The rule spelled out plainly."""
    turns: list[list[RenderedMessage]] = []
    open_calls: set[str] = set()
    for m in messages:
        if m.role is Role.TOOL and m.tool_call_id in open_calls and turns:
            turns[-1].append(m)
            open_calls.discard(m.tool_call_id)
            continue
        turns.append([m])
        open_calls = {c.tool_call_id for c in m.tool_calls}
    return [[m.seq for m in t] for t in turns]


@given(st.lists(st.tuples(st.sampled_from(["said", "calls", "result"]), st.sampled_from("abc")), max_size=30))
def test_grouping_follows_the_rule_for_any_history(steps: list[tuple[str, str]]) -> None:
    history = [
        said(i) if kind == "said" else calls(i, call_id, "c") if kind == "calls" else result(i, call_id)
        for i, (kind, call_id) in enumerate(steps, start=1)
    ]
    assert seqs(history) == reference(history)


def test_a_log_message_s_history_view_equals_the_one_its_constructor_makes() -> None:
    at = datetime(2026, 3, 1, tzinfo=UTC)
    call = ToolCall("c1", "lookup", {"q": "lisbon"})
    log = [
        Message("ep", 1, Role.USER, "hello", 2, "o200k_base", at),
        Message("ep", 2, Role.ASSISTANT, "", 5, "o200k_base", at, tool_calls=(call,)),
        Message("ep", 3, Role.TOOL, "", 7, "o200k_base", at, tool_result=ToolResult("c1", {"n": 16}, True)),
        Message("ep", 4, Role.TOOL, "said", 1, "o200k_base", at, tool_result=ToolResult("c1", error="no")),
    ]
    made = [
        RenderedMessage(Role.USER, "hello", Section.HISTORY, 2 + MESSAGE_OVERHEAD, seq=1),
        RenderedMessage(Role.ASSISTANT, "", Section.HISTORY, 5 + MESSAGE_OVERHEAD, (call,), seq=2),
        RenderedMessage(
            Role.TOOL, '{"n": 16}', Section.HISTORY, 7 + MESSAGE_OVERHEAD, tool_call_id="c1", seq=3
        ),
        RenderedMessage(Role.TOOL, "said", Section.HISTORY, 1 + MESSAGE_OVERHEAD, tool_call_id="c1", seq=4),
    ]
    views = history_views(log)
    assert views == made and [from_log(m) for m in log] == made
    assert hash(views[0]) == hash(made[0]) and not any(v.stubbed for v in views)
