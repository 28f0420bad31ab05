"""The inspector's phrase search: bounded by phrase length and by the bytes it reads
(whatever the size of the messages and calls), and so few run at once per tenant that one
tenant's searches cannot hold the database (or every search slot) from the others; on an
ordinary episode, paging changes nothing of the answer."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from typing import Any, cast

import pytest

from episodic.domain.agents import MemoryDraft
from episodic.domain.inspection import PREVIEW_READS, contains, trace_phrase
from episodic.domain.model import Caller, Message, RecallMode
from episodic.domain.shares import OverShare, Share
from episodic.errors import InvalidArgument, ResourceExhausted
from episodic.service.context import ContextRequest
from episodic.service.inspection import (
    FIRST_PAGE,
    MAX_SEARCHES,
    MAX_SEARCHES_PER_TENANT,
    MAX_TRACED_CALLS,
    SEARCH_BYTES,
    SEARCH_SECONDS_BURST,
    SEARCH_SECONDS_PER_SECOND,
    InspectionService,
)
from tests.unit.use_cases import CALLER, TENANT, UseCases, use_cases


class HeldLog:
    """Reads of the log wait until released, so searches stay in flight."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def list_messages(self, *_: object) -> list[Message]:
        await self.release.wait()
        return []

    async def list_calls(self, *_: object) -> list[object]:
        return []

    async def ensure_visible(self, *_: object) -> None:
        return None


def service(log: HeldLog) -> InspectionService:
    nothing = cast(Any, None)
    return InspectionService(
        agents=nothing,
        episodes=cast(Any, log),
        model_calls=nothing,
        knowledge=nothing,
        users=nothing,
        log=cast(Any, log),
        calls=cast(Any, log),
    )


def inspection(app: UseCases, search_bytes: int = SEARCH_BYTES) -> InspectionService:
    """The service as bootstrap wires it, over the fakes."""
    return InspectionService(
        agents=app.agents, episodes=app.episodes, model_calls=app.model_calls, knowledge=app.knowledge,
        users=app.episode_store, log=app.episode_store, calls=app.context_store, search_bytes=search_bytes,
    )  # fmt: skip


class CountingLog:
    """The fake log, counting the bytes of content it hands out."""

    def __init__(self, app: UseCases) -> None:
        self._store = app.episode_store
        self.read = 0

    async def list_messages(self, *args: Any) -> list[Message]:
        page = await self._store.list_messages(*args)
        self.read += sum(len(m.content.encode()) for m in page)
        return page


async def test_a_tenant_running_its_share_of_searches_is_told_to_retry_while_others_still_search() -> None:
    log = HeldLog()
    inspect = service(log)
    busy = Caller("busy-tenant")
    held = [asyncio.create_task(inspect.where(busy, "ep", "cat")) for _ in range(MAX_SEARCHES_PER_TENANT)]
    await asyncio.sleep(0)
    with pytest.raises(ResourceExhausted):
        await inspect.where(busy, "ep", "cat")
    other = asyncio.create_task(inspect.where(Caller("quiet-tenant"), "ep", "cat"))
    log.release.set()
    assert not (await other).trace.messages
    await asyncio.gather(*held)
    assert not (await inspect.where(busy, "ep", "cat")).truncated  # slots are given back


@pytest.mark.parametrize("phrase", ["", "   ", "x" * 1001])
async def test_an_empty_or_overlong_phrase_is_refused_naming_it(phrase: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        await service(HeldLog()).where(Caller("t"), "ep", phrase)
    assert [v.field for v in refused.value.violations] == ["phrase"]


@pytest.mark.parametrize("about", ["", "   ", "x" * 1001])
async def test_why_not_recalled_refuses_an_empty_or_overlong_question_naming_it(about: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        await service(HeldLog()).candidacy(Caller("t"), "mc_1", about)
    assert [v.field for v in refused.value.violations] == ["about"]


# --- fairness ---------------------------------------------------------------------------


async def test_a_third_tenant_searches_while_two_tenants_each_run_their_most() -> None:
    log = HeldLog()
    inspect = service(log)
    held = [
        asyncio.create_task(inspect.where(Caller(tenant), "ep", "cat"))
        for tenant in ("first", "second")
        for _ in range(MAX_SEARCHES_PER_TENANT)
    ]
    await asyncio.sleep(0)
    third = asyncio.create_task(inspect.where(Caller("third"), "ep", "cat"))
    await asyncio.sleep(0)
    assert not third.done()  # admitted: reading, not refused
    log.release.set()
    assert not (await third).truncated
    await asyncio.gather(*held)


async def test_only_many_tenants_fill_the_server_wide_safety_net_and_the_next_is_told_to_retry() -> None:
    log = HeldLog()
    inspect = service(log)
    tenants = MAX_SEARCHES // MAX_SEARCHES_PER_TENANT
    assert tenants > 2
    held = [
        asyncio.create_task(inspect.where(Caller(f"tenant-{n}"), "ep", "cat"))
        for n in range(tenants)
        for _ in range(MAX_SEARCHES_PER_TENANT)
    ]
    await asyncio.sleep(0)
    with pytest.raises(ResourceExhausted) as refused:
        await inspect.where(Caller("one-more"), "ep", "cat")
    assert refused.value.reason == "BUSY" and "retry" in refused.value.message
    log.release.set()
    await asyncio.gather(*held)


# --- a byte budget, whatever the size of messages and calls ------------------------------


async def test_a_search_over_messages_heavier_than_its_budget_stops_there_and_says_truncated() -> None:
    app = use_cases()
    await app.new_agent()
    episode_id = await app.open()
    big = 100 * 1024
    for n in range(30):
        await app.say(episode_id, f"cat {n} " + "x" * big)
    counted = CountingLog(app)
    budget = 1024 * 1024  # the log's half: 5 messages
    inspect = dataclasses.replace(inspection(app, search_bytes=budget), log=cast(Any, counted))
    traced = await inspect.where(CALLER, episode_id, "CAT")
    assert traced.truncated
    assert [m.seq for m in traced.trace.messages] == [26, 27, 28, 29, 30]  # the newest that fit
    assert counted.read <= budget // 2 + FIRST_PAGE * big  # the budget, past it at most one page
    assert all(len(m.content) == PREVIEW_READS for m in traced.trace.messages)  # what a preview reads


async def talk(app: UseCases, turns: int, *, system_prompt: str = "Be brief.", budget: int = 60) -> str:
    """An episode of `turns` turns, a model call each, under a budget small enough that
    early turns are pruned and summarized; "cat" is said on turns 0, 7, 14..."""
    draft = MemoryDraft(recall_mode=RecallMode.NONE, max_working_memory_tokens=budget)
    await app.new_agent(memory=draft, system_prompt=system_prompt)
    episode_id = await app.open()
    for n in range(turns):
        pet = "my cat purrs" if n % 7 == 0 else "the weather"
        await app.say(episode_id, f"turn {n}: {pet} and some more words here", f"reply {n} noted")
        await app.context.build(CALLER, ContextRequest(episode_id, f"question {n}?"))
        app.clock.advance(timedelta(seconds=1))
    return episode_id


async def test_a_search_stops_at_the_budget_on_calls_heavier_than_it() -> None:
    app = use_cases()
    episode_id = await talk(app, 30, system_prompt="y" * 60_000)  # each call renders 60 kB
    traced = await inspection(app, search_bytes=1024 * 1024).where(CALLER, episode_id, "cat")
    calls = (await app.context_store.list_calls(TENANT, episode_id, None, 100))[::-1]
    assert traced.truncated
    assert 0 < len(traced.trace.calls) < 30
    shown = [row.call.model_call_id for row in traced.trace.calls]
    assert shown == [c.model_call_id for c in calls[-len(shown) :]]  # the newest, oldest first


async def test_on_an_ordinary_episode_paging_changes_nothing_of_the_answer() -> None:
    app = use_cases()
    episode_id = await talk(app, 70)  # more calls than one page holds
    traced = await inspection(app).where(CALLER, episode_id, "CAT")
    log = await app.episode_store.list_messages(TENANT, episode_id, None, 1000)
    calls = await app.context_store.list_calls(TENANT, episode_id, None, 1000)
    expected = trace_phrase([m for m in log[::-1] if contains(m, "cat")], calls[::-1], "cat")
    got = traced.trace
    assert not traced.truncated
    assert [(m.seq, m.role, m.content) for m in got.messages] == [
        (m.seq, m.role, m.content) for m in expected.messages
    ]
    assert [(r.call.model_call_id, r.call.report, r.fates) for r in got.calls] == [
        (r.call.model_call_id, r.call.report, r.fates) for r in expected.calls
    ]
    assert got.dropped == expected.dropped and got.dropped  # something was compacted or pruned away


async def test_calls_past_the_most_traced_are_cut_from_the_oldest_and_said_truncated() -> None:
    app = use_cases()
    episode_id = await talk(app, 1)
    [one] = await app.context_store.list_calls(TENANT, episode_id, None, 10)
    for n in range(MAX_TRACED_CALLS):  # copies, later in time
        later = one.created_at + timedelta(seconds=n + 1)
        copy = dataclasses.replace(one, model_call_id=f"mc_copy_{n:03}", created_at=later)
        app.tables.model_calls[(TENANT, copy.model_call_id)] = copy
    traced = await inspection(app).where(CALLER, episode_id, "cat")
    assert traced.truncated
    assert [r.call.model_call_id for r in traced.trace.calls] == [
        f"mc_copy_{n:03}" for n in range(MAX_TRACED_CALLS)
    ]


async def test_a_tenants_searches_are_held_to_their_share_of_time_and_others_are_not() -> None:
    log, now = HeldLog(), [0.0]
    inspect = dataclasses.replace(service(log), timer=lambda: now[0])
    search = asyncio.create_task(inspect.where(Caller("busy"), "ep", "cat"))
    await asyncio.sleep(0)
    now[0] += SEARCH_SECONDS_BURST + 1  # a search that took the whole burst and a second more
    log.release.set()
    await search
    with pytest.raises(OverShare) as refused:
        await inspect.where(Caller("busy"), "ep", "cat")
    assert refused.value.share is Share.SEARCH_TIME
    assert refused.value.retry_after == pytest.approx(1 / SEARCH_SECONDS_PER_SECOND)
    await inspect.where(Caller("other"), "ep", "cat")  # another tenant's time is its own
    now[0] += 1 / SEARCH_SECONDS_PER_SECOND  # the debt is paid
    await inspect.where(Caller("busy"), "ep", "cat")
