"""Recall inside the live episode, for BuildContext's "[Earlier in this conversation]": the
turn's query searched over the messages its working set's tail no longer holds
(`domain/earlier.py`), with the turn's one query embedding.

The messages' own vectors are made in the background, a batch at a time, conversations
taking turns (a long one cannot hold the embedder from the others); until a message has
its vector it is found by its words only. Nothing here reads SQL: the compacted log is part
of the working set, derived from SQL when the set is built and kept up by compaction."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from episodic.domain.earlier import CompactedLog
from episodic.domain.earlier_block import EarlierFound
from episodic.domain.ports.models import Embedder, TenantEmbeddings
from episodic.domain.recall import Vector
from episodic.domain.working_set import WorkingSet
from episodic.service.recall import QueryVectorSource

log = logging.getLogger("episodic.earlier")

BATCH = 32  # messages embedded in one call
MOST_WAITING = 4096  # conversations waiting for vectors; past it the oldest waits for its next turn


@dataclass(slots=True, kw_only=True)
class EarlierRecall:
    embedder: Embedder
    queries: QueryVectorSource
    embeddings: TenantEmbeddings | None = None  # the server's, tenants in turn; None: the loop's executor
    _waiting: OrderedDict[int, tuple[str, CompactedLog]] = field(default_factory=OrderedDict)  # by id
    _task: asyncio.Task[None] | None = None
    _busy: int = 0  # id of the log whose batch is being embedded

    def searches(self, ws: WorkingSet, share_percent: int, matchable: bool) -> bool:
        """Whether this turn searches the episode's compacted messages at all."""
        return share_percent > 0 and matchable and len(ws.compacted_log) > 0

    async def found(self, ws: WorkingSet, query: str) -> EarlierFound:
        """The held messages that match `query`, best first; by meaning too once some of
        them have vectors (the query's embedding is the turn's, shared with the others)."""
        compacted, tenant_id = ws.compacted_log, ws.episode.tenant_id
        self.embed_later(compacted, tenant_id)
        vector: Vector | None = await self.queries.of(query, tenant_id) if compacted.embedded else None
        return EarlierFound(compacted, compacted.ranked(query, vector))

    def embed_later(self, compacted: CompactedLog, tenant_id: str) -> None:
        """Queues the log for vectors of the messages it holds without one (on the tenant's
        bulk turns)."""
        held = id(compacted) in self._waiting or id(compacted) == self._busy
        if compacted.embedded >= len(compacted) or held:
            return
        self._waiting[id(compacted)] = (tenant_id, compacted)
        while len(self._waiting) > MOST_WAITING:
            self._waiting.popitem(last=False)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain(), name="earlier-vectors")

    async def _drain(self) -> None:
        while self._waiting:
            _, (tenant_id, compacted) = self._waiting.popitem(last=False)
            start, texts = compacted.unembedded(BATCH)
            if not texts:
                continue
            self._busy = id(compacted)
            try:
                vectors = await self._embed(tenant_id, texts)
            except Exception as exc:
                log.warning("embedding earlier messages failed", extra={"error": type(exc).__name__})
                continue
            finally:
                self._busy = 0
            compacted.add_vectors(start, vectors)
            if compacted.embedded < len(compacted):  # the rest after every other conversation's batch
                self._waiting[id(compacted)] = (tenant_id, compacted)

    async def _embed(self, tenant_id: str, texts: list[str]) -> Sequence[Vector]:
        if self.embeddings is not None:
            return await self.embeddings.bulk(tenant_id, texts)
        return await asyncio.get_running_loop().run_in_executor(None, self.embedder.embed, texts)

    async def stop(self) -> None:
        self._waiting.clear()
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
