"""A write declares the changes it makes, and the writer inserts their feed rows in the
write's own transaction (or savepoint), whatever path runs it: one operation, or an item of
a bulk operation. So a declared write on one replica always reaches the others, and a
write that is refused or rolled back leaves no row behind."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Connection, select, update

from episodic.domain.agents import AgentDraft
from episodic.domain.changes import Change, Declared, EpisodesRemoved, Recorded
from episodic.domain.recall import Scope
from episodic.errors import NotFound
from episodic.store import schema
from episodic.store.writer import Outcome
from tests.conftest import unique
from tests.integration.conftest import Stack
from tests.integration.test_change_feed import (
    closed_and_digested,
    feed_rows,
    found,
    two_replicas,
    within_deadline,
)

E = schema.episodes


class Retire:
    """A bulk operation: soft-deletes episodes as retention does, one outcome per item (a
    missing episode is refused alone); `then_fail` makes the whole run raise after writing."""

    def __init__(self, *, then_fail: bool = False) -> None:
        self.then_fail = then_fail

    def run_all(self, conn: Connection, items: Sequence[Any]) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for scope, episode_id in items:
            stmt = update(E).where(
                E.c.tenant_id == scope.tenant_id, E.c.episode_id == episode_id, E.c.deleted_at.is_(None)
            )
            if conn.execute(stmt.values(deleted_at=datetime.now(UTC))).rowcount:
                outcomes.append((True, (scope, episode_id)))
            else:
                outcomes.append((False, NotFound("episode", episode_id)))
        if self.then_fail:
            raise RuntimeError("the bulk operation failed after writing")
        return outcomes


def removed(item: tuple[Scope, str]) -> list[Change]:
    return [EpisodesRemoved([item])]


async def retire_through_the_bulk_path(stack: Stack, bulk: Retire, scope: Scope, episode_id: str) -> None:
    """The bulk path under the change owner, as a service would use it."""
    await stack.app.state.visibility.commit(
        lambda declared: stack.writer.run_bulk(bulk, (scope, episode_id), declared), removed
    )


async def closed_episode(stack: Stack, agent_id: str) -> str:
    """Closed, as retention finds them (an open one soft-deleted would trouble the idle reaper
    of tests sharing the database)."""
    episode, _ = await stack.services.episodes.open_episode(stack.caller, agent_id=agent_id, user_id="u1")
    await stack.services.episodes.close_episode(stack.caller, episode.episode_id)
    return episode.episode_id


async def deleted(stack: Stack, tenant_id: str, episode_id: str) -> bool:
    stmt = select(E.c.deleted_at).where(E.c.tenant_id == tenant_id, E.c.episode_id == episode_id)
    return await stack.database.read(lambda conn: conn.scalar(stmt)) is not None


async def test_a_change_written_through_the_bulk_path_reaches_the_other_replica(postgres_url: str) -> None:
    async with two_replicas(postgres_url) as (a, b):
        agent = unique("agent")
        await a.services.agents.create_agent(a.caller, AgentDraft(agent))
        scope = Scope(a.caller.tenant_id, agent, "mary")
        episode = await closed_and_digested(a, agent, "mary", "Mary adopted a greyhound called Pixel")
        assert episode in await found(b, agent, "mary", "greyhound")  # B holds the scope's vectors
        assert b.app.state.index.keys(scope)

        await retire_through_the_bulk_path(a, Retire(), scope, episode)

        assert not a.app.state.index.keys(scope)  # applied here

        async def b_dropped_it() -> bool:
            return not b.app.state.index.keys(scope)

        await within_deadline(b_dropped_it, "B dropped the vectors A removed through the bulk path")
        assert await feed_rows(a, a.caller.tenant_id) == [
            "scope_changed",
            "episode_vectors",
            "episodes_removed",
        ]


async def test_the_bulk_path_writes_declared_rows_in_the_items_transaction_only(stack: Stack) -> None:
    tenant = stack.caller.tenant_id
    agent = await stack.new_agent()
    scope = Scope(tenant, agent, "u1")
    kept = await closed_episode(stack, agent)
    before = await feed_rows(stack, tenant)

    with pytest.raises(RuntimeError, match="after writing"):  # rolled back: the write and its rows
        await retire_through_the_bulk_path(stack, Retire(then_fail=True), scope, kept)
    assert not await deleted(stack, tenant, kept)
    assert await feed_rows(stack, tenant) == before == ["scope_changed"]  # the close's

    with pytest.raises(NotFound):  # refused: nothing written, nothing recorded
        await retire_through_the_bulk_path(stack, Retire(), scope, "ep_missing")
    assert await feed_rows(stack, tenant) == before

    await retire_through_the_bulk_path(stack, Retire(), scope, kept)
    assert await deleted(stack, tenant, kept)
    assert await feed_rows(stack, tenant) == [*before, "episodes_removed"]


def retiring(
    scope: Scope, episode_id: str, *, then_fail: bool = False
) -> Callable[[Connection], tuple[Scope, str]]:
    """The same write as one operation."""

    def op(conn: Connection) -> tuple[Scope, str]:
        ((ok, _),) = Retire(then_fail=then_fail).run_all(conn, [(scope, episode_id)])
        assert ok
        return scope, episode_id

    return op


async def test_one_declared_operation_and_its_rows_commit_or_roll_back_together(stack: Stack) -> None:
    tenant = stack.caller.tenant_id
    agent = await stack.new_agent()
    scope = Scope(tenant, agent, "u1")
    kept, lost = [await closed_episode(stack, agent) for _ in range(2)]
    declared = Declared(removed, "this-test")

    done, failed = await asyncio.gather(  # likely one batch: the failure is isolated in a savepoint
        stack.writer.run(retiring(scope, kept), declared),
        stack.writer.run(retiring(scope, lost, then_fail=True), declared),
        return_exceptions=True,
    )

    assert isinstance(failed, RuntimeError)
    assert isinstance(done, Recorded) and done.in_feed
    assert done.changes == [EpisodesRemoved([(scope, kept)])]
    assert await deleted(stack, tenant, kept) and not await deleted(stack, tenant, lost)
    c = schema.changes
    stmt = select(c.c.body, c.c.origin).where(c.c.tenant_id == tenant, c.c.kind == "episodes_removed")
    ((body, origin),) = await stack.database.read(lambda conn: conn.execute(stmt).all())
    assert kept in body and lost not in body and origin == "this-test"
