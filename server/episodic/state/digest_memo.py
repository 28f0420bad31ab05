"""Recall's per-scope reads of digests, remembered between turns: every HYBRID or SEMANTIC
turn asks for the pending count of the user's scope and for the READY digests of the same
few candidate episodes, and reading them from SQL was a tenth of a BuildContext's CPU.

An answer is used while its scope's version holds: every change that can alter it (a close,
a digest made, re-embedded or failed, a removal, an erasure; this replica's or, through the
change feed, another's) bumps the version first. MAX_AGE_SECONDS is only a safety net."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from episodic.domain.ports.digests import DigestReads
from episodic.domain.ports.episodes import ReadBatch
from episodic.domain.recall import Digest, Hit, Scope
from episodic.state.recall_memo import ScopeVersions

MAX_AGE_SECONDS = 30.0
MAX_SCOPES = 4096
MAX_DIGESTS_PER_SCOPE = 512


@dataclass(slots=True)
class _Remembered:
    version: tuple[int, int]
    at: float
    pending: int | None = None
    digests: dict[str, Digest | None] = field(default_factory=dict)  # None: not READY


class RememberedDigestReads:
    """DigestReads over `store`, remembering pending counts and READY digests per scope. Reads
    bounded by a period go to the store: they are rare and their answers depend on it."""

    def __init__(
        self, store: DigestReads, versions: ScopeVersions, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._store = store
        self._versions = versions
        self._clock = clock
        self._scopes: OrderedDict[Scope, _Remembered] = OrderedDict()

    async def recent(
        self,
        scope: Scope,
        limit: int,
        after: datetime | None,
        before: datetime | None,
        batch: ReadBatch | None = None,
    ) -> list[Digest]:
        return await self._store.recent(scope, limit, after, before, batch)

    async def lexical(
        self, scope: Scope, query: str, limit: int, batch: ReadBatch | None = None
    ) -> list[Hit]:
        return await self._store.lexical(scope, query, limit, batch)

    async def pending_count(self, scope: Scope, batch: ReadBatch | None = None) -> int:
        held = self._held(scope)
        if held.pending is None:
            version = held.version
            pending = await self._store.pending_count(scope, batch)
            self._entry(scope, version).pending = pending
            return pending
        return held.pending

    async def ready_among(
        self,
        scope: Scope,
        episode_ids: Sequence[str],
        after: datetime | None,
        before: datetime | None,
        batch: ReadBatch | None = None,
    ) -> dict[str, Digest]:
        if after is not None or before is not None:
            return await self._store.ready_among(scope, episode_ids, after, before, batch)
        held = self._held(scope)
        known = dict(held.digests)
        missing = [e for e in episode_ids if e not in known]
        if missing:
            found = await self._store.ready_among(scope, missing, None, None, batch)
            read = {e: found.get(e) for e in missing}
            known |= read
            entry = self._entry(scope, held.version)
            if len(entry.digests) + len(read) > MAX_DIGESTS_PER_SCOPE:
                entry.digests.clear()
            entry.digests.update(read)
        return {e: d for e in episode_ids if (d := known.get(e)) is not None}

    def _held(self, scope: Scope) -> _Remembered:
        """The scope's remembered answers if still valid, else an empty entry of its current
        version (read before the store is asked, so a change racing the read voids it)."""
        version = self._versions.version(scope)
        held = self._scopes.get(scope)
        if held is None or held.version != version or self._clock() - held.at > MAX_AGE_SECONDS:
            return _Remembered(version, self._clock())
        self._scopes.move_to_end(scope)
        return held

    def _entry(self, scope: Scope, version: tuple[int, int]) -> _Remembered:
        """Where to note an answer read at `version`: a throwaway if the scope moved on since."""
        if version != self._versions.version(scope):
            return _Remembered(version, self._clock())
        held = self._scopes.get(scope)
        if held is None or held.version != version:
            held = self._scopes[scope] = _Remembered(version, self._clock())
            while len(self._scopes) > MAX_SCOPES:
                self._scopes.popitem(last=False)
        return held
