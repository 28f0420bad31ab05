"""The warm start: after a restart, the working sets of the most recently active open
conversations are read back (one read each: latest summary + tail since it) and their
users' indexes loaded, in the background, so the first turn of each finds them as its next
turn would (seed 000). Bounded by a count and by half the working-set cache, so what it
brings in is never evicted by what it brings in next; live turns go first (it yields
between conversations), and a conversation a turn reached first is left as it is."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from episodic.domain.ports.episodes import RecentlyActive
from episodic.errors import EpisodicError, NotFound
from episodic.workers.loops import cancel_and_wait

log = logging.getLogger(__name__)
Key = tuple[str, str]  # (tenant, episode)


@dataclass(kw_only=True)
class WarmStart:
    recent: RecentlyActive
    warm: Callable[[Key], Awaitable[bool]]  # True: read and held now; False: already held
    full: Callable[[], bool]  # the cache holds as much as the warm start may fill
    limit: int
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.limit > 0:
            self._task = asyncio.create_task(self._run(), name="episodic-warm-start")

    async def _run(self) -> None:
        try:
            await self.run()
        except Exception:  # a bug here must not take the server down: turns read for themselves
            log.exception("warm start failed")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)

    async def finished(self) -> None:
        """Returns once the warm start has run (at once if it never started)."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def run(self) -> int:
        """Warms what it can; returns how many working sets it read. An outage ends it: the
        turns read what they need themselves."""
        try:
            keys = await self.recent.recently_active(self.limit)
        except EpisodicError:
            return 0
        warmed = 0
        for key in keys:
            if self.full():
                break
            try:
                warmed += await self.warm(key)
            except NotFound:  # erased or deleted since it was listed
                continue
            except EpisodicError:
                break
            await asyncio.sleep(0)  # a live turn's work comes first
        log.info("warm start: working sets read", extra={"conversations": warmed, "listed": len(keys)})
        return warmed
