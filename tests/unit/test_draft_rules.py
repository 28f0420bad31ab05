"""Rules of assistant replies in progress (domain/drafts.py): text grows by offset, a
retried push is a no-op, a gap or different text is refused naming the offset, a draft
fits in a message, and an episode holds a bounded number of them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from episodic.domain.drafts import DraftLimits, DraftRow, Push, check_final_parts, plan_push
from episodic.domain.model import ToolCall
from episodic.domain.validation import Limits, Violations
from episodic.errors import FailedPrecondition, InvalidArgument

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
LIMITS = DraftLimits(max_bytes=64, per_episode=2, idle=timedelta(minutes=10))


def row(draft_id: str, text: str, age: timedelta = timedelta(0)) -> DraftRow:
    return DraftRow(draft_id, len(text), len(text.encode()), NOW - age)


def test_a_first_push_creates_the_draft() -> None:
    plan = plan_push([], Push("d1", 0, "Hel"), "", NOW, LIMITS)
    assert (plan.tail, plan.length, plan.creates, plan.writes) == ("Hel", 3, True, True)


def test_a_push_at_the_end_appends() -> None:
    plan = plan_push([row("d1", "Hel")], Push("d1", 3, "lo"), "", NOW, LIMITS)
    assert (plan.tail, plan.length, plan.creates) == ("lo", 5, False)


def test_a_retried_push_writes_nothing() -> None:
    plan = plan_push([row("d1", "Hello")], Push("d1", 3, "lo"), "lo", NOW, LIMITS)
    assert (plan.tail, plan.length, plan.writes) == ("", 5, False)


def test_a_retry_that_overlaps_the_end_appends_only_the_new_part() -> None:
    plan = plan_push([row("d1", "Hello")], Push("d1", 3, "lo!"), "lo", NOW, LIMITS)
    assert (plan.tail, plan.length) == ("!", 6)


def test_offsets_count_code_points_not_bytes() -> None:
    plan = plan_push([row("d1", "né🙂")], Push("d1", 3, "!"), "", NOW, LIMITS)
    assert plan.length == 4
    assert plan.size == len("né🙂!".encode())


def test_a_push_past_the_end_is_a_gap_naming_the_offset() -> None:
    with pytest.raises(FailedPrecondition) as caught:
        plan_push([row("d1", "Hel")], Push("d1", 5, "x"), "", NOW, LIMITS)
    assert caught.value.reason == "DRAFT_OFFSET_GAP"
    assert "offset 5" in caught.value.message and "from offset 3" in caught.value.message


def test_different_text_at_a_pushed_offset_is_refused() -> None:
    with pytest.raises(FailedPrecondition) as caught:
        plan_push([row("d1", "Hello")], Push("d1", 3, "p!"), "lo", NOW, LIMITS)
    assert caught.value.reason == "DRAFT_OFFSET_MISMATCH"
    assert "offset 3" in caught.value.message


def test_a_draft_may_not_outgrow_a_message() -> None:
    with pytest.raises(InvalidArgument) as caught:
        plan_push([row("d1", "x" * 60)], Push("d1", 60, "12345"), "", NOW, LIMITS)
    assert [v.field for v in caught.value.violations] == ["text"]


def test_at_the_limit_a_new_draft_is_refused_while_the_others_are_fresh() -> None:
    drafts = [row("d1", "a", timedelta(minutes=9)), row("d2", "b")]
    with pytest.raises(FailedPrecondition) as caught:
        plan_push(drafts, Push("d3", 0, "c"), "", NOW, LIMITS)
    assert caught.value.reason == "TOO_MANY_DRAFTS"


def test_at_the_limit_a_new_draft_replaces_the_oldest_idle_one() -> None:
    drafts = [row("d1", "a", timedelta(minutes=11)), row("d2", "b", timedelta(minutes=30))]
    plan = plan_push(drafts, Push("d3", 0, "c"), "", NOW, LIMITS)
    assert (plan.creates, plan.replaces) == (True, "d2")


def test_pushing_to_an_existing_draft_is_allowed_at_the_limit() -> None:
    drafts = [row("d1", "a"), row("d2", "b")]
    assert plan_push(drafts, Push("d2", 1, "c"), "", NOW, LIMITS).length == 2


def test_finalize_parts_are_checked_under_their_request_names() -> None:
    v = Violations()
    calls = [ToolCall("call 1", "search"), ToolCall("c2", "search", {"x": float("nan")})]
    check_final_parts(v, {"k": "\x00"}, calls, Limits())
    assert {i.field for i in v.items} == {"metadata", "tool_calls[0].tool_call_id", "tool_calls[1].input"}
