"""The server's embedding threads, taken in turn by tenants (the `TenantEmbeddings` port).

Each tenant's jobs wait in a line of their own; when a thread frees, the next job comes from
the tenant served least recently, so a quiet tenant's job runs next, not after a busy
tenant's line. Queries (a turn's text, waited for by a call) and bulk (memories, digests,
earlier messages, documents' chunks) have lanes of their own, so bulk never sits in front of a query; a bulk
job is embedded a chunk at a time, each chunk taking its turn, so one tenant's batch of
hundreds holds the bulk thread for one chunk at most before another tenant's goes. With more
than one bulk thread, a job's chunks run side by side on as many as it can take, still one
chunk at a time on each. On the event loop's thread, like every state object."""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Executor

from episodic.domain.ports.models import Embedder
from episodic.domain.recall import Vector

# Query embeddings at once: a model call runs on one core, so more than the cores would only
# share them (and the event loop's); past this a query waits for the next turn.
QUERY_SLOTS = 2
# Bulk embeddings at once: as many as the server's bulk threads (settings.bulk_embed_threads,
# default 1; bootstrap's new_embed_pool). A job's chunks run on up to this many at once.
BULK_SLOTS = 1
# Texts of a bulk job embedded per turn: ~16 short texts take MiniLM tens of ms, the most a
# quiet tenant's bulk job waits behind another's.
BULK_CHUNK = 16


class FairSlots:
    """`slots` jobs at once; the others wait in their tenant's line (first come, first
    served within it), and a freed slot goes to the tenant served least recently."""

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"slots must be positive, got {slots}")
        self._slots = slots
        self._running = 0
        self._lines: dict[str, deque[asyncio.Future[None]]] = {}
        self._served: dict[str, int] = {}  # tenants running or waiting: when each last started
        self._active: dict[str, int] = {}  # slots held, by tenant
        self._stamps = itertools.count(1)

    async def acquire(self, tenant_id: str) -> None:
        """Returns holding a slot; `release` gives it back. A cancelled wait leaves the line."""
        if self._running < self._slots and not self._lines:
            self._start(tenant_id)
            return
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._lines.setdefault(tenant_id, deque()).append(ready)
        self._served.setdefault(tenant_id, 0)
        try:
            await ready  # handed over already counted (see _hand_on)
        except asyncio.CancelledError:
            if ready.done() and not ready.cancelled():
                self.release(tenant_id)  # handed a slot just as it was cancelled: give it on
            else:
                self._leave_line(tenant_id, ready)
            raise

    def release(self, tenant_id: str) -> None:
        self._running -= 1
        self._active[tenant_id] -= 1
        if not self._active[tenant_id]:
            del self._active[tenant_id]
        self._forget(tenant_id)
        self._hand_on()

    def _start(self, tenant_id: str) -> None:
        self._running += 1
        self._active[tenant_id] = self._active.get(tenant_id, 0) + 1
        self._served[tenant_id] = next(self._stamps)

    def _hand_on(self) -> None:
        while self._running < self._slots and self._lines:
            tenant_id = min(self._lines, key=self._served.__getitem__)
            line = self._lines[tenant_id]
            ready = line.popleft()
            if not line:
                del self._lines[tenant_id]
            if not ready.done():  # else cancelled: nothing to hand it
                self._start(tenant_id)
                ready.set_result(None)

    def _leave_line(self, tenant_id: str, ready: asyncio.Future[None]) -> None:
        line = self._lines.get(tenant_id)
        if line is not None and ready in line:  # a slot handed on meanwhile may have taken it off
            line.remove(ready)
            if not line:
                del self._lines[tenant_id]
        self._forget(tenant_id)

    def _forget(self, tenant_id: str) -> None:
        """A tenant neither running nor waiting is forgotten: the map stays as small as the
        set of tenants embedding now (its next job then counts as never served: it goes first)."""
        if tenant_id not in self._lines and tenant_id not in self._active:
            self._served.pop(tenant_id, None)


class FairEmbeddings:
    """`TenantEmbeddings` over one embedder: bulk on `bulk_pool` (the server's bulk threads,
    `bulk_slots` of them), queries on `query_pool`; None: asyncio's default executor."""

    def __init__(
        self,
        embedder: Embedder,
        bulk_pool: Executor | None,
        *,
        query_pool: Executor | None = None,
        query_slots: int = QUERY_SLOTS,
        bulk_slots: int = BULK_SLOTS,
        chunk: int = BULK_CHUNK,
    ) -> None:
        self._embedder = embedder
        self._bulk_pool = bulk_pool
        self._query_pool = query_pool
        self._queries = FairSlots(query_slots)
        self._bulk = FairSlots(bulk_slots)
        self._bulk_slots = bulk_slots
        self._chunk = chunk

    async def query(self, tenant_id: str, texts: Sequence[str]) -> list[Vector]:
        return await self._run(self._queries, self._query_pool, tenant_id, list(texts))

    async def bulk(self, tenant_id: str, texts: Sequence[str]) -> list[Vector]:
        """The texts' vectors, in order, embedded a chunk at a time on up to `bulk_slots`
        threads at once, each chunk taking its turn."""
        chunks = [list(texts[start : start + self._chunk]) for start in range(0, len(texts), self._chunk)]
        embedded: list[list[Vector]] = [[] for _ in chunks]
        undone = iter(range(len(chunks)))

        async def take_turns() -> None:  # the next chunk not yet taken, until none is left
            for i in undone:
                embedded[i] = await self._run(self._bulk, self._bulk_pool, tenant_id, chunks[i])

        hands = min(self._bulk_slots, len(chunks))
        if hands <= 1:
            await take_turns()
        else:
            turns = [asyncio.ensure_future(take_turns()) for _ in range(hands)]
            try:
                await asyncio.gather(*turns)
            except BaseException:  # the first error is the caller's, as with one thread
                for turn in turns:
                    turn.cancel()
                raise
        return [vector for chunk in embedded for vector in chunk]

    async def _run(
        self, slots: FairSlots, pool: Executor | None, tenant_id: str, texts: list[str]
    ) -> list[Vector]:
        if not texts:
            return []
        await slots.acquire(tenant_id)
        job = asyncio.get_running_loop().run_in_executor(pool, self._embedder.embed, texts)
        # The slot is the thread's until the model is done, even when the caller is cancelled
        # first: the threads at work never exceed the slots.
        job.add_done_callback(lambda done: _released(slots, tenant_id, done))
        return list(await asyncio.shield(job))


def _released(slots: FairSlots, tenant_id: str, done: asyncio.Future[list[list[float]]]) -> None:
    slots.release(tenant_id)
    if not done.cancelled():
        done.exception()  # retrieved: a caller cancelled meanwhile logs nothing
