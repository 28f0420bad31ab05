"""Token counts of short generated texts, remembered: the system prompt, recalled episodes'
entries, the past-conversations block and stubs recur turn after turn, and counting them
again was a quarter of a BuildContext's CPU."""

from __future__ import annotations

import functools

from episodic.domain.ports import TokenCounter

MAX_CACHED_CHARS = 4096  # bounds the cache's memory: at most capacity x 4 KB of text


class CachedCounts:
    def __init__(self, tokens: TokenCounter, capacity: int = 8192) -> None:
        self._tokens = tokens
        self._cached = functools.lru_cache(maxsize=capacity)(tokens.count)

    def count(self, text: str, encoding: str) -> int:
        if len(text) > MAX_CACHED_CHARS:
            return self._tokens.count(text, encoding)
        return self._cached(text, encoding)
