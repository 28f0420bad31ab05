"""The inspector's reading of stored model calls: each log message's fate in a call, where a
phrase went turn by turn (and the first turn it dropped out, and why), and what entered and
left the context between two calls."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from episodic.domain.context import (
    Compaction,
    ContextReport,
    ModelCall,
    RenderedMessage,
    Section,
    Span,
)
from episodic.domain.inspection import (
    PREVIEW_CHARS,
    PREVIEW_READS,
    DropReason,
    Fate,
    FateRun,
    as_match,
    call_fates,
    contains,
    diff_calls,
    fate_at,
    fates,
    preview,
    trace_phrase,
)
from episodic.domain.model import Message, Role, ToolCall, ToolResult

T0 = datetime(2026, 11, 1, tzinfo=UTC)
NONE = Span()


def history(seq: int, text: str = "", *, stubbed: bool = False, role: Role = Role.USER) -> RenderedMessage:
    return RenderedMessage(role, text or f"message {seq}", Section.HISTORY, 5, seq=seq, stubbed=stubbed)


def call(
    n: int,
    rendered: list[RenderedMessage],
    *,
    summary: Span = NONE,
    history_span: Span = NONE,
    user_seq: int = 0,
    user_text: str = "the question",
    summary_text: str = "[Summary] ...",
    knowledge: str = "",
) -> ModelCall:
    messages = [RenderedMessage(Role.SYSTEM, "Be brief.", Section.SYSTEM, 3)]
    if knowledge:
        messages.append(RenderedMessage(Role.CONTEXT, f"[Knowledge]\n{knowledge}", Section.KNOWLEDGE, 9))
    if summary.to_seq:
        messages.append(RenderedMessage(Role.CONTEXT, summary_text, Section.SUMMARY, 9))
    messages += rendered
    messages.append(RenderedMessage(Role.USER, user_text, Section.USER_MESSAGE, 4))
    report = ContextReport(
        section_tokens={Section.SYSTEM: 3}, reply_priming=3, budget=100, ceiling=200, over_budget=False,
        pruned=0, stubbed=0, summarized=0, summary_span=summary, history_span=history_span,
        compaction=Compaction.NONE, recalled=(), pending_digests=0, model="gpt-4o",
        token_encoding="o200k_base", user_message_seq=user_seq,
    )  # fmt: skip
    return ModelCall("t", f"mc_{n}", "ep", "a", "u", T0 + timedelta(minutes=n), tuple(messages), report)


def logged(seq: int, text: str, **more: object) -> Message:
    return Message("ep", seq, Role.USER, text, 3, "o200k_base", T0, **more)  # type: ignore[arg-type]


def test_fates_cover_every_seq_as_runs_summarized_pruned_stubbed_and_verbatim() -> None:
    c = call(
        1,
        [history(6), history(7, stubbed=True), history(8)],
        summary=Span(1, 3),
        history_span=Span(6, 8),
        user_seq=9,
    )
    assert fates(c) == [
        FateRun(1, 3, Fate.SUMMARIZED),
        FateRun(4, 5, Fate.PRUNED),
        FateRun(6, 6, Fate.VERBATIM),
        FateRun(7, 7, Fate.STUBBED),
        FateRun(8, 9, Fate.VERBATIM),  # the turn's user message, appended as seq 9
    ]


def test_fates_of_a_call_before_anything_was_logged_are_empty() -> None:
    assert fates(call(1, [])) == []


def test_a_message_written_after_the_call_is_not_yet_there() -> None:
    c = call(1, [history(1)], history_span=Span(1, 1), user_seq=2)
    assert fate_at(c, 3) is Fate.NOT_YET
    assert fate_at(c, 2) is Fate.VERBATIM


CAT = "My cat is called Zanzibar."


def test_a_summarized_phrase_is_there_while_the_summary_says_it_and_lost_at_the_recompaction() -> None:
    """The inspector once blamed the first compaction: the summary made there still said the
    phrase; the re-compaction two calls later lost it (issue 28, defect 1)."""
    early = logged(1, CAT)
    calls = [
        call(1, [], user_seq=1, user_text=CAT),
        call(2, [history(1, CAT), history(2)], history_span=Span(1, 2), user_seq=3),
        call(
            3, [history(3), history(4)], summary=Span(1, 2), summary_text="The cat is Zanzibar.", user_seq=5
        ),
        call(4, [history(5)], summary=Span(1, 4), summary_text="They talked about pets.", user_seq=6),
        call(5, [history(6)], summary=Span(1, 5), summary_text="They talked about pets.", user_seq=7),
    ]
    trace = trace_phrase([early], calls, "zanzibar")
    assert [row.fates for row in trace.calls] == [
        ((1, Fate.VERBATIM),),
        ((1, Fate.VERBATIM),),
        ((1, Fate.SUMMARIZED),),
        ((1, Fate.LOST),),
        ((1, Fate.LOST),),
    ]
    assert [row.present for row in trace.calls] == [
        (Section.USER_MESSAGE,), (Section.HISTORY,), (Section.SUMMARY,), (), (),
    ]  # fmt: skip
    [drop] = trace.dropped
    assert (drop.seq, drop.model_call_id, drop.reason) == (1, "mc_4", DropReason.RECOMPACTION)
    assert trace.gone is not None
    assert (trace.gone.model_call_id, trace.gone.reason) == ("mc_4", DropReason.RECOMPACTION)
    assert trace.gone.last_seen_in == (Section.SUMMARY,)


def test_a_compaction_whose_summary_leaves_the_phrase_out_drops_it_at_once() -> None:
    calls = [
        call(1, [history(1, CAT)], history_span=Span(1, 1), user_seq=2),
        call(2, [history(2)], summary=Span(1, 1), summary_text="Small talk.", user_seq=3),
    ]
    trace = trace_phrase([logged(1, CAT)], calls, "zanzibar")
    assert trace.calls[1].fates == ((1, Fate.LOST),)
    assert [(d.model_call_id, d.reason) for d in trace.dropped] == [("mc_2", DropReason.COMPACTION)]


def test_a_message_that_left_the_window_drops_for_the_window_and_a_stub_for_the_stub() -> None:
    calls = [
        call(1, [history(1, "a"), history(2, "b")], history_span=Span(1, 2), user_seq=3),
        call(2, [history(2, "b", stubbed=True)], history_span=Span(2, 2), user_seq=4),
    ]
    trace = trace_phrase([logged(1, "a"), logged(2, "b")], calls, "a")
    assert [(d.seq, d.reason) for d in trace.dropped] == [(1, DropReason.WINDOW), (2, DropReason.STUB)]


def test_a_message_never_seen_by_the_model_has_no_drop() -> None:
    calls = [call(1, [], summary=Span(1, 1), user_seq=2), call(2, [], summary=Span(1, 2), user_seq=3)]
    trace = trace_phrase([logged(1, "x")], calls, "x")
    assert [row.fates for row in trace.calls] == [((1, Fate.LOST),), ((1, Fate.LOST),)]
    assert trace.dropped == () and trace.gone is None


def test_a_phrase_only_in_knowledge_is_traced_to_the_call_that_no_longer_rendered_it() -> None:
    calls = [
        call(1, [], user_seq=1, knowledge="Source: Leave policy\nEmployees get 25 DAYS of leave."),
        call(2, [history(1)], history_span=Span(1, 1), user_seq=2, knowledge="25 days of leave"),
        call(3, [history(1), history(2)], history_span=Span(1, 2), user_seq=3, knowledge="Other policy"),
    ]
    trace = trace_phrase([], calls, "25 days")
    assert [row.present for row in trace.calls] == [(Section.KNOWLEDGE,), (Section.KNOWLEDGE,), ()]
    assert trace.dropped == ()
    assert trace.gone is not None
    assert (trace.gone.model_call_id, trace.gone.reason) == ("mc_3", DropReason.KNOWLEDGE)


def test_a_phrase_still_rendered_somewhere_is_not_gone() -> None:
    calls = [
        call(1, [history(1, CAT)], history_span=Span(1, 1), user_seq=2),
        call(
            2, [], summary=Span(1, 1), summary_text="Small talk.", user_seq=3, knowledge="Zanzibar is a cat"
        ),
    ]
    trace = trace_phrase([logged(1, CAT)], calls, "zanzibar")
    assert trace.dropped[0].reason is DropReason.COMPACTION  # the message's own words are gone
    assert trace.gone is None  # but the model still saw the phrase, in [Knowledge]
    assert trace.calls[1].present == (Section.KNOWLEDGE,)


def test_phrases_match_case_insensitively_in_content_and_tool_payloads() -> None:
    tool = logged(
        4,
        "",
        tool_calls=(ToolCall("c1", "weather", {"city": "Zanzibar"}),),
    )
    result = logged(5, "", tool_result=ToolResult("c1", {"temp": 31.0}, succeeded=True))
    assert contains(logged(1, "My cat is called ZANZIBAR"), "zanzibar")
    assert contains(tool, "zanzibar")
    assert contains(result, '"temp": 31')
    assert not contains(logged(2, "nothing here"), "zanzibar")


def test_a_trace_keeps_of_a_match_and_a_call_only_what_it_shows() -> None:
    long = logged(1, "Zanzibar  the cat\n" * 10_000, tool_calls=(ToolCall("c1", "find", {"q": "x" * 1000}),))
    kept = as_match(long)
    assert (kept.seq, kept.role, preview(kept.content)) == (long.seq, long.role, preview(long.content))
    assert len(kept.content) == PREVIEW_READS and kept.tool_calls == ()
    full = call(1, [history(1)], history_span=Span(1, 1), user_seq=2)
    row = call_fates(full, [1, 2, 3], "message")
    assert row.call == dataclasses.replace(full, messages=())
    assert row.fates == ((1, Fate.VERBATIM), (2, Fate.VERBATIM), (3, Fate.NOT_YET))


def test_the_diff_of_consecutive_calls_names_what_entered_and_what_left() -> None:
    first = call(1, [history(1), history(2)], history_span=Span(1, 2), user_seq=3, user_text="q3")
    second = call(
        2,
        [history(2), history(3, "q3"), history(4)],
        summary=Span(1, 1),
        history_span=Span(2, 4),
        user_seq=5,
        user_text="q5",
    )
    d = diff_calls(first, second)
    entered = [(m.section, m.seq) for m in d.entered]
    assert entered == [(Section.SUMMARY, 0), (Section.HISTORY, 4), (Section.USER_MESSAGE, 0)]
    assert [(m.section, m.seq) for m in d.left] == [(Section.HISTORY, 1)]
    # kept: the system prompt, seq 2, and seq 3 (the user message then, in history now)
    assert d.kept == 3


def test_the_first_call_has_everything_entering() -> None:
    only = call(1, [history(1)], history_span=Span(1, 1))
    d = diff_calls(None, only)
    assert len(d.entered) == len(only.messages) and d.left == () and d.kept == 0


def test_previews_are_one_line_and_bounded_whatever_the_text() -> None:
    text = "line one\n\n" + "x" * 100_000
    shown = preview(text)
    assert "\n" not in shown and len(shown) == PREVIEW_CHARS and shown.endswith("…")
