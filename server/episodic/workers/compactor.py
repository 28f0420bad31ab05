"""LLM compaction off the request path: one summary at a time per conversation, persisted,
then folded into the cached working set. A turn that needs one schedules it and goes on.
The listener (live memories) is told what each stored summary newly covers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from episodic.domain.model import Message
from episodic.domain.ports.compaction import CompactionListener
from episodic.domain.ports.episodes import ContextStore
from episodic.domain.ports.models import Summarizer
from episodic.domain.working_set import WorkingSet
from episodic.service.compaction import SummaryMaker, snapshot
from episodic.state.working_set import Key, WorkingSetCache

log = logging.getLogger("episodic.compaction")


@dataclass(slots=True, kw_only=True)
class BackgroundCompactor:
    """Runs LLM summaries off the request path, one at a time per conversation; the result
    is persisted, then folded into the cached working set."""

    summarizer: Summarizer
    maker: SummaryMaker
    store: ContextStore
    cache: WorkingSetCache
    listener: CompactionListener | None = None  # told what each stored summary newly covers
    in_flight: dict[Key, asyncio.Task[None]] = field(default_factory=dict)

    def schedule(self, key: Key, working_set: WorkingSet, through: int) -> None:
        if key in self.in_flight:
            return
        task = asyncio.create_task(self._run(key, snapshot(working_set), through))
        self.in_flight[key] = task
        task.add_done_callback(_forget(self.in_flight, key))

    async def _run(self, key: Key, snapshot: WorkingSet, through: int) -> None:
        try:
            summary = await asyncio.to_thread(self.maker.make, self.summarizer, snapshot, through)
            await self.store.save_summary(summary)
        except Exception:
            log.exception("background compaction failed; the next turn will try again")
            return
        if self.listener is not None:
            self.listener.compacted(snapshot.episode, _newly_covered(snapshot.tail, summary.to_seq))
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


def _newly_covered(tail: Sequence[Message], through: int) -> list[Message]:
    """The tail messages the summary folds in (it starts after the previous summary)."""
    return [m for m in tail if m.seq <= through and m.retracted_at is None]


def _forget(in_flight: dict[Key, asyncio.Task[None]], key: Key) -> Callable[[asyncio.Task[None]], None]:
    def forget(_task: asyncio.Task[None]) -> None:
        in_flight.pop(key, None)

    return forget
