"""Recency recall remembered per scope between turns. A conversation's turns ask for the
same "latest episodes" again and again; reading them (and the pending count) from SQL was
a third of a BuildContext's CPU. A remembered answer is used while the scope has not
changed (closes and settled digests bump its version: this replica's at once, other
replicas' through the change feed). MAX_AGE_SECONDS is only a safety net; at 2 s, as before
the feed, it expired between any two turns taken at a person's pace."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from episodic.domain.changes import CachesStale, Change, scopes_of
from episodic.domain.recall import Scope, Snippet

MAX_AGE_SECONDS = 30.0
MAX_SCOPES = 100_000


class ScopeVersions:
    """A counter per scope, bumped whenever what recall would find there may change."""

    def __init__(self) -> None:
        self._versions: dict[Scope, int] = {}
        self._epoch = 0  # bumped when the table is cleared, so no old version is reused

    def bump(self, scope: Scope) -> None:
        if len(self._versions) >= MAX_SCOPES:
            self._versions.clear()
            self._epoch += 1
        self._versions[scope] = self._versions.get(scope, 0) + 1

    def version(self, scope: Scope) -> tuple[int, int]:
        return self._epoch, self._versions.get(scope, 0)

    def changed(self, change: Change) -> None:
        if isinstance(change, CachesStale):  # rare: cheaper to forget every scope than to sort them
            self._versions.clear()
            self._epoch += 1
        for scope in scopes_of(change):
            self.bump(scope)


@dataclass(frozen=True, slots=True)
class _Entry:
    version: tuple[int, int]
    at: float
    snippets: list[Snippet]
    pending: int


Key = tuple[Scope, int, float | None]  # scope, top_k, min score


class RecencyMemo:
    def __init__(self, versions: ScopeVersions, clock: Callable[[], float] = time.monotonic) -> None:
        self._versions = versions
        self._clock = clock
        self._entries: OrderedDict[Key, _Entry] = OrderedDict()

    def version(self, scope: Scope) -> tuple[int, int]:
        return self._versions.version(scope)

    def get(self, key: Key) -> tuple[list[Snippet], int] | None:
        entry = self._entries.get(key)
        if entry is None or not self._fresh(key[0], entry):
            return None
        return entry.snippets, entry.pending

    def put(self, key: Key, version: tuple[int, int], snippets: list[Snippet], pending: int) -> None:
        """`version` is the scope's version read before the search, so a change that raced
        with the search makes the entry stale at once."""
        self._entries[key] = _Entry(version, self._clock(), snippets, pending)
        self._entries.move_to_end(key)
        if len(self._entries) > MAX_SCOPES:
            self._entries.popitem(last=False)

    def _fresh(self, scope: Scope, entry: _Entry) -> bool:
        young = self._clock() - entry.at < MAX_AGE_SECONDS
        return young and entry.version == self._versions.version(scope)
