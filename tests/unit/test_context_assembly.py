"""Context assembly rules: order, budget and ceiling, reducers, compaction trigger."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodic.domain.assembly import (
    RECALL_FOOTER,
    AssemblyInput,
    Budget,
    assemble,
    recall_block,
)
from episodic.domain.context import Section, Summary
from episodic.domain.model import Message, Role, ToolCall, ToolResult
from episodic.domain.recall import Snippet
from episodic.domain.reducers import MESSAGE_OVERHEAD, REPLY_PRIMING, stub_text
from episodic.errors import FailedPrecondition, InvalidArgument

T0 = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)


def words(text: str) -> int:
    return len(text.split())


def msg(seq: int, role: Role, content: str, tokens: int | None = None, **kw: object) -> Message:
    count = tokens if tokens is not None else words(content)
    return Message("ep", seq, role, content, count, "cl100k_base", T0, **kw)  # type: ignore[arg-type]


def chat(n: int, tokens_each: int = 10) -> list[Message]:
    return [
        msg(i, Role.USER if i % 2 else Role.ASSISTANT, " ".join(["w"] * tokens_each)) for i in range(1, n + 1)
    ]


def tool_exchange(seq: int, call_id: str, name: str = "lookup", size: int = 50) -> list[Message]:
    call = msg(seq, Role.ASSISTANT, "calling", tool_calls=(ToolCall(call_id, name),))
    result = msg(
        seq + 1,
        Role.TOOL,
        " ".join(["r"] * size),
        tool_result=ToolResult(call_id, output={"ok": True}, succeeded=True),
    )
    return [call, result]


def inputs(tail: list[Message], budget: int = 1000, ceiling: int = 2000, **kw: object) -> AssemblyInput:
    base: dict[str, object] = {
        "system_prompt": "You are helpful.",
        "user_message": "What next?",
        "snippets": [],
        "summary": None,
        "tail": tail,
        "keep_tool_results": 3,
        "budget": Budget(budget, ceiling),
        "can_compact": True,
    }
    base.update(kw)
    return AssemblyInput(**base)  # type: ignore[arg-type]


def snippet(episode_id: str, summary: str, facts: tuple[str, ...] = (), score: float = 1.0) -> Snippet:
    return Snippet(episode_id, T0, T0, summary, facts, score)


def summary_record(to_seq: int, content: str = "[Summary of earlier conversation]\nThey talked.") -> Summary:
    return Summary("t", "ep", 1, to_seq, content, words(content), "cl100k_base", "test", T0)


def test_sections_render_in_the_documented_order() -> None:
    result = assemble(
        inputs(chat(4), snippets=[snippet("e1", "Asked about leave.")], summary=summary_record(0)), words
    )
    sections = [m.section for m in result.messages]
    assert sections == [
        Section.SYSTEM,
        Section.PAST_CONVERSATIONS,
        Section.SUMMARY,
        *[Section.HISTORY] * 4,
        Section.USER_MESSAGE,
    ]
    assert result.messages[1].role is Role.CONTEXT and result.messages[-1].role is Role.USER


def test_the_past_conversations_block_follows_the_seed_format() -> None:
    block, recalled = recall_block(
        [snippet("e1", "Mary asked about her leave balance.", ("Prefers formal English", "12 days left"))],
        500,
        words,
    )
    assert block is not None
    assert block.content == (
        "[Past Conversations]\n"
        "The following are relevant conversations this user has had with you previously:\n\n"
        "Date: 2026-03-14 (Saturday, 14 March 2026)\n"
        "Summary: Mary asked about her leave balance.\n"
        "Key facts: Prefers formal English. 12 days left.\n"
        "---\n" + RECALL_FOOTER
    )
    assert [r.rendered for r in recalled] == [True]


def test_a_recalled_episode_shows_its_excerpts_after_its_key_facts() -> None:
    recalled = dataclasses.replace(
        snippet("e1", "Mary asked about her leave.", ("12 days left",)),
        excerpts=("Mary: Can I carry over leave to April?", "Assistant: Up to 5 days, yes."),
    )
    block, _ = recall_block([recalled], 500, words)
    assert block is not None
    assert (
        "Key facts: 12 days left.\n"
        "Relevant excerpts:\n"
        "- Mary: Can I carry over leave to April?\n"
        "- Assistant: Up to 5 days, yes.\n"
        "---\n"
    ) in block.content


def test_the_budget_covers_every_section_and_history_slides_by_tokens() -> None:
    tail = chat(200, tokens_each=10)  # 200 messages of 14 tokens with overhead
    result = assemble(inputs(tail, budget=300), words)
    total = sum(result.section_tokens.values()) + REPLY_PRIMING
    assert total <= 300
    history = [m for m in result.messages if m.section is Section.HISTORY]
    assert history[-1].seq == 200 and history[0].seq == 200 - len(history) + 1  # a contiguous newest tail
    assert result.pruned == 200 - len(history)


def test_one_large_message_costs_its_tokens_not_one_slot() -> None:
    tail = [*chat(3), msg(4, Role.ASSISTANT, "big", tokens=970), *[msg(5, Role.USER, "ok")]]
    result = assemble(inputs(tail, budget=1000), words)
    kept = [m.seq for m in result.messages if m.section is Section.HISTORY]
    assert kept == [4, 5]  # the three small older ones no longer fit behind the big one


def test_system_prompt_alone_over_the_ceiling_is_a_failed_precondition() -> None:
    huge = " ".join(["x"] * 3000)
    with pytest.raises(FailedPrecondition):
        assemble(inputs([], system_prompt=huge), words)
    with pytest.raises(InvalidArgument) as overridden:
        assemble(inputs([], system_prompt=huge, system_prompt_overridden=True), words)
    assert overridden.value.violations[0].field == "system_prompt"


def test_a_user_message_that_passes_the_ceiling_is_refused_not_truncated() -> None:
    with pytest.raises(InvalidArgument) as refused:
        assemble(inputs([], user_message=" ".join(["x"] * 1990)), words)
    assert refused.value.violations[0].field == "user_message"


def test_mandatory_sections_over_the_budget_but_under_the_ceiling_drop_the_rest() -> None:
    result = assemble(inputs(chat(5), budget=100, user_message=" ".join(["x"] * 150)), words)
    assert result.over_budget
    assert [m.section for m in result.messages] == [Section.SYSTEM, Section.USER_MESSAGE]


def test_old_tool_results_become_stubs_and_recent_ones_stay_verbatim() -> None:
    tail = [m for i in range(5) for m in tool_exchange(1 + 2 * i, f"c{i}", name=f"tool{i}")]
    result = assemble(inputs(tail, keep_tool_results=2), words)
    tools = [m for m in result.messages if m.role is Role.TOOL]
    assert [m.stubbed for m in tools] == [True, True, True, False, False]
    assert tools[0].content == stub_text("tool0", True, 2)
    assert tools[0].tokens <= 12 + MESSAGE_OVERHEAD  # ~10 tokens, whatever the result's size
    assert result.stubbed == 3


@settings(max_examples=200, deadline=None)
@given(
    pairs=st.integers(0, 12),
    chats=st.integers(0, 12),
    budget=st.integers(40, 700),
    keep=st.integers(0, 4),
    sizes=st.lists(st.integers(1, 120), min_size=30, max_size=30),
)
def test_tool_call_pairs_are_never_split_and_the_budget_always_holds(
    pairs: int, chats: int, budget: int, keep: int, sizes: list[int]
) -> None:
    tail: list[Message] = []
    for i in range(max(pairs, chats)):
        seq = len(tail) + 1
        if i < pairs:
            tail += tool_exchange(seq, f"c{i}", size=sizes[i % 30])
        if i < chats:
            tail.append(msg(len(tail) + 1, Role.USER, " ".join(["u"] * sizes[(i + 7) % 30])))
    result = assemble(inputs(tail, budget=budget, keep_tool_results=keep), words)
    assert sum(result.section_tokens.values()) + REPLY_PRIMING <= max(
        budget, 2000 if result.over_budget else 0
    )
    history = [m for m in result.messages if m.section is Section.HISTORY]
    called = {c.tool_call_id for m in history for c in m.tool_calls}
    answered = {m.tool_call_id for m in history if m.role is Role.TOOL}
    assert called == answered


def test_compaction_is_asked_for_only_when_the_tail_does_not_fit() -> None:
    fits = assemble(inputs(chat(10), budget=1000), words)
    assert fits.compact_through == 0
    overflows = assemble(inputs(chat(200), budget=1000), words)
    assert 0 < overflows.compact_through < 200
    kept_after = sum(m.token_count + MESSAGE_OVERHEAD for m in chat(200) if m.seq > overflows.compact_through)
    assert kept_after <= 1000 // 2  # leaves room, so the next turns do not compact again
    closed = assemble(inputs(chat(200), budget=1000, can_compact=False), words)
    assert closed.compact_through == 0


def test_recall_takes_at_most_half_the_budget_and_reports_what_did_not_fit() -> None:
    many = [snippet(f"e{i}", " ".join(["s"] * 60), score=1 - i / 10) for i in range(10)]
    result = assemble(inputs([], budget=400, snippets=many), words)
    assert result.section_tokens[Section.PAST_CONVERSATIONS] <= 200
    rendered = [r.rendered for r in result.recalled]
    assert rendered[0] and not all(rendered)
    assert [r.episode_id for r in result.recalled] == [f"e{i}" for i in range(10)]


def test_the_summary_is_rendered_with_its_span() -> None:
    result = assemble(inputs(chat(3), summary=summary_record(40)), words)
    assert result.summary_span.from_seq == 1 and result.summary_span.to_seq == 40
