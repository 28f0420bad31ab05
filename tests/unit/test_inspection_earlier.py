"""The inspector and "[Earlier in this conversation]": a log message in a passage the call
recalled there is "recalled from earlier" (whole or cut) in the call's fates and the log's
badges; "where did it go?" says a phrase came back through that section (instead of
"summarized, not in the summary"), when, and after which drop; and the badges and the trace
are one rule (`message_fate`), with and without a phrase."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from episodic.domain.agents import MemoryDraft
from episodic.domain.context import (
    ModelCall,
    PassageFate,
    RecalledPassage,
    RenderedMessage,
    Section,
    Span,
)
from episodic.domain.inspection import (
    CallView,
    DropReason,
    Fate,
    FateRun,
    call_fates,
    fate_at,
    fates,
    message_fate,
    trace_phrase,
)
from episodic.domain.model import NewMessage, RecallMode, Role
from episodic.domain.recall import Signal
from episodic.edges.inspector import views
from episodic.service.context import ContextRequest
from episodic.service.inspection import InspectedCall, Traced
from tests.unit.test_inspection_rules import CAT, call, history, logged
from tests.unit.test_inspection_use_cases import inspection
from tests.unit.use_cases import CALLER, TENANT, use_cases

EARLIER_TEXT = "[Earlier in this conversation]\n[2026-11-01 (Sunday, 1 November 2026), 09:00]\nUser: " + CAT


def with_earlier(
    c: ModelCall, *passages: tuple[tuple[int, ...], PassageFate], text: str = EARLIER_TEXT
) -> ModelCall:
    """`c` with an earlier section rendered after its summary, recalling `passages`."""
    recalled = tuple(RecalledPassage(seqs, 0.5, fate, (Signal.LEXICAL,)) for seqs, fate in passages)
    messages = list(c.messages)
    if any(fate is not PassageFate.DROPPED for _, fate in passages):
        at = next(i for i, m in enumerate(messages) if m.section in (Section.HISTORY, Section.USER_MESSAGE))
        messages.insert(at, RenderedMessage(Role.CONTEXT, text, Section.EARLIER, 20))
    report = dataclasses.replace(c.report, earlier=recalled)
    return dataclasses.replace(c, messages=tuple(messages), report=report)


# --- the rule, without a phrase: what the call did with each message ----------------------


def test_messages_of_rendered_passages_are_recalled_from_earlier_whole_or_cut_and_dropped_ones_not() -> None:
    c = with_earlier(
        call(1, [history(9)], summary=Span(1, 8), history_span=Span(9, 9), user_seq=10),
        ((2, 3), PassageFate.WHOLE),
        ((6,), PassageFate.CUT),
        ((4, 5), PassageFate.DROPPED),
    )
    assert fates(c) == [
        FateRun(1, 1, Fate.SUMMARIZED),
        FateRun(2, 3, Fate.EARLIER),
        FateRun(4, 5, Fate.SUMMARIZED),  # found, but no room: the summary's span is all of it
        FateRun(6, 6, Fate.EARLIER_CUT),
        FateRun(7, 8, Fate.SUMMARIZED),
        FateRun(9, 10, Fate.VERBATIM),
    ]


def test_a_calls_fates_as_runs_are_the_rule_seq_by_seq() -> None:
    """The runs (the log's badges) are `message_fate` without a phrase, for every seq."""
    c = with_earlier(
        call(
            1,
            [history(12), history(13, stubbed=True)],
            summary=Span(3, 9),
            history_span=Span(12, 13),
            user_seq=14,
        ),
        ((4, 5, 6), PassageFate.WHOLE),
        ((9, 10), PassageFate.CUT),
        ((1, 2), PassageFate.DROPPED),
    )
    view = CallView.of(c)
    by_runs = [run.fate for run in fates(c) for _ in range(run.from_seq, run.to_seq + 1)]
    assert by_runs == [message_fate(view, seq) for seq in range(1, 15)]
    assert message_fate(view, 15) is Fate.NOT_YET


# --- the rule, with a phrase: what the model saw of it ------------------------------------


def test_a_message_recalled_from_earlier_is_seen_there_though_the_summary_does_not_say_it() -> None:
    """Before, the trace said "summarized, not in the summary" (LOST) of it."""
    c = with_earlier(
        call(1, [history(5)], summary=Span(1, 4), summary_text="They talked about a trip.", user_seq=6),
        ((1, 2), PassageFate.WHOLE),
    )
    row = call_fates(c, [1], "zanzibar")
    assert row.fates == ((1, Fate.EARLIER),) and row.present == (Section.EARLIER,)
    assert fate_at(c, 1) is Fate.EARLIER  # the badge says the same


def test_recalled_from_earlier_outranks_the_summary_when_both_say_it() -> None:
    c = with_earlier(
        call(1, [history(5)], summary=Span(1, 4), summary_text="The cat is Zanzibar.", user_seq=6),
        ((1, 2), PassageFate.CUT),
    )
    assert call_fates(c, [1], "zanzibar").fates == ((1, Fate.EARLIER),)  # the cut kept the phrase


def test_a_passage_rendered_without_the_phrase_is_not_where_the_model_saw_it() -> None:
    cut = "[Earlier in this conversation]\n[...]\nUser: My cat is called…"
    without = with_earlier(
        call(1, [history(5)], summary=Span(1, 4), summary_text="A trip.", user_seq=6),
        ((1, 2), PassageFate.CUT),
        text=cut,
    )
    assert call_fates(without, [1], "zanzibar").fates == ((1, Fate.EARLIER_CUT),)
    said = with_earlier(
        call(1, [history(5)], summary=Span(1, 4), summary_text="The cat is Zanzibar.", user_seq=6),
        ((1, 2), PassageFate.CUT),
        text=cut,
    )
    assert call_fates(said, [1], "zanzibar").fates == ((1, Fate.SUMMARIZED),)  # the summary says it


def test_the_earlier_section_holds_a_phrase_whose_white_space_it_quotes_on_one_line() -> None:
    c = with_earlier(call(1, [], summary=Span(1, 4), user_seq=5), ((1, 2), PassageFate.WHOLE))
    assert call_fates(c, [1], "is called\n  zanzibar").fates == ((1, Fate.EARLIER),)


def test_a_phrase_that_left_through_the_summary_comes_back_recalled_from_earlier() -> None:
    """Verbatim, in the summary, left out by a re-compaction, then recalled into "[Earlier in
    this conversation]" when the cat comes up: dropped at the re-compaction, back at the call
    that recalled it, and the phrase as a whole gone there and back here."""
    calls = [
        call(1, [history(1, CAT)], history_span=Span(1, 1), user_seq=2),
        call(2, [history(3)], summary=Span(1, 2), summary_text="The cat is Zanzibar.", user_seq=4),
        call(3, [history(5)], summary=Span(1, 4), summary_text="They talked about a trip.", user_seq=6),
        with_earlier(
            call(4, [history(7)], summary=Span(1, 6), summary_text="They talked about a trip.", user_seq=8),
            ((1, 2), PassageFate.WHOLE),
        ),
        call(5, [history(9)], summary=Span(1, 8), summary_text="They talked about a trip.", user_seq=10),
    ]
    trace = trace_phrase([logged(1, CAT)], calls, "zanzibar")
    assert [row.fates[0][1] for row in trace.calls] == [
        Fate.VERBATIM, Fate.SUMMARIZED, Fate.LOST, Fate.EARLIER, Fate.LOST,
    ]  # fmt: skip
    [drop] = trace.dropped
    assert (drop.model_call_id, drop.reason) == ("mc_3", DropReason.RECOMPACTION)
    [back] = trace.returned
    assert (back.seq, back.model_call_id, back.fate) == (1, "mc_4", Fate.EARLIER)
    assert trace.gone is not None and trace.gone.model_call_id == "mc_3"
    assert trace.back is not None
    assert (trace.back.model_call_id, trace.back.present) == ("mc_4", (Section.EARLIER,))


def test_a_message_seen_only_from_earlier_drops_when_it_is_no_longer_recalled() -> None:
    calls = [
        with_earlier(call(1, [], summary=Span(1, 4), user_seq=5), ((1, 2), PassageFate.WHOLE)),
        call(2, [], summary=Span(1, 5), user_seq=6),
    ]
    trace = trace_phrase([logged(1, CAT)], calls, "zanzibar")
    assert [(d.model_call_id, d.reason) for d in trace.dropped] == [("mc_2", DropReason.EARLIER)]
    assert trace.gone is not None and trace.gone.reason is DropReason.EARLIER
    assert trace.gone.last_seen_in == (Section.EARLIER,) and trace.back is None


def test_the_where_json_says_when_it_came_back() -> None:
    calls = [
        call(1, [history(1, CAT)], history_span=Span(1, 1), user_seq=2),
        call(2, [], summary=Span(1, 2), summary_text="A trip.", user_seq=3),
        with_earlier(call(3, [], summary=Span(1, 3), user_seq=4), ((1, 2), PassageFate.WHOLE)),
    ]
    shown = views.where("Zanzibar", Traced(trace_phrase([logged(1, CAT)], calls, "zanzibar"), False))
    assert [c["fates"] for c in shown["calls"]] == [
        [{"seq": 1, "fate": "verbatim"}], [{"seq": 1, "fate": "lost"}], [{"seq": 1, "fate": "earlier"}],
    ]  # fmt: skip
    assert shown["calls"][2]["present"] == ["earlier"]
    assert [(d["model_call_id"], d["reason"]) for d in shown["dropped"]] == [("mc_2", "compaction")]
    assert [(r["seq"], r["model_call_id"], r["fate"]) for r in shown["returned"]] == [(1, "mc_3", "earlier")]
    assert shown["back"] is not None
    assert (shown["back"]["model_call_id"], shown["back"]["present"]) == ("mc_3", ["earlier"])


def test_the_model_call_json_lists_the_earlier_passages_with_their_seqs_and_fates() -> None:
    c = with_earlier(
        call(1, [history(9)], summary=Span(1, 8), history_span=Span(9, 9), user_seq=10),
        ((2, 3), PassageFate.WHOLE),
        ((4, 5), PassageFate.DROPPED),
    )
    shown = views.model_call(InspectedCall(c, fates(c)), 0, "")
    assert shown["earlier_passages"] == [
        {"seqs": [2, 3], "score": 0.5, "fate": "whole", "signals": ["lexical"]},
        {"seqs": [4, 5], "score": 0.5, "fate": "dropped", "signals": ["lexical"]},
    ]
    assert {"from_seq": 2, "to_seq": 3, "fate": "earlier"} in shown["fates"]
    assert [s["section"] for s in shown["sections"]][4:6] == ["summary", "earlier"]
    [earlier] = [m for m in shown["messages"] if m["section"] == "earlier"]
    assert earlier["seq"] == 0 and earlier["content"] == EARLIER_TEXT


# --- over the fakes: the use case, from BuildContext to "where did it go?" ----------------

TRIP = [
    ("We fly to Lisbon on Friday morning and stay for ten days.", "Lovely, Lisbon in spring is mild."),
    ("I booked a small hotel in Alfama near the castle.", "Alfama is hilly; pack comfortable shoes."),
    ("Should we take the tram up to the viewpoints?", "Tram 28 goes there, but it gets crowded."),
]


async def test_the_cat_compacted_away_comes_back_from_earlier_when_asked_about_and_the_badges_agree() -> None:
    app = use_cases()
    await app.new_agent(memory=MemoryDraft(recall_mode=RecallMode.NONE, max_working_memory_tokens=250))
    episode_id = await app.open()
    turns = [
        ("Hello there, we are planning a trip.", "Happy to help."),
        (CAT, "What a grand name for a cat!"),
    ]
    for said, answer in turns + TRIP * 4:
        await app.context.build(CALLER, ContextRequest(episode_id, said, append_user_message=True))
        await app.episodes.add_messages(CALLER, episode_id, [NewMessage(Role.ASSISTANT, answer)])
        app.clock.advance(timedelta(seconds=30))
    asked = "Who feeds Zanzibar, my cat, while I'm away?"
    await app.context.build(CALLER, ContextRequest(episode_id, asked, append_user_message=True))

    traced = (await inspection(app).where(CALLER, episode_id, "Zanzibar")).trace
    named = next(m.seq for m in traced.messages if m.content == CAT)
    column = [m.seq for m in traced.messages].index(named)
    seen = [row.fates[column][1] for row in traced.calls]
    assert seen[-1] is Fate.EARLIER and Section.EARLIER in traced.calls[-1].present
    left = seen.index(Fate.LOST)  # the summary (the fakes' first sentence) never said it
    assert set(seen[:left]) <= {Fate.NOT_YET, Fate.VERBATIM}
    [drop] = [d for d in traced.dropped if d.seq == named]
    assert drop.reason is DropReason.COMPACTION
    assert drop.model_call_id == traced.calls[left].call.model_call_id
    [back] = [r for r in traced.returned if r.seq == named]
    first_back = seen.index(Fate.EARLIER)
    assert back.fate is Fate.EARLIER and back.model_call_id == traced.calls[first_back].call.model_call_id

    stored = (await app.context_store.list_calls(TENANT, episode_id, None, 100))[::-1]
    for call_, row in zip(stored, traced.calls, strict=True):
        badge = fate_at(call_, named)  # what the log's badge says, no phrase asked
        phrase = row.fates[column][1]
        if phrase is Fate.EARLIER:
            assert badge in (Fate.EARLIER, Fate.EARLIER_CUT)
            assert any(named in p.seqs and p.fate is not PassageFate.DROPPED for p in call_.report.earlier)
        elif phrase in (Fate.LOST, Fate.SUMMARIZED):
            assert badge is Fate.SUMMARIZED  # "summarized": never "in the summary" for a lost phrase
        else:
            assert badge is phrase
