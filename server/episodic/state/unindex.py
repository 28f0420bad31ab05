"""Taking episodes' vectors out of the in-memory index (digest replaced, erasure,
retention): an episode's vectors are keyed "<episode>#<chunk>" within its scope."""

from __future__ import annotations

from collections.abc import Iterable

from episodic.domain.ports import VectorIndex
from episodic.domain.recall import Scope, episode_of


def unindex_episodes(index: VectorIndex, episodes: Iterable[tuple[Scope, str]]) -> int:
    """Removes every vector of these (scope, episode) pairs; returns how many."""
    by_scope: dict[Scope, set[str]] = {}
    for scope, episode_id in episodes:
        by_scope.setdefault(scope, set()).add(episode_id)
    removed = 0
    for scope, ids in by_scope.items():
        keys = [k for k in index.keys(scope) if episode_of(k) in ids]
        index.remove(scope, keys)
        removed += len(keys)
    return removed
