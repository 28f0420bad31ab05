"""Recalled episodes' spoken messages with their words, remembered: a closed episode never
changes, and the same few are recalled turn after turn. Removals (erasure, retention) reach
it through the change owner."""

from __future__ import annotations

from collections import OrderedDict

from episodic.domain.changes import Change, stale_keys
from episodic.domain.excerpts import Transcript

Key = tuple[str, str]  # (tenant, episode)


class SpokenCache:
    """LRU bounded by the messages it holds."""

    def __init__(self, max_messages: int = 200_000) -> None:
        self._max = max_messages
        self._held = 0
        self._items: OrderedDict[Key, Transcript] = OrderedDict()

    def get(self, key: Key) -> Transcript | None:
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def put(self, key: Key, spoken: Transcript) -> None:
        self._drop(key)
        self._items[key] = spoken
        self._held += len(spoken)
        while self._held > self._max and len(self._items) > 1:
            self._drop(next(iter(self._items)))

    def changed(self, change: Change) -> None:
        for key in stale_keys(change, list(self._items)):
            self._drop(key)

    def _drop(self, key: Key) -> None:
        gone = self._items.pop(key, None)
        if gone is not None:
            self._held -= len(gone)
