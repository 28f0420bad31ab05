"""The embeddings of recent query texts. A BuildContext turn searches past episodes and
long-term memories with the same text: it is embedded once. A pure function of the text
(and the model, fixed per process), so nothing in SQL can make an entry stale."""

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

    async def of(self, text: str) -> Vector:
        found = self._held.get(text)
        if found is not None:
            self._held.move_to_end(text)
            return found
        (vector,) = await asyncio.to_thread(self._embedder.embed, [text])
        if len(text) <= MAX_TEXT_CHARS:
            self._held[text] = vector
            while len(self._held) > self._entries:
                self._held.popitem(last=False)
        return vector
