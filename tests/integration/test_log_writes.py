"""What the log keeps: atomic batches, tool call records, durable acknowledgements."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from episodic.domain.model import CloseReason, NewMessage, Role, ToolCall, ToolResult
from episodic.errors import FailedPrecondition, NotFound
from episodic.store import schema
from episodic.store.database import open_database
from tests.integration.conftest import Stack


async def test_a_batch_with_one_bad_message_stores_nothing(stack: Stack) -> None:
    episode_id = await stack.new_episode()
    batch = [
        NewMessage(Role.USER, "fine"),
        NewMessage(Role.TOOL, "", tool_result=ToolResult("never-issued")),
    ]
    with pytest.raises(FailedPrecondition):
        await stack.services.episodes.add_messages(stack.caller, episode_id, batch)
    page = await stack.services.episodes.list_messages(stack.caller, episode_id, 10, "")
    assert page.items == []
    assert (await stack.services.episodes.get_episode(stack.caller, episode_id)).message_count == 0


async def test_tool_calls_are_recorded_with_their_results(stack: Stack) -> None:
    episode_id = await stack.new_episode()
    called = datetime(2026, 1, 1, 12, tzinfo=UTC)
    await stack.services.episodes.add_messages(
        stack.caller,
        episode_id,
        [
            NewMessage(Role.ASSISTANT, "", tool_calls=(ToolCall("c1", "lookup", {"q": "leave"}),)),
            NewMessage(
                Role.TOOL,
                "",
                tool_result=ToolResult("c1", {"days": 12}, True, "", called, timedelta(milliseconds=250)),
            ),
        ],
    )
    t = schema.tool_calls
    async with stack.database.engine.connect() as conn:
        row = (await conn.execute(select(t).where(t.c.episode_id == episode_id))).mappings().one()
    assert (row["tool_name"], row["input"], row["output"]) == ("lookup", {"q": "leave"}, {"days": 12})
    assert (row["succeeded"], row["call_seq"], row["result_seq"]) == (True, 1, 2)
    assert row["called_at"] == called and row["duration_seconds"] == pytest.approx(0.25)


async def test_an_acknowledged_message_is_visible_to_a_fresh_connection(stack: Stack) -> None:
    episode_id = await stack.new_episode()
    await stack.services.episodes.add_message(stack.caller, episode_id, NewMessage(Role.USER, "durable"))
    fresh = open_database(stack.database.url.render_as_string(hide_password=False))
    try:
        m = schema.messages
        async with fresh.engine.connect() as conn:
            contents = (await conn.execute(select(m.c.content).where(m.c.episode_id == episode_id))).scalars()
            assert list(contents) == ["durable"]
    finally:
        await fresh.dispose()


async def test_one_failing_write_does_not_fail_the_others_committed_with_it(stack: Stack) -> None:
    episode_id = await stack.new_episode()
    good = [
        stack.services.episodes.add_message(stack.caller, episode_id, NewMessage(Role.USER, f"ok {i}"))
        for i in range(10)
    ]
    bad = stack.services.episodes.add_message(stack.caller, "ep-missing", NewMessage(Role.USER, "x"))
    results = await asyncio.gather(*good, bad, return_exceptions=True)
    assert isinstance(results[-1], NotFound)
    assert sorted(r[0].seq for r in results[:-1]) == list(range(1, 11))  # type: ignore[index]


async def test_another_tenant_cannot_see_or_touch_an_episode(stack: Stack) -> None:
    from episodic.domain.model import Caller

    episode_id = await stack.new_episode()
    stranger = Caller("someone-else")
    episodes = stack.services.episodes
    with pytest.raises(NotFound):
        await episodes.get_episode(stranger, episode_id)
    with pytest.raises(NotFound):
        await episodes.add_message(stranger, episode_id, NewMessage(Role.USER, "x"))
    with pytest.raises(NotFound):
        await episodes.close_episode(stranger, episode_id, reason=CloseReason.USER_ENDED)
    with pytest.raises(NotFound):
        await episodes.list_messages(stranger, episode_id, 10, "")


async def test_appends_to_a_closed_episode_fail_alone_amid_committed_ones(stack: Stack) -> None:
    open_id, closed_id = await stack.new_episode(), await stack.new_episode()
    await stack.services.episodes.close_episode(stack.caller, closed_id)
    episodes = stack.services.episodes
    calls = [
        episodes.add_message(stack.caller, open_id if i % 2 else closed_id, NewMessage(Role.USER, f"m{i}"))
        for i in range(20)
    ]
    results = await asyncio.gather(*calls, return_exceptions=True)
    refused = [r for r in results if isinstance(r, FailedPrecondition)]
    stored = [r for r in results if isinstance(r, tuple)]
    assert len(refused) == 10 and sorted(m.seq for m, _ in stored) == list(range(1, 11))
    assert (await episodes.get_episode(stack.caller, closed_id)).message_count == 0
