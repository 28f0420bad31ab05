"""When memories were last recalled, written behind the request path: a search or a
BuildContext notes its memories here, and a loop writes what was noted every few seconds
in one UPDATE per tenant and time. A crash loses at most one interval of marks (a
last-recalled time, not data); the marks of one memory are written at most once a minute."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from episodic.domain.memories import RECALL_MARK_EVERY
from episodic.domain.ports.memories import MemoryStore
from episodic.workers.loops import cancel_and_wait, every

log = logging.getLogger(__name__)
MAX_NOTED = 100_000  # beyond this, marks wait for the next flush rather than grow RAM


@dataclass(kw_only=True)
class RecallMarks:
    store: MemoryStore
    interval_seconds: float = 5.0
    _noted: dict[tuple[str, str], datetime] = field(default_factory=dict)
    _written: dict[tuple[str, str], datetime] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None

    def note(self, tenant_id: str, memory_ids: Sequence[str], at: datetime) -> None:
        for memory_id in memory_ids:
            key = (tenant_id, memory_id)
            last = self._written.get(key)
            if (last is None or at - last >= RECALL_MARK_EVERY) and len(self._noted) < MAX_NOTED:
                self._noted[key] = at

    def start(self) -> None:
        loop = every(self.interval_seconds, self.flush, log)
        self._task = asyncio.create_task(loop, name="episodic-recall-marks")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        await self.flush()

    async def flush(self) -> int:
        """Writes what was noted, one UPDATE per tenant (stamped with its latest mark); returns
        how many marks. Marks of a failed write are dropped: the next recall notes them again."""
        noted, self._noted = self._noted, {}
        if not noted:
            return 0
        by_tenant: dict[str, list[str]] = {}
        for tenant_id, memory_id in noted:
            by_tenant.setdefault(tenant_id, []).append(memory_id)
        for tenant_id, ids in by_tenant.items():
            await self.store.touch(tenant_id, ids, max(noted[(tenant_id, i)] for i in ids))
        newest = max(noted.values())
        kept = {k: at for k, at in self._written.items() if newest - at < RECALL_MARK_EVERY}
        self._written = kept | noted
        return len(noted)
