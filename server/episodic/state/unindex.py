"""Taking vectors out of an in-memory index: an episode's (digest replaced, erasure,
retention) are keyed "<episode>#<chunk>" within its scope; a memory's by its id."""

from __future__ import annotations

from collections.abc import Iterable

from episodic.domain.ports.indexes import VectorIndex
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


def unindex_memories(index: VectorIndex, memories: Iterable[tuple[Scope, str]]) -> int:
    """Removes these (scope, memory id) vectors that the index holds; returns how many."""
    by_scope: dict[Scope, set[str]] = {}
    for scope, memory_id in memories:
        by_scope.setdefault(scope, set()).add(memory_id)
    removed = 0
    for scope, ids in by_scope.items():
        keys = [k for k in ids if k in index.keys(scope)]
        index.remove(scope, keys)
        removed += len(keys)
    return removed
