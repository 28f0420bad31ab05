"""Model calls whose report went out before their record was durable
(`ContextReport.record_pending`): reads of such a call on this server wait for its commit,
so a client that asks for its model call right after the report finds it."""

from __future__ import annotations

import asyncio
from typing import Any


class RecordsInFlight:
    def __init__(self) -> None:
        # (tenant, model call id) -> (episode id, the record's commit); only while it runs
        self._storing: dict[tuple[str, str], tuple[str, asyncio.Future[Any]]] = {}

    def add(self, tenant_id: str, model_call_id: str, episode_id: str, commit: asyncio.Future[Any]) -> None:
        key = (tenant_id, model_call_id)
        self._storing[key] = (episode_id, commit)
        commit.add_done_callback(lambda _: self._storing.pop(key, None))

    async def settled(self, tenant_id: str, model_call_id: str) -> None:
        """Returns once the call's record is committed or failed (at once when not in flight)."""
        entry = self._storing.get((tenant_id, model_call_id))
        if entry is not None:
            await asyncio.wait([entry[1]])

    async def settled_in(self, tenant_id: str, episode_id: str) -> None:
        """Returns once every record of the episode in flight is committed or failed."""
        commits = [c for (t, _), (e, c) in self._storing.items() if t == tenant_id and e == episode_id]
        if commits:
            await asyncio.wait(commits)
