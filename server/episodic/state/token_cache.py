"""Token counts of short generated texts, remembered: the system prompt, recalled episodes'
entries, the past-conversations block and stubs recur turn after turn, and counting them
again was a quarter of a BuildContext's CPU."""

from __future__ import annotations

import functools

from episodic.domain.ports.models import TokenCounter

MAX_CACHED_CHARS = 16_384  # a past-conversations block of 10 episodes is ~4-8 KB
CAPACITY = 2048  # bounds the cache's memory: at most 2048 x 16 K characters, ~32 MiB


class CachedCounts:
    def __init__(self, tokens: TokenCounter, capacity: int = CAPACITY) -> None:
        self._tokens = tokens
        self._cached = functools.lru_cache(maxsize=capacity)(tokens.count)

    def count(self, text: str, encoding: str) -> int:
        if len(text) > MAX_CACHED_CHARS:
            return self._tokens.count(text, encoding)
        return self._cached(text, encoding)
