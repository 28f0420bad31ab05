"""Compaction: summarizing the oldest part of a conversation's tail into a summary record.
The extractive summarizer runs inline (it is fast and local); an LLM summarizer runs in the
background, so a turn never waits on it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from episodic.domain.assembly import summary_content
from episodic.domain.context import Summary
from episodic.domain.model import Message, Role
from episodic.domain.ports import Clock, ContextStore, Summarizer, TokenCounter
from episodic.service.working_set import Key, WorkingSet, WorkingSetCache

log = logging.getLogger("episodic.compaction")


def covered_transcript(working_set: WorkingSet, through: int) -> list[Message]:
    """The previous summary (as one spoken turn, so its sentences compete with the new
    ones) followed by the tail messages up to `through`."""
    covered = [m for m in working_set.tail if m.seq <= through]
    previous = working_set.summary
    if previous is None or not covered:
        return covered
    first = covered[0]
    earlier = Message(
        first.episode_id, previous.to_seq, Role.ASSISTANT, previous.content, 0, "", first.created_at
    )
    return [earlier, *covered]


@dataclass(frozen=True, slots=True)
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


@dataclass(slots=True)
class BackgroundCompactor:
    """Runs LLM summaries off the request path, one at a time per conversation; the result
    is persisted, then folded into the cached working set."""

    summarizer: Summarizer
    maker: SummaryMaker
    store: ContextStore
    cache: WorkingSetCache
    in_flight: dict[Key, asyncio.Task[None]] = field(default_factory=dict)

    def schedule(self, key: Key, working_set: WorkingSet, through: int) -> None:
        if key in self.in_flight:
            return
        snapshot = WorkingSet(
            working_set.episode, working_set.agent, working_set.summary, list(working_set.tail)
        )
        task = asyncio.create_task(self._run(key, snapshot, through))
        self.in_flight[key] = task
        task.add_done_callback(_forget(self.in_flight, key))

    async def _run(self, key: Key, snapshot: WorkingSet, through: int) -> None:
        try:
            summary = await asyncio.to_thread(self.maker.make, self.summarizer, snapshot, through)
            await self.store.save_summary(summary)
        except Exception:
            log.exception("background compaction failed; the next turn will try again")
            return
        async with self.cache.hold(key):
            cached = self.cache.get(key)
            if cached is not None:
                cached.compacted(summary)
                self.cache.put(key, cached)

    async def stop(self) -> None:
        tasks = list(self.in_flight.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _forget(in_flight: dict[Key, asyncio.Task[None]], key: Key) -> Callable[[asyncio.Task[None]], None]:
    def forget(_task: asyncio.Task[None]) -> None:
        in_flight.pop(key, None)

    return forget
