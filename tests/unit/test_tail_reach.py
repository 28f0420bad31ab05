"""A working set reads only the newest messages TailReach asks for (a big import stays in
SQL): the context it renders must be the one the whole log would render."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from episodic.domain.assembly import assemble
from episodic.domain.model import Message, Role
from episodic.domain.reducers import STUB_TOKENS_FLOOR, TailReach, stub_text
from episodic.tokens import TiktokenCounter
from tests.unit.test_context_assembly import chat, inputs, tool_exchange

COUNTER = TiktokenCounter()


def count(text: str) -> int:
    return COUNTER.count(text, "cl100k_base")


def test_the_stub_floor_is_below_every_stub() -> None:
    for encoding in ("cl100k_base", "o200k_base"):
        stubs = [
            stub_text(name, ok, seq) for name in ("", "x") for ok in (True, False) for seq in (1, 10**12)
        ]
        assert min(COUNTER.count(s, encoding) for s in stubs) >= STUB_TOKENS_FLOOR


def newest_reached(log: list[Message], allowance: int) -> list[Message]:
    reach = TailReach(allowance)
    for start in range(len(log) - 1, -1, -1):
        if reach.reached_with(log[start]):
            return log[start:]
    return log


def conversation_of(parts: list[tuple[bool, int]]) -> list[Message]:
    """(tool exchange?, size) pieces, numbered from seq 1."""
    log: list[Message] = []
    for i, (is_tool, size) in enumerate(parts):
        log += tool_exchange(0, f"c{i}", size=size) if is_tool else chat(1, size)
    return [_renumbered(m, i + 1) for i, m in enumerate(log)]


def _renumbered(m: Message, seq: int) -> Message:
    return Message(
        m.episode_id, seq, m.role, m.content, len(m.content.split()), m.token_encoding, m.created_at,
        tool_calls=m.tool_calls, tool_result=m.tool_result,
    )  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(
    parts=st.lists(st.tuples(st.booleans(), st.integers(1, 1500)), min_size=1, max_size=60),
    budget=st.integers(200, 6000),
    keep=st.integers(0, 3),
)
def test_the_newest_messages_a_reach_holds_render_as_the_whole_log_does(
    parts: list[tuple[bool, int]], budget: int, keep: int
) -> None:
    log = conversation_of(parts)
    held = newest_reached(log, budget)
    whole = assemble(inputs(log, budget=budget, ceiling=100_000, keep_tool_results=keep), count)
    part = assemble(
        inputs(held, budget=budget, ceiling=100_000, keep_tool_results=keep, held_after=held[0].seq - 1),
        count,
    )
    assert part.messages == whole.messages
    assert part.compact_through == whole.compact_through
    assert part.pruned == whole.pruned
    assert held[0].role is not Role.TOOL
