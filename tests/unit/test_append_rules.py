"""plan_append: dense sequence numbers, retry deduplication, tool calls joined to results."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from episodic.domain.log import AppendContext, PreparedMessage, StoredMessage, countable_text, plan_append
from episodic.domain.model import (
    Episode,
    EpisodeState,
    NewMessage,
    Role,
    ToolCall,
    ToolCallRecord,
    ToolResult,
)
from episodic.errors import AlreadyExists, FailedPrecondition

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def episode(count: int = 0, state: EpisodeState = EpisodeState.OPEN) -> Episode:
    return Episode("t", "ep", "agent", "user", state, "cl100k_base", NOW, NOW, message_count=count)


def prepared(msg: NewMessage, field: str = "message") -> PreparedMessage:
    return PreparedMessage(msg, token_count=3, token_encoding="cl100k_base", field=field)


def context(ep: Episode, stored: dict[str, StoredMessage] | None = None) -> AppendContext:
    return AppendContext(ep, stored or {}, {})


def test_new_messages_continue_the_sequence_without_gaps() -> None:
    batch = [prepared(NewMessage(Role.USER, f"m{i}")) for i in range(3)]
    plan = plan_append(context(episode(count=7)), batch, NOW)
    assert [m.seq for m, _ in plan.inserts] == [8, 9, 10]
    assert plan.token_delta == 9 and plan.last_seq == 10


def test_a_closed_episode_accepts_nothing() -> None:
    with pytest.raises(FailedPrecondition, match="closed"):
        plan_append(context(episode(state=EpisodeState.CLOSED)), [prepared(NewMessage(Role.USER, "x"))], NOW)


def test_a_retry_with_the_same_client_id_returns_the_original_and_writes_nothing() -> None:
    first = plan_append(context(episode()), [prepared(NewMessage(Role.USER, "hi", "c1"))], NOW)
    original, fingerprint = first.inserts[0]
    stored = {"c1": StoredMessage(original, fingerprint)}
    retry = plan_append(context(episode(count=1), stored), [prepared(NewMessage(Role.USER, "hi", "c1"))], NOW)
    assert retry.inserts == [] and retry.results == [(original, True)]


def test_reusing_a_client_id_for_different_content_is_rejected_naming_the_field() -> None:
    first = plan_append(context(episode()), [prepared(NewMessage(Role.USER, "hi", "c1"))], NOW)
    stored = {"c1": StoredMessage(*first.inserts[0])}
    with pytest.raises(AlreadyExists, match=r"messages\[1\].client_message_id"):
        plan_append(
            context(episode(count=1), stored),
            [prepared(NewMessage(Role.USER, "other", "c1"), field="messages[1]")],
            NOW,
        )


def test_a_duplicate_client_id_inside_one_batch_is_deduplicated() -> None:
    same = NewMessage(Role.USER, "hi", "c1")
    plan = plan_append(context(episode()), [prepared(same), prepared(same)], NOW)
    assert len(plan.inserts) == 1 and plan.results[1][1] is True


def test_a_tool_result_joins_the_call_issued_earlier_in_the_batch() -> None:
    call = NewMessage(Role.ASSISTANT, "", tool_calls=(ToolCall("c1", "weather", {"city": "Oslo"}),))
    result = NewMessage(Role.TOOL, "", tool_result=ToolResult("c1", {"t": 3}, succeeded=True))
    plan = plan_append(context(episode()), [prepared(call), prepared(result)], NOW)
    assert plan.new_tool_calls[0].call_seq == 1
    joined = plan.tool_results[0]
    assert joined.result_seq == 2 and joined.result is not None and joined.result.called_at == NOW


def test_a_tool_result_for_an_unknown_call_is_a_failed_precondition() -> None:
    result = NewMessage(Role.TOOL, "", tool_result=ToolResult("nope"))
    with pytest.raises(FailedPrecondition, match="no tool call 'nope'"):
        plan_append(context(episode()), [prepared(result)], NOW)


def test_a_second_result_for_the_same_call_is_rejected() -> None:
    done = ToolCallRecord("c1", "weather", {}, call_seq=1, result=ToolResult("c1"), result_seq=2)
    ctx = AppendContext(episode(count=2), {}, {"c1": done})
    with pytest.raises(FailedPrecondition, match="already has a result"):
        plan_append(ctx, [prepared(NewMessage(Role.TOOL, "", tool_result=ToolResult("c1")))], NOW)


def test_imported_messages_keep_their_own_time() -> None:
    then = NOW - timedelta(days=400)
    plan = plan_append(context(episode()), [prepared(NewMessage(Role.USER, "old", created_at=then))], NOW)
    assert plan.inserts[0][0].created_at == then


def test_token_text_includes_tool_payloads() -> None:
    msg = NewMessage(Role.ASSISTANT, "checking", tool_calls=(ToolCall("c1", "weather", {"city": "Oslo"}),))
    assert countable_text(msg) == 'checking\nweather({"city": "Oslo"})'
