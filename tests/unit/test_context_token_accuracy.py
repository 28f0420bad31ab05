"""How accurate the budget arithmetic is: the estimate (stored per-message counts plus the
chat format's per-message overhead) against counting the rendered messages directly with
tiktoken, OpenAI-cookbook style (3 tokens per message + role + content, 3 to prime the
reply).

Stated accuracy: exact for text messages; within 1 % on a tool-heavy conversation (a
tool call's name and JSON input are counted as one text at write time, the direct count
adds them separately)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from episodic.domain.assembly import AssemblyInput, Budget, assemble
from episodic.domain.context import RenderedMessage
from episodic.domain.log import countable_text
from episodic.domain.model import Message, NewMessage, Role, ToolCall, ToolResult
from episodic.domain.recall import Snippet
from episodic.domain.reducers import REPLY_PRIMING
from episodic.tokens import TiktokenCounter

T0 = datetime(2026, 5, 1, tzinfo=UTC)
TEXTS = [
    "Hi! Can you help me plan a trip to Kyoto in April?",
    "Of course. Cherry blossoms peak around early April; book hotels 3–4 months ahead.",
    "I'd like something near Gion, under ¥25,000 a night, for 2 adults.",
    "Here are three options: Hotel Granvia (¥24,800), Gion Hatanaka (¥31,000), Sakura Terrace (¥14,500).",
    "Mixed scripts too: naïve café, 東京, Привет, emoji 🎉🚀, and code `x = [i**2 for i in range(10)]`.",
]


@pytest.fixture(scope="module")
def counter() -> TiktokenCounter:
    return TiktokenCounter()


def stored(seq: int, new: NewMessage, counter: TiktokenCounter, encoding: str) -> Message:
    tokens = counter.count(countable_text(new), encoding)
    return Message(
        "ep", seq, new.role, new.content, tokens, encoding, T0,
        tool_calls=new.tool_calls, tool_result=new.tool_result,
    )  # fmt: skip


def direct_count(messages: tuple[RenderedMessage, ...], counter: TiktokenCounter, encoding: str) -> int:
    total = REPLY_PRIMING
    for m in messages:
        total += 3 + counter.count(m.role.value, encoding) + counter.count(m.content, encoding)
        for call in m.tool_calls:
            total += counter.count(
                f"{call.tool_name}({json.dumps(call.input, ensure_ascii=False)})", encoding
            )
    return total


def estimate(messages: tuple[RenderedMessage, ...]) -> int:
    return sum(m.tokens for m in messages) + REPLY_PRIMING


def build(tail: list[Message], counter: TiktokenCounter, encoding: str) -> tuple[RenderedMessage, ...]:
    snippets = [Snippet("e1", T0, T0, "They planned a trip to Osaka.", ("Prefers trains",), 0.9)]
    inputs = AssemblyInput(
        "You are a travel agent.", "And restaurants?", snippets, None, tail, 3, Budget(8000, 89600), True
    )
    return assemble(inputs, lambda text: counter.count(text, encoding)).messages


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_text_conversations_are_estimated_exactly(counter: TiktokenCounter, encoding: str) -> None:
    tail = [
        stored(
            i + 1, NewMessage(Role.USER if i % 2 == 0 else Role.ASSISTANT, TEXTS[i % 5]), counter, encoding
        )
        for i in range(40)
    ]
    rendered = build(tail, counter, encoding)
    assert estimate(rendered) == direct_count(rendered, counter, encoding)


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_tool_heavy_conversations_are_estimated_within_one_percent(
    counter: TiktokenCounter, encoding: str
) -> None:
    tail: list[Message] = []
    for i in range(12):
        call = ToolCall(f"c{i}", "search_hotels", {"city": "Kyoto", "max_price": 25000 + i, "near": "Gion"})
        result = ToolResult(
            f"c{i}", {"hotels": [{"name": f"Hotel {j}", "price": 14500 + j} for j in range(5)]}
        )
        tail.append(stored(len(tail) + 1, NewMessage(Role.USER, TEXTS[i % 5]), counter, encoding))
        tail.append(
            stored(len(tail) + 1, NewMessage(Role.ASSISTANT, "", tool_calls=(call,)), counter, encoding)
        )
        tail.append(stored(len(tail) + 1, NewMessage(Role.TOOL, "", tool_result=result), counter, encoding))
    rendered = build(tail, counter, encoding)
    exact, estimated = direct_count(rendered, counter, encoding), estimate(rendered)
    assert abs(estimated - exact) / exact <= 0.01, (estimated, exact)
