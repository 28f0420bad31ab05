"""A cancelled BuildContext does not leave a compaction behind for nobody, nor does its retry
start a second one: one compaction per conversation, shared by whoever needs it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from episodic.domain.model import Agent, Episode, EpisodeState, MemoryConfig, Message, Role
from episodic.domain.recall import DigestText
from episodic.domain.tail import Tail
from episodic.domain.working_set import WorkingSet
from episodic.service.compaction import SharedCompactions, SummaryMaker
from episodic.tokens import TiktokenCounter

NOW = datetime(2025, 1, 1, tzinfo=UTC)
ENCODING = "cl100k_base"


class GatedSummarizer:
    """Summarizes only once released, counting how often it was asked."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def summarize(self, transcript: Sequence[Message]) -> DigestText:
        self.calls += 1
        assert self.release.wait(10)
        return DigestText(f"{len(transcript)} messages about the stream.")


class FailingOnceSummarizer:
    def __init__(self) -> None:
        self.calls = 0

    def summarize(self, transcript: Sequence[Message]) -> DigestText:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("first attempt fails")
        return DigestText("Second attempt.")


def working_set(messages: int, episode_id: str = "ep") -> WorkingSet:
    episode = Episode("t", episode_id, "agent", "user", EpisodeState.OPEN, ENCODING, NOW, NOW)
    agent = Agent("t", "agent", "", "", "gpt-4o", ENCODING, False, MemoryConfig(), NOW, NOW)
    tail = [
        Message(episode_id, seq, Role.USER, "the stream will be cancelled", 5, ENCODING, NOW)
        for seq in range(1, messages + 1)
    ]
    return WorkingSet(episode, agent, None, Tail.of(tail))


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    executor = ThreadPoolExecutor(1)
    yield executor
    executor.shutdown(wait=True, cancel_futures=True)


def compactions(summarizer: object, pool: ThreadPoolExecutor) -> SharedCompactions:
    maker = SummaryMaker(tokens=TiktokenCounter(), clock=lambda: NOW)
    return SharedCompactions(summarizer=summarizer, maker=maker, pool=pool)  # type: ignore[arg-type]


async def until(condition: object) -> None:
    for _ in range(500):
        if callable(condition) and condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


async def test_a_retry_joins_the_compaction_its_cancelled_call_started(pool: ThreadPoolExecutor) -> None:
    summarizer = GatedSummarizer()
    shared = compactions(summarizer, pool)
    key, ws = ("t", "ep"), working_set(6)
    first = asyncio.create_task(shared.summary(key, ws, 4))
    await until(lambda: summarizer.calls == 1)  # running in the pool
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    retry = asyncio.create_task(shared.summary(key, ws, 4))
    await asyncio.sleep(0.05)
    summarizer.release.set()
    summary = await retry
    assert summarizer.calls == 1 and summary.to_seq == 4 and "4 messages" in summary.content
    assert shared.running() == 0


async def test_a_retry_after_the_compaction_finished_takes_its_result(pool: ThreadPoolExecutor) -> None:
    summarizer = GatedSummarizer()
    shared = compactions(summarizer, pool)
    key, ws = ("t", "ep"), working_set(6)
    first = asyncio.create_task(shared.summary(key, ws, 4))
    await until(lambda: summarizer.calls == 1)
    first.cancel()
    summarizer.release.set()
    await until(lambda: shared.running() == 0)
    assert (await shared.summary(key, ws, 4)).to_seq == 4
    assert summarizer.calls == 1


async def test_a_queued_compaction_nobody_waits_for_is_cancelled(pool: ThreadPoolExecutor) -> None:
    summarizer = GatedSummarizer()
    shared = compactions(summarizer, pool)
    busy = asyncio.create_task(shared.summary(("t", "busy"), working_set(3, "busy"), 2))
    await until(lambda: summarizer.calls == 1)  # the pool's one thread is taken
    queued = asyncio.create_task(shared.summary(("t", "ep"), working_set(6), 4))
    await asyncio.sleep(0.05)
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    summarizer.release.set()
    await busy
    await asyncio.sleep(0.05)  # room for the cancelled compaction to start, were it still queued
    await until(lambda: shared.running() == 0)  # the state, waited on
    assert summarizer.calls == 1


async def test_another_span_waits_for_the_running_compaction_so_only_one_runs(
    pool: ThreadPoolExecutor,
) -> None:
    summarizer = GatedSummarizer()
    shared = compactions(summarizer, pool)
    key, ws = ("t", "ep"), working_set(8)
    first = asyncio.create_task(shared.summary(key, ws, 4))
    await until(lambda: summarizer.calls == 1)
    first.cancel()
    wider = asyncio.create_task(shared.summary(key, ws, 6))
    await asyncio.sleep(0.05)
    assert summarizer.calls == 1  # not started beside the running one
    summarizer.release.set()
    assert (await wider).to_seq == 6 and summarizer.calls == 2


async def test_a_failed_compaction_is_tried_again_by_the_next_call(pool: ThreadPoolExecutor) -> None:
    summarizer = FailingOnceSummarizer()
    shared = compactions(summarizer, pool)
    key, ws = ("t", "ep"), working_set(6)
    with pytest.raises(RuntimeError):
        await shared.summary(key, ws, 4)
    assert "Second attempt." in (await shared.summary(key, ws, 4)).content
    assert summarizer.calls == 2
