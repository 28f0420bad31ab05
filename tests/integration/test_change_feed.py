"""Two replicas (two wired apps) on one PostgreSQL database: what one commits reaches the
other's indexes and caches through the change feed, which is written in the writing
transaction, read in order, refused (never skipped) when it cannot be read, and reloaded
from scratch when a replica's position was pruned."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from sqlalchemy import delete, func, select

from episodic.domain.agents import AgentDraft
from episodic.domain.model import Caller, NewMessage, Role
from episodic.domain.recall import Scope, SearchMode
from episodic.errors import NotFound
from episodic.service.context import ContextRequest
from episodic.service.recall import SearchRequest
from episodic.store import schema
from episodic.store.feed import PRUNED
from tests.conftest import unique
from tests.integration.conftest import Stack, stack_on
from tests.polling import eventually

DEADLINE = 15.0  # seconds: a loaded 2-core machine; the latency itself is measured by the lab


async def within_deadline(check: Callable[[], Awaitable[bool]], what: str) -> None:
    assert await eventually(check, DEADLINE), f"not within {DEADLINE} s: {what}"


@asynccontextmanager
async def two_replicas(url: str) -> AsyncIterator[tuple[Stack, Stack]]:
    caller = Caller(unique("tenant"))
    async with stack_on(url, caller) as a, stack_on(url, caller) as b:
        yield a, b


async def closed_and_digested(stack: Stack, agent_id: str, user_id: str, words: str) -> str:
    episodes = stack.services.episodes
    episode, _ = await episodes.open_episode(stack.caller, agent_id=agent_id, user_id=user_id)
    for role, text in ((Role.USER, words), (Role.ASSISTANT, f"Noted: {words}")):
        await episodes.add_message(stack.caller, episode.episode_id, NewMessage(role, text))
    await episodes.close_episode(stack.caller, episode.episode_id)
    while await stack.app.workers.digester.run_once():
        pass
    return episode.episode_id


async def found(stack: Stack, agent_id: str, user_id: str, query: str) -> list[str]:
    request = SearchRequest(agent_id, user_id, SearchMode.SEMANTIC, query, top_k=5)
    result = await stack.services.recall.search(stack.caller, request)
    return [snippet.episode_id for snippet in result.snippets]


async def feed_rows(stack: Stack, tenant_id: str) -> list[str]:
    c = schema.changes
    stmt = select(c.c.kind).where(c.c.tenant_id == tenant_id).order_by(c.c.seq)
    return list(await stack.database.read(lambda conn: conn.execute(stmt).scalars().all()))


pytestmark = pytest.mark.usefixtures("postgres_url")


async def test_a_digest_made_on_one_replica_is_found_by_the_others_semantic_search(postgres_url: str) -> None:
    async with two_replicas(postgres_url) as (a, b):
        agent = unique("agent")
        await a.services.agents.create_agent(a.caller, AgentDraft(agent))
        assert await found(b, agent, "mary", "cello lessons") == []  # B holds the scope now
        episode = await closed_and_digested(a, agent, "mary", "Mary starts cello lessons on Monday")

        async def b_finds_it() -> bool:
            return episode in await found(b, agent, "mary", "cello lessons")

        await within_deadline(b_finds_it, "B's resident scope refreshed with A's digest")
        assert b.app.state.tail.applied > 0


async def test_an_erasure_on_one_replica_leaves_nothing_in_the_others_index_or_feed(
    postgres_url: str,
) -> None:
    async with two_replicas(postgres_url) as (a, b):
        agent, user = unique("agent"), unique("erased-user")
        await a.services.agents.create_agent(a.caller, AgentDraft(agent))
        await closed_and_digested(a, agent, user, "My locker code is 4711")
        before = await b.services.index_checker.check(b.caller, agent)
        assert before.index_vectors > 0 and (before.missing, before.orphaned) == (0, 0)  # B loaded it

        await b.services.erasure.erase_user(b.caller, user, agent)

        async def a_holds_none() -> bool:
            report = await a.services.index_checker.check(a.caller, agent)
            return (report.index_vectors, report.missing, report.orphaned) == (0, 0, 0)

        await a.services.recall.index.ensure(Scope(a.caller.tenant_id, agent, user))
        await within_deadline(a_holds_none, "A dropped the erased user's vectors")
        c = schema.changes
        bodies = await a.database.read(
            lambda conn: (
                conn.execute(select(c.c.body).where(c.c.tenant_id == a.caller.tenant_id)).scalars().all()
            )
        )
        assert bodies and not any(user in body for body in bodies)  # no feed row names the user


async def test_feed_rows_are_written_by_the_writes_transaction_only(postgres_url: str) -> None:
    async with two_replicas(postgres_url) as (a, _):
        agent = unique("agent")
        await a.services.agents.create_agent(a.caller, AgentDraft(agent))
        episode, _ = await a.services.episodes.open_episode(a.caller, agent_id=agent, user_id="u")
        with pytest.raises(NotFound):
            await a.services.episodes.close_episode(a.caller, "ep_missing")
        assert await feed_rows(a, a.caller.tenant_id) == []  # a refused write records nothing
        await a.services.episodes.close_episode(a.caller, episode.episode_id)
        assert await feed_rows(a, a.caller.tenant_id) == ["scope_changed"]


async def test_a_row_of_a_newer_release_stops_the_tail_and_health_says_so(postgres_url: str) -> None:
    async with two_replicas(postgres_url) as (a, b):
        c = schema.changes
        row = {"version": 99, "kind": "from_the_future", "tenant_id": a.caller.tenant_id, "body": "{}"}
        await a.writer.run(lambda conn: conn.execute(c.insert().values(**row, origin="newer")))
        await within_deadline(async_true(lambda: not b.app.state.health.healthy), "B reports NOT_SERVING")
        stuck = b.app.state.tail.position
        assert "format 99" in b.app.state.tail.refused
        agent = unique("agent")
        await a.services.agents.create_agent(a.caller, AgentDraft(agent))
        await a.services.agents.update_agent(a.caller, AgentDraft(agent, model="gpt-4o-mini"), ["model"])
        await asyncio.sleep(3 * b.app.settings.feed_poll_seconds)
        assert b.app.state.tail.position == stuck  # never skipped
        await a.writer.run(lambda conn: conn.execute(delete(c).where(c.c.origin == "newer")))
        await within_deadline(
            async_true(lambda: b.app.state.health.healthy), "B serves again once it can read"
        )
        assert b.app.state.tail.position > stuck


async def test_a_replica_whose_position_was_pruned_reloads_every_scope(postgres_url: str) -> None:
    async with two_replicas(postgres_url) as (a, b):
        agent = unique("agent")
        await a.services.agents.create_agent(a.caller, AgentDraft(agent))
        episode = await closed_and_digested(a, agent, "mary", "Mary adopted a greyhound called Pixel")
        assert episode in await found(b, agent, "mary", "greyhound")
        scope = Scope(a.caller.tenant_id, agent, "mary")
        assert resident(b, scope)
        marks = schema.feed_marks
        head = int(
            await a.database.read(lambda conn: conn.scalar(select(func.max(schema.changes.c.seq)))) or 0
        )
        try:
            await a.writer.run(lambda conn: conn.execute(marks.insert().values(name=PRUNED, seq=head + 10)))
            await within_deadline(
                async_true(lambda: b.app.state.tail.resyncs > 0), "B noticed the pruned position"
            )
            assert not resident(b, scope)
            assert episode in await found(b, agent, "mary", "greyhound")  # loaded again from SQL
        finally:
            await a.writer.run(lambda conn: conn.execute(delete(marks).where(marks.c.name == PRUNED)))


def resident(stack: Stack, scope: Scope) -> bool:
    return scope in stack.app.state.index.resident()


def async_true(check: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def checked() -> bool:
        return check()

    return checked


async def test_an_erasure_elsewhere_drops_only_the_erased_users_working_sets(postgres_url: str) -> None:
    async with two_replicas(postgres_url) as (a, b):
        agent = unique("agent")
        await a.services.agents.create_agent(a.caller, AgentDraft(agent))
        held: dict[str, str] = {}
        for user in ("gone", "kept"):
            episode, _ = await b.services.episodes.open_episode(b.caller, agent_id=agent, user_id=user)
            await b.services.context.build(b.caller, ContextRequest(episode.episode_id, user_message="hi"))
            held[user] = episode.episode_id
        cache = b.app.state.working_sets
        assert cache.get((b.caller.tenant_id, held["gone"])) and cache.get((b.caller.tenant_id, held["kept"]))

        await a.services.erasure.erase_user(a.caller, "gone", agent)

        async def gone_dropped() -> bool:
            return cache.get((b.caller.tenant_id, held["gone"])) is None

        await within_deadline(gone_dropped, "B dropped the erased user's working set")
        assert cache.get((b.caller.tenant_id, held["kept"])) is not None  # still warm
