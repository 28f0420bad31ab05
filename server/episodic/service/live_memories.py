"""Memories while an episode is live: the `CompactionListener` that BuildContext (inline
summaries) and the LLM compactor tell what a new summary folded in. The user's statements
in those turns are extracted in the background (`MemoryService.extract_live`) and held as
PENDING memories of the episode, its working memory, which "[Known Facts]" renders first:
what the user said early in a long conversation is still known once its turns have left
the window. At close, promotion extracts the whole transcript again and writes nothing
twice (the same statement has the same id; a near repeat merges into the pending one).

Bounded and off the turn's path: `compacted` only notes the span (the spans of an episode
that wait are coalesced into one); `workers` tasks (one by default) extract, one episode at
a time each, so an episode never has two extractions at once; at most `max_waiting`
episodes (and `max_messages` messages each) wait, and what finds no room is left to the
extraction at close. A failure is logged with its type only (a message may quote what the
user said) and never reaches a turn."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from episodic.domain.model import Episode, Message
from episodic.errors import EpisodicError, NotFound
from episodic.service.memories import MemoryService

log = logging.getLogger("episodic.memories")

Key = tuple[str, str]  # (tenant_id, episode_id)
MAX_WAITING = 1024  # episodes with a span waiting
MAX_MESSAGES = 2000  # messages one episode's waiting span holds


@dataclass(slots=True)
class _Span:
    episode: Episode
    messages: dict[int, Message]  # by seq: a span told twice is held once


@dataclass(kw_only=True)
class LiveMemories:
    memories: MemoryService
    workers: int = 1
    max_waiting: int = MAX_WAITING
    max_messages: int = MAX_MESSAGES
    left: int = 0  # spans (or parts of them) found no room: extracted at close only
    _waiting: dict[Key, _Span] = field(default_factory=dict)
    _running: set[Key] = field(default_factory=set)
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _full: bool = False  # logged once while the queue stays full

    # --- the listener (on the event loop, never blocking) ---------------------------------

    def compacted(self, episode: Episode, messages: Sequence[Message]) -> None:
        if not messages:
            return
        key = (episode.tenant_id, episode.episode_id)
        span = self._waiting.get(key)
        if span is None:
            if len(self._waiting) >= self.max_waiting:
                self._leave(1)
                return
            span = self._waiting[key] = _Span(episode, {})
        for m in messages:
            if len(span.messages) >= self.max_messages:
                self._leave(1)
                break
            span.messages[m.seq] = m
        self._wake.set()

    def _leave(self, count: int) -> None:
        self.left += count
        if not self._full:
            self._full = True
            log.warning(
                "live memory extraction is behind: spans are left to extraction at close",
                extra={"waiting": len(self._waiting)},
            )

    # --- the work --------------------------------------------------------------------------

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._run(), name=f"episodic-live-memories-{i}") for i in range(self.workers)
        ]

    async def stop(self) -> None:
        """The workers cancelled and awaited; what still waits is dropped (the close extracts it)."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._waiting.clear()

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def run_once(self) -> bool:
        """Extracts one waiting span (of an episode no other worker is extracting); False when
        there is none. Never raises but for cancellation."""
        key = next((k for k in self._waiting if k not in self._running), None)
        if key is None:
            return False
        span = self._waiting.pop(key)
        if len(self._waiting) < self.max_waiting:
            self._full = False
        self._running.add(key)
        try:
            messages = [span.messages[seq] for seq in sorted(span.messages)]
            await self.memories.extract_live(span.episode, messages)
        except NotFound:  # erased (or gone) meanwhile: nothing was written
            pass
        except Exception as exc:  # a turn never sees it; the close extracts the span again
            reason = exc.reason if isinstance(exc, EpisodicError) else type(exc).__name__
            log.warning(
                "live memory extraction failed",
                extra={"episode_id": span.episode.episode_id, "error": reason},
            )
        finally:
            self._running.discard(key)
            if key in self._waiting:
                self._wake.set()
        return True

    async def drain(self) -> int:
        """Extracts every waiting span, one after the other; returns how many (tests, lab)."""
        done = 0
        while await self.run_once():
            done += 1
        return done

    async def _run(self) -> None:
        while True:
            took = await self.run_once()
            _stop_if_cancelled()
            if took:
                continue
            self._wake.clear()
            if any(k not in self._running for k in self._waiting):
                continue
            await self._wake.wait()


def _stop_if_cancelled() -> None:
    """A driver interrupted by the cancellation may raise its own error instead (logged as a
    failed extraction): the worker ends all the same (as workers/loops.stop_if_cancelled)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
