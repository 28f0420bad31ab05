"""Compaction: summarizing the oldest part of a conversation's tail into a summary record.
The extractive summarizer runs inline (it is fast and local) but off the event loop, in a
small pool, one compaction per conversation shared by the calls that need it; an LLM
summarizer runs in the background, so a turn never waits on it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from functools import partial

from episodic.domain.assembly import summary_content
from episodic.domain.context import Summary
from episodic.domain.model import Message, Role
from episodic.domain.ports.clock import Clock
from episodic.domain.ports.compaction import BackgroundCompactions, CompactionListener
from episodic.domain.ports.models import Summarizer, TokenCounter
from episodic.domain.working_set import WorkingSet
from episodic.state.working_set import Key

log = logging.getLogger("episodic.compaction")


def covered_transcript(working_set: WorkingSet, through: int) -> list[Message]:
    """The previous summary (as one spoken turn, so its sentences compete with the new
    ones) followed by the tail messages up to `through`."""
    covered = [m for m in working_set.tail if m.seq <= through and m.retracted_at is None]
    previous = working_set.summary
    if previous is None or not covered:
        return covered
    first = covered[0]
    earlier = Message(
        first.episode_id, previous.to_seq, Role.ASSISTANT, previous.content, 0, "", first.created_at
    )
    return [earlier, *covered]


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryMaker:
    tokens: TokenCounter
    clock: Clock

    def make(self, summarizer: Summarizer, working_set: WorkingSet, through: int) -> Summary:
        transcript = covered_transcript(working_set, through)
        text = summarizer.summarize(transcript)
        content = summary_content(text.summary, text.key_facts)
        encoding = working_set.episode.token_encoding
        previous = working_set.summary
        first = previous.from_seq if previous else _first_seq(transcript)
        return Summary(
            tenant_id=working_set.episode.tenant_id,
            episode_id=working_set.episode.episode_id,
            from_seq=first,
            to_seq=through,
            content=content,
            token_count=self.tokens.count(content, encoding),
            token_encoding=encoding,
            summarizer=type(summarizer).__name__,
            created_at=self.clock(),
        )


def _first_seq(transcript: Sequence[Message]) -> int:
    return transcript[0].seq if transcript else 0


def snapshot(working_set: WorkingSet) -> WorkingSet:
    """A copy whose tail the event loop does not change while a thread summarizes it."""
    return WorkingSet(working_set.episode, working_set.agent, working_set.summary, working_set.tail.copy())


Span = tuple[int, int]
"""What a compaction covers: the previous summary's last seq, and the last seq it folds in."""


@dataclass(slots=True, eq=False)
class _Running:
    span: Span
    work: Future[Summary]  # in the pool; cancelled only while still queued
    result: asyncio.Future[Summary]
    waiters: int = 0


# Finished compactions no call came back for are kept for a retry; past this many, dropped.
_MAX_UNCLAIMED = 256


@dataclass(slots=True, kw_only=True)
class SharedCompactions:
    """Inline compactions, at most one per conversation at a time, shared by the calls that
    need the same one. A call that is cancelled or runs out of time does not take its
    compaction down with it: the retry joins it instead of starting another beside it (the
    thread could not be stopped anyway). Only when no call waits any more and the work has
    not started is it cancelled. The work runs in `pool`, so however many calls a tenant
    makes, summaries use at most the pool's threads."""

    summarizer: Summarizer
    maker: SummaryMaker
    pool: Executor
    _by_key: dict[Key, _Running] = field(default_factory=dict, init=False)

    async def summary(self, key: Key, working_set: WorkingSet, through: int) -> Summary:
        span = (working_set.summary_to, through)
        running = await self._joinable(key, span)
        if running is None:
            running = self._start(key, snapshot(working_set), through)
        running.waiters += 1
        try:
            summary = await asyncio.shield(running.result)
        except asyncio.CancelledError:
            if running.waiters == 1 and running.work.cancel():  # nobody else wants it, not started
                self._drop(key, running)
            raise
        except Exception:
            self._drop(key, running)  # the next call tries again
            raise
        finally:
            running.waiters -= 1
        self._drop(key, running)  # this call folds it into the working set
        return summary

    async def _joinable(self, key: Key, span: Span) -> _Running | None:
        """The conversation's compaction if it covers `span`; one that covers another span
        is finished first (or cancelled, if queued and unwanted), so only one ever runs."""
        running = self._by_key.get(key)
        if running is None or running.span == span:
            return running
        if not (running.waiters == 0 and running.work.cancel()):
            await asyncio.wait([running.result])
        self._drop(key, running)
        return None

    def _start(self, key: Key, working_set: WorkingSet, through: int) -> _Running:
        self._forget_unclaimed()
        work = self.pool.submit(partial(self.maker.make, self.summarizer, working_set, through))
        result = asyncio.wrap_future(work)
        result.add_done_callback(_retrieve)
        running = _Running((working_set.summary_to, through), work, result)
        self._by_key[key] = running
        return running

    def _drop(self, key: Key, running: _Running) -> None:
        if self._by_key.get(key) is running:
            del self._by_key[key]

    def _forget_unclaimed(self) -> None:
        if len(self._by_key) < _MAX_UNCLAIMED:
            return
        for key, running in list(self._by_key.items()):
            if running.result.done() and not running.waiters:
                del self._by_key[key]

    def running(self) -> int:
        """How many compactions are queued or running (for tests and diagnostics)."""
        return sum(not running.result.done() for running in self._by_key.values())


@dataclass(slots=True, kw_only=True)
class TailCompaction:
    """How BuildContext folds a tail that does not fit into a summary: inline, one per
    conversation shared by its calls (`inline`), or scheduled off the request path (an LLM
    summarizer: `background`); and who is told what an inline summary newly covers."""

    inline: SharedCompactions
    background: BackgroundCompactions | None = None
    listener: CompactionListener | None = None  # memories are extracted from it while live


def _retrieve(result: asyncio.Future[Summary]) -> None:
    """Marks the outcome as seen: a failure nobody waited for is retried by the next call."""
    if not result.cancelled():
        result.exception()
