"""Tailing the change feed: how a replica hears what the others committed.

`FeedTail` reads the feed by sequence number from where it last stopped, hands what other
replicas wrote to the change owner (`Visibility.apply_foreign`), and moves on. A NOTIFY on
the feed's channel wakes it at once; it also polls, so a lost notification costs at most
one poll interval, never a change. It starts at the feed's head: a fresh replica's caches
are empty, so nothing older can be stale in them.
- A position the pruner already passed (this replica was stopped or cut off for longer than
  the feed keeps rows): everything is reloaded on next use (`Visibility.resync`).
- A row this release cannot read (a newer release wrote it): the tail stops there, says so
  in the log and through health (NOT_SERVING), and never skips it.

`FeedPruner` runs once per cluster (the replica leading "feed-prune"): rows are deleted
once they are older than the retention, measured on the pruner's own monotonic clock
(heads it saw, and when), so no replica's wall clock decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from episodic.domain.changes import Change
from episodic.domain.ports.changes import ChangeLog, ChangeOwner, FeedEntry, Leadership, Signals
from episodic.errors import EpisodicError
from episodic.workers.loops import SoleReplica, cancel_and_wait, every, stop_if_cancelled, when_leading

log = logging.getLogger(__name__)
CHANNEL = "episodic_feed"
PRUNE_JOB = "feed-prune"


@dataclass(kw_only=True)
class FeedTail:
    feed: ChangeLog
    owner: ChangeOwner
    signals: Signals
    healthy: Callable[[bool], None] = lambda _ok: None
    poll_seconds: float = 0.5
    batch: int = 500
    position: int = 0
    applied: int = 0  # changes of other replicas applied (for tests and metrics)
    resyncs: int = 0
    refused: str = ""  # why the tail stopped, while it is stopped
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None

    def listen(self) -> None:
        """Subscribes to the feed's wake-ups (before the signals connection starts)."""
        self.signals.subscribe(CHANNEL, self._woken)

    def _woken(self, origin: str) -> None:
        """Not by this process's own writes (each turn's append and record): it applied
        those already, and reading the feed for them cost every turn a read."""
        if origin != self.feed.origin:
            self._wake.set()

    async def start(self) -> None:
        self.position = await self.feed.head()
        self._task = asyncio.create_task(self._run(), name="episodic-feed-tail")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)

    async def catch_up(self) -> int:
        """Reads and applies everything after the position; returns how many changes of
        other replicas it applied."""
        applied = 0
        while True:
            page = await self.feed.after(self.position, self.batch)
            if page.pruned_through > self.position:
                self._resync(page.pruned_through)
                continue
            changes, last, refused = _readable(page.entries, self.feed.origin)
            if changes:
                await self.owner.apply_foreign(changes)
                applied += len(changes)
            self.position = last if last is not None else self.position
            self._refuse(refused)
            if refused or len(page.entries) < self.batch:
                self.applied += applied
                return applied

    def _resync(self, pruned_through: int) -> None:
        log.warning("change feed position was pruned: reloading every scope on next use")
        self.owner.resync()
        self.position = pruned_through
        self.resyncs += 1

    def _refuse(self, refused: str) -> None:
        if refused and not self.refused:
            log.error("change feed: %s; this replica stops applying changes and reports NOT_SERVING", refused)
            self.healthy(False)
        elif not refused and self.refused:
            log.info("change feed readable again")
            self.healthy(True)
        self.refused = refused

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.poll_seconds)
            self._wake.clear()
            try:
                await self.catch_up()
            except EpisodicError:
                pass  # an outage: the store's health logged it; the next poll retries
            except Exception:
                log.exception("change feed tail failed; retrying")
            stop_if_cancelled()


def _readable(entries: list[FeedEntry], origin: str) -> tuple[list[Change], int | None, str]:
    """Other replicas' changes up to the first row that cannot be read; the seq of the last
    row taken; why it stopped ("" if it did not)."""
    changes: list[Change] = []
    last: int | None = None
    for entry in entries:
        if entry.change is None:
            return changes, last, entry.refused
        if entry.origin != origin:
            changes.append(entry.change)
        last = entry.seq
    return changes, last, ""


@dataclass(kw_only=True)
class FeedPruner:
    feed: ChangeLog
    retention_seconds: float = 600.0
    interval_seconds: float = 60.0
    leadership: Leadership = field(default_factory=SoleReplica)
    clock: Callable[[], float] = time.monotonic
    _seen: deque[tuple[float, int]] = field(default_factory=deque)  # (when, head), oldest first
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        tick = when_leading(self.leadership, PRUNE_JOB, self.prune)
        self._task = asyncio.create_task(every(self.interval_seconds, tick, log), name="episodic-feed-pruner")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)

    async def prune(self) -> int:
        """Deletes the rows that were already there `retention_seconds` ago."""
        now = self.clock()
        self._seen.append((now, await self.feed.head()))
        through = 0
        while self._seen and now - self._seen[0][0] >= self.retention_seconds:
            through = self._seen.popleft()[1]
        if through <= 0:
            return 0
        gone = await self.feed.prune(through)
        if gone:
            log.info("change feed pruned", extra={"rows": gone, "through_seq": through})
        return gone
