"""The embeddings of recent query texts. A BuildContext turn searches past episodes and
long-term memories with the same text: it is embedded once, and it can be started before the
turn's reads (`prefetch`) so the model runs on one core while the event loop reads on the
other. A pure function of the text (and the model, fixed per process), so nothing in SQL can
make an entry stale. Given the server's `TenantEmbeddings`, the model runs on a query turn
of the tenant that asked first (tenants take those in turn); else on the loop's executor."""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict

from episodic.domain.ports.models import Embedder, TenantEmbeddings, embeds_inline
from episodic.domain.recall import Vector

ENTRIES = 1024
MAX_KEY_CHARS = 4096  # a longer text is held under its hash, so the cache stays small

Key = str | tuple[str, str]


def _key(text: str) -> Key:
    if len(text) <= MAX_KEY_CHARS:
        return text
    return ("sha256", hashlib.sha256(text.encode()).hexdigest())


class QueryVectors:
    def __init__(
        self, embedder: Embedder, entries: int = ENTRIES, embeddings: TenantEmbeddings | None = None
    ) -> None:
        self._embedder = embedder
        self._embeddings = embeddings
        self._entries = entries
        self._held: OrderedDict[Key, Vector] = OrderedDict()
        # Embeddings under way, shared by every caller asking for the same text meanwhile.
        self._running: dict[Key, asyncio.Future[list[Vector]]] = {}

    def prefetch(self, text: str, tenant_id: str = "") -> None:
        """Starts embedding `text` unless it is held or under way; `of` picks the result up.
        `tenant_id`: whose turn it takes ("" when the caller names none: one line for all)."""
        key = _key(text)
        held = key in self._held or key in self._running
        if text.strip() and not held and not embeds_inline(self._embedder, text):  # else `of` does, at once
            self._start(key, text, tenant_id)

    def under_way(self, text: str) -> bool:
        """Whether `text` is being embedded now (prefetched, not yet done)."""
        return _key(text) in self._running

    async def of(self, text: str, tenant_id: str = "") -> Vector:
        key = _key(text)
        found = self._held.get(key)
        if found is not None:
            self._held.move_to_end(key)
            return found
        if key not in self._running and embeds_inline(self._embedder, text):
            (inline,) = self._embedder.embed([text])
            self._keep(key, inline)
            return inline
        running = self._running.get(key) or self._start(key, text, tenant_id)
        # A cancelled caller must not cancel the embedding others (or the cache) wait for.
        (vector,) = await asyncio.shield(running)
        return vector

    def _start(self, key: Key, text: str, tenant_id: str) -> asyncio.Future[list[Vector]]:
        """On the tenant's query turn; without `TenantEmbeddings`, on a thread of the loop's
        executor, the future the only task (no coroutine wraps it)."""
        running: asyncio.Future[list[Vector]]
        if self._embeddings is not None:
            running = asyncio.ensure_future(self._embeddings.query(tenant_id, [text]))
        else:
            loop = asyncio.get_running_loop()
            running = loop.run_in_executor(None, self._embedder.embed, [text])  # type: ignore[arg-type]
        self._running[key] = running
        running.add_done_callback(lambda done: self._finished(key, done))
        return running

    def _finished(self, key: Key, done: asyncio.Future[list[Vector]]) -> None:
        self._running.pop(key, None)
        if done.cancelled() or done.exception() is not None:  # retrieved: a lone prefetch logs nothing
            return
        self._keep(key, done.result()[0])

    def _keep(self, key: Key, vector: Vector) -> None:
        self._held[key] = vector
        while len(self._held) > self._entries:
            self._held.popitem(last=False)
