"""The working set over a real database: rebuilt after a restart from the latest summary
plus the messages after its span (counted), kept current by delta reads, bounded by bytes,
flat in conversation length; LLM compaction runs in the background."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Sequence
from typing import Any

from episodic.domain.agents import AgentDraft, MemoryDraft
from episodic.domain.context import Compaction, ModelCall, Section
from episodic.domain.earlier import MAX_MESSAGES as EARLIER_MESSAGES
from episodic.domain.model import Message, NewMessage, Role
from episodic.domain.ports.episodes import ContextSources, ContextStore
from episodic.domain.recall import DigestText
from episodic.service.compaction import SummaryMaker
from episodic.service.context import ContextRequest, ContextService
from episodic.state.working_set import WorkingSetCache
from episodic.tokens import TiktokenCounter
from episodic.workers.compactor import BackgroundCompactor
from tests.conftest import unique
from tests.integration.conftest import Stack

LINES = [
    "I am planning a trip to Kyoto in April with my sister.",
    "Cherry blossoms usually peak in early April, so book early.",
    "We want a quiet hotel near Gion for under 25000 yen a night.",
    "Gion Hatanaka and Sakura Terrace both fit; Sakura Terrace is cheaper.",
]


class CountingStore:
    """The real store, recording what each working-set read brought back."""

    def __init__(self, inner: ContextStore) -> None:
        self.inner = inner
        self.reads: list[ContextSources] = []

    async def sources(self, *args: Any) -> ContextSources:
        found = await self.inner.sources(*args)
        self.reads.append(found)
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def conversation(stack: Stack, messages: int, budget: int = 600) -> str:
    agent_id = unique("agent")
    memory = MemoryDraft(max_working_memory_tokens=budget)
    await stack.services.agents.create_agent(stack.caller, AgentDraft(agent_id, model="gpt-4", memory=memory))
    episode, _ = await stack.services.episodes.open_episode(stack.caller, agent_id=agent_id, user_id="u1")
    batch = [NewMessage(Role.USER if i % 2 == 0 else Role.ASSISTANT, LINES[i % 4]) for i in range(messages)]
    for start in range(0, messages, 500):
        await stack.services.episodes.add_messages(
            stack.caller, episode.episode_id, batch[start : start + 500]
        )
    return episode.episode_id


def restarted(stack: Stack, max_bytes: int = 64 << 20) -> tuple[ContextService, CountingStore]:
    """A service as after a restart: same database, empty working-set cache."""
    store = CountingStore(stack.services.context.store)
    service = dataclasses.replace(stack.services.context, store=store, cache=WorkingSetCache(max_bytes))
    return service, store


async def turn(service: ContextService, stack: Stack, episode_id: str, text: str = "What next?") -> ModelCall:
    call, _ = await service.build(stack.caller, ContextRequest(episode_id, user_message=text))
    return call


async def test_a_restart_rebuilds_from_the_latest_summary_and_the_messages_after_it(stack: Stack) -> None:
    episode_id = await conversation(stack, 2000)
    before = await turn(stack.services.context, stack, episode_id)
    assert before.report.compaction is Compaction.SUMMARIZED
    through = before.report.summary_span.to_seq
    service, store = restarted(stack)
    after = await turn(service, stack, episode_id)
    (read,) = store.reads
    assert read.summary is not None and read.summary.to_seq == through
    assert [m.seq for m in read.messages] == list(range(through + 1, 2001))
    assert len(read.messages) < 100  # of 2000 in the log
    assert after.messages == before.messages  # the rebuilt working set renders the same context


async def test_messages_appended_between_turns_arrive_in_one_delta_read(stack: Stack) -> None:
    episode_id = await conversation(stack, 10)
    service, store = restarted(stack)
    await turn(service, stack, episode_id)
    added, _ = await stack.services.episodes.add_message(
        stack.caller, episode_id, NewMessage(Role.USER, "new")
    )
    call = await turn(service, stack, episode_id)
    assert [m.seq for m in store.reads[-1].messages] == [added.seq]
    history = [m for m in call.messages if m.section is Section.HISTORY]
    assert history[-1].content == "new"


async def test_the_working_set_stays_flat_as_the_conversation_grows(stack: Stack) -> None:
    """The tail is bounded by tokens; the compacted messages held for recall inside the
    episode by count (domain/earlier.py MAX_MESSAGES): past that bound a longer log holds no
    more."""
    sizes = []
    for length in (EARLIER_MESSAGES, 2 * EARLIER_MESSAGES, 4 * EARLIER_MESSAGES):
        episode_id = await conversation(stack, length)
        service, _ = restarted(stack)
        await turn(service, stack, episode_id)
        sizes.append(service.cache.total_bytes)
    assert max(sizes[1:]) <= 1.05 * sizes[0], sizes  # a 4x longer log, no larger a working set


async def test_least_recently_used_working_sets_are_evicted_by_bytes(stack: Stack) -> None:
    first, second = await conversation(stack, 40, budget=4000), await conversation(stack, 40, budget=4000)
    service, store = restarted(stack, max_bytes=10_000)  # one set of ~7,000 bytes, not two
    rendered = await turn(service, stack, first)
    await turn(service, stack, second)
    assert len(service.cache) == 1 and service.cache.total_bytes <= 10_000
    again = await turn(service, stack, first)  # evicted: rebuilt from SQL
    assert len(store.reads[-1].messages) == 40
    assert again.messages == rendered.messages


class BlockingSummarizer:
    """An 'LLM' that answers only when released, to show turns do not wait for it."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def summarize(self, transcript: Sequence[Message]) -> DigestText:
        self.calls += 1
        assert self.release.wait(30)
        return DigestText("They planned a Kyoto trip in April.", ("Budget under 25000 yen",))


async def test_an_llm_summary_is_made_in_the_background_while_turns_go_on(stack: Stack) -> None:
    episode_id = await conversation(stack, 300)
    llm = BlockingSummarizer()
    service, _ = restarted(stack)
    maker = SummaryMaker(tokens=TiktokenCounter(), clock=service.calls.clock)
    compactor = BackgroundCompactor(summarizer=llm, maker=maker, store=service.store, cache=service.cache)
    service = dataclasses.replace(
        service, compaction=dataclasses.replace(service.compaction, background=compactor)
    )
    first = await turn(service, stack, episode_id)  # returns while the summarizer is blocked
    assert first.report.compaction is Compaction.SCHEDULED and first.report.pruned > 0
    assert not any(m.section is Section.SUMMARY for m in first.messages)
    second = await turn(service, stack, episode_id)
    assert second.report.compaction is Compaction.SCHEDULED and llm.calls == 1  # one at a time
    llm.release.set()
    while compactor.in_flight:  # noqa: ASYNC110 - until its task table empties, new ones too
        await asyncio.sleep(0.01)
    third = await turn(service, stack, episode_id)
    summary = [m for m in third.messages if m.section is Section.SUMMARY]
    assert summary and "Kyoto trip in April" in summary[0].content
    assert third.report.compaction is Compaction.NONE


async def test_after_a_restart_the_compacted_messages_are_read_with_the_working_set_and_recalled(
    stack: Stack,
) -> None:
    """Recall inside the episode is derived from SQL: the one cold read brings what the
    summary covers too, and the first turn after the restart finds it."""
    episode_id = await conversation(stack, 4, budget=250)
    named = NewMessage(Role.USER, "My cat is called Zanzibar.")
    await stack.services.episodes.add_messages(stack.caller, episode_id, [named])
    batch = [NewMessage(Role.USER if i % 2 == 0 else Role.ASSISTANT, LINES[i % 4]) for i in range(60)]
    await stack.services.episodes.add_messages(stack.caller, episode_id, batch)
    compacted = await turn(stack.services.context, stack, episode_id)
    assert compacted.report.compaction is Compaction.SUMMARIZED and compacted.report.summary_span.to_seq > 5
    service, store = restarted(stack)
    after = await turn(service, stack, episode_id, "Who looks after my cat?")
    (read,) = store.reads
    assert 5 in [m.seq for m in read.earlier] and all(m.seq <= read.messages[0].seq for m in read.earlier)
    earlier = [m for m in after.messages if m.section is Section.EARLIER]
    assert len(earlier) == 1 and "Zanzibar" in earlier[0].content
    assert any(5 in p.seqs for p in after.report.earlier)
