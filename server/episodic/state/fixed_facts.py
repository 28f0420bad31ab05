"""What never changes about an episode while it exists, remembered: appends need its token
encoding, access checks its agent."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from episodic.domain.changes import Change, stale_keys


@dataclass(frozen=True, slots=True)
class FixedFacts:
    token_encoding: str
    agent_id: str


class FixedFactsCache:
    """LRU of (tenant, episode) -> its fixed facts. Valid while the episode exists: an erased
    or soft-deleted id can be opened again, by another agent, so removals drop it."""

    def __init__(self, capacity: int = 100_000) -> None:
        self._capacity = capacity
        self._items: OrderedDict[tuple[str, str], FixedFacts] = OrderedDict()

    def get(self, key: tuple[str, str]) -> FixedFacts | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: tuple[str, str], value: FixedFacts) -> None:
        self._items[key] = value
        if len(self._items) > self._capacity:
            self._items.popitem(last=False)

    def changed(self, change: Change) -> None:
        for key in stale_keys(change, list(self._items)):
            self._items.pop(key, None)
