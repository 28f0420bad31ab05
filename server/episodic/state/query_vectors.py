"""The embeddings of recent query texts. A BuildContext turn searches past episodes and
long-term memories with the same text: it is embedded once, and it can be started before the
turn's reads (`prefetch`) so the model runs on one core while the event loop reads on the
other. A pure function of the text (and the model, fixed per process), so nothing in SQL can
make an entry stale."""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from episodic.domain.ports import Embedder
from episodic.domain.recall import Vector

ENTRIES = 1024
MAX_TEXT_CHARS = 4096  # longer queries are embedded every time rather than held


class QueryVectors:
    def __init__(self, embedder: Embedder, entries: int = ENTRIES) -> None:
        self._embedder = embedder
        self._entries = entries
        self._held: OrderedDict[str, Vector] = OrderedDict()
        # Embeddings under way, shared by every caller asking for the same text meanwhile.
        self._running: dict[str, asyncio.Task[Vector]] = {}

    def prefetch(self, text: str) -> None:
        """Starts embedding `text` unless it is held or under way; `of` picks the result up."""
        if text.strip() and text not in self._held and text not in self._running:
            self._start(text)

    async def of(self, text: str) -> Vector:
        found = self._held.get(text)
        if found is not None:
            self._held.move_to_end(text)
            return found
        running = self._running.get(text) or self._start(text)
        # A cancelled caller must not cancel the embedding others (or the cache) wait for.
        return await asyncio.shield(running)

    def _start(self, text: str) -> asyncio.Task[Vector]:
        task = asyncio.get_running_loop().create_task(self._embed(text))
        self._running[text] = task
        task.add_done_callback(lambda done: self._finished(text, done))
        return task

    def _finished(self, text: str, task: asyncio.Task[Vector]) -> None:
        self._running.pop(text, None)
        if not task.cancelled():
            task.exception()  # retrieved here: a prefetch nobody awaited must not log a stray error

    async def _embed(self, text: str) -> Vector:
        (vector,) = await asyncio.to_thread(self._embedder.embed, [text])
        if len(text) <= MAX_TEXT_CHARS:
            self._held[text] = vector
            while len(self._held) > self._entries:
                self._held.popitem(last=False)
        return vector
