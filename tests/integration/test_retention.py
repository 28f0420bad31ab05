"""Retention over a real database: past its agent's TTL a closed episode is soft-deleted
(invisible to reads and search, vectors out of the index), then purged after the grace
period; open episodes and agents without a TTL are kept; sweeps work in batches."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select

from episodic.domain.agents import AgentDraft, MemoryDraft
from episodic.domain.model import NewMessage, Role
from episodic.domain.ports.episodes import EpisodeFilter
from episodic.domain.recall import Scope, SearchMode
from episodic.errors import NotFound
from episodic.service.recall import SearchRequest
from episodic.store import schema
from episodic.store.retention import SqlRetention, effective_days
from episodic.workers.retention import RetentionJob
from tests.conftest import unique
from tests.integration.conftest import Stack

T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)


@pytest.fixture
def stack(fresh_stack: Stack) -> Stack:
    """The retention job serves every tenant: each test sweeps a database of its own."""
    return fresh_stack


async def agent_with(stack: Stack, retention_days: int) -> str:
    agent_id = unique("agent")
    memory = MemoryDraft(retention_days=retention_days)
    await stack.services.agents.create_agent(stack.caller, AgentDraft(agent_id, model="gpt-4", memory=memory))
    return agent_id


async def episode(stack: Stack, agent_id: str, user: str, *, close: bool) -> str:
    opened, _ = await stack.services.episodes.open_episode(
        stack.caller, agent_id=agent_id, user_id=user, started_at=T0 - timedelta(hours=1)
    )
    text = NewMessage(Role.USER, "I adopted a cat called Miso last spring")
    await stack.services.episodes.add_message(stack.caller, opened.episode_id, text)
    if close:
        await stack.services.episodes.close_episode(stack.caller, opened.episode_id, ended_at=T0)
    return opened.episode_id


def job(stack: Stack, now: list[datetime], caps: dict[str, int] | None = None) -> RetentionJob:
    return RetentionJob(
        store=SqlRetention(stack.database, stack.writer, caps or {}), changes=stack.app.state.visibility,
        clock=lambda: now[0], grace=timedelta(days=7), batch=1,
    )  # fmt: skip


async def digest_all(stack: Stack) -> None:
    while await stack.app.workers.digester.run_once():
        pass


async def rows(stack: Stack, table: str, episode_id: str) -> int:
    t = schema.metadata.tables[table]
    stmt = select(func.count()).where(t.c.tenant_id == stack.caller.tenant_id, t.c.episode_id == episode_id)
    return int(await stack.database.read(lambda conn: conn.execute(stmt).scalar_one()))


async def test_expired_episodes_are_soft_deleted_then_purged_and_others_kept(stack: Stack) -> None:
    short, forever = await agent_with(stack, 1), await agent_with(stack, 0)
    user = unique("user")
    expired = [await episode(stack, short, user, close=True) for _ in range(3)]
    still_open = await episode(stack, short, user, close=False)
    kept = await episode(stack, forever, user, close=True)
    await digest_all(stack)
    scope = Scope(stack.caller.tenant_id, short, user)
    await stack.services.recall.index.ensure(scope)  # resident: the soft delete must take them out
    assert stack.services.recall.index.keys(scope)
    now = [T0 + timedelta(hours=12)]
    retention = job(stack, now)
    await retention.sweep()  # not due yet
    for episode_id in expired:
        assert (await stack.services.episodes.get_episode(stack.caller, episode_id)).episode_id == episode_id

    now[0] = T0 + timedelta(days=2)
    swept = await retention.sweep()  # batches of 1: a round each
    # Counts are lower bounds and the rows themselves are checked (the job serves every
    # tenant; the database is this test's own).
    assert swept.soft_deleted >= 3 and swept.vectors_removed > 0
    assert not stack.services.recall.index.keys(scope)
    for episode_id in expired:
        with pytest.raises(NotFound):
            await stack.services.episodes.get_episode(stack.caller, episode_id)
        assert await rows(stack, "episodes", episode_id) == 1  # soft: still in SQL, awaiting purge
    listed = await stack.services.episodes.list_episodes(stack.caller, EpisodeFilter(user_id=user), 50, "")
    assert {e.episode_id for e in listed.items} == {still_open, kept}
    found = await stack.services.recall.search(stack.caller, SearchRequest(short, user, SearchMode.RECENCY))
    assert not found.snippets and found.pending_digests == 0

    now[0] = T0 + timedelta(days=2 + 8)
    assert (await retention.sweep()).purged >= 3
    for episode_id in expired:
        assert (
            await rows(stack, "episodes", episode_id) == 0 and await rows(stack, "messages", episode_id) == 0
        )
    assert (await stack.services.episodes.get_episode(stack.caller, kept)).episode_id == kept
    assert (await stack.services.episodes.get_episode(stack.caller, still_open)).episode_id == still_open


async def test_a_soft_deleted_episode_refuses_appends_and_context(stack: Stack) -> None:
    agent_id, user = await agent_with(stack, 1), unique("user")
    episode_id = await episode(stack, agent_id, user, close=True)
    await job(stack, [T0 + timedelta(days=2)]).sweep()
    with pytest.raises(NotFound):
        await stack.services.episodes.add_message(stack.caller, episode_id, NewMessage(Role.USER, "hi"))
    with pytest.raises(NotFound):
        await stack.services.episodes.list_messages(stack.caller, episode_id, 10, "")


async def test_a_tenant_cap_limits_even_agents_that_keep_forever(stack: Stack) -> None:
    forever, user = await agent_with(stack, 0), unique("user")
    episode_id = await episode(stack, forever, user, close=True)
    capped = job(stack, [T0 + timedelta(days=2)], {stack.caller.tenant_id: 1})
    await job(stack, [T0 + timedelta(days=2)]).sweep()  # no cap: the agent keeps it
    with_no_cap = await stack.services.episodes.get_episode(stack.caller, episode_id)
    assert with_no_cap.episode_id == episode_id  # an agent with 0 keeps it without a cap
    assert (await capped.sweep()).soft_deleted >= 1
    with pytest.raises(NotFound):
        await stack.services.episodes.get_episode(stack.caller, episode_id)


def test_the_effective_ttl_is_the_agents_capped_by_its_tenants() -> None:
    assert [effective_days(a, t) for a, t in ((90, 0), (90, 30), (10, 30), (0, 30), (0, 0))] == [
        90,
        30,
        10,
        30,
        0,
    ]
