"""Changes to what recall and BuildContext can see. Each write that makes one names it, and
the one owner (`episodic.state.visibility.Visibility`) applies it to the vector index and to
every cache derived from SQL. Changes are plain values, so one committed by another replica
can arrive the same way (the change feed)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from episodic.domain.recall import Scope


@dataclass(frozen=True, slots=True)
class EpisodeVectors:
    """An episode's digest became ready, or was re-embedded: these vectors replace any it had."""

    scope: Scope
    episode_id: str
    keys: Sequence[str]
    vectors: Sequence[Sequence[float]]


@dataclass(frozen=True, slots=True)
class EpisodesRemoved:
    """Episodes erased or soft-deleted by retention: their vectors go, caches forget them
    (their ids may be opened again, by another agent)."""

    episodes: Sequence[tuple[Scope, str]]


@dataclass(frozen=True, slots=True)
class ScopeChanged:
    """What recall finds in a scope changed without touching vectors: an episode closed
    (a digest is pending), a digest failed."""

    scope: Scope


@dataclass(frozen=True, slots=True)
class MessageRetracted:
    """A message of an open episode was retracted: what holds the episode's messages (its
    working set, what was said in it) reads them again."""

    scope: Scope
    episode_id: str


@dataclass(frozen=True, slots=True)
class AgentChanged:
    """An agent's definition changed (its memory config, its PII policy)."""

    tenant_id: str
    agent_id: str


@dataclass(frozen=True, slots=True)
class MemoryVectors:
    """Memories were promoted or re-embedded: their vectors (keyed by memory id) replace any
    they had in their scope's memory index."""

    scope: Scope
    keys: Sequence[str]
    vectors: Sequence[Sequence[float]]


@dataclass(frozen=True, slots=True)
class KnowledgeVectors:
    """A document of an agent was (re)written: its chunks' vectors (keyed "<document>#<n>",
    in the agent's knowledge scope) replace any it had."""

    scope: Scope
    document_id: str
    keys: Sequence[str]
    vectors: Sequence[Sequence[float]]


@dataclass(frozen=True, slots=True)
class DocumentsRemoved:
    """Documents deleted (by the client or expiry): their chunks' vectors go."""

    documents: Sequence[tuple[Scope, str]]


@dataclass(frozen=True, slots=True)
class MemoriesRemoved:
    """Memories deleted (by the client, expiry, retention or erasure): out of the index."""

    memories: Sequence[tuple[Scope, str]]


@dataclass(frozen=True, slots=True)
class UserErased:
    """A user's erasure committed (the precise removals travel beside it). The change feed
    writes this instead of them, so no feed row names the user after the erasure."""

    tenant_id: str
    user_hash: str


@dataclass(frozen=True, slots=True)
class CachesStale:
    """Whatever this process holds of a tenant (None: of every tenant) may be stale: another
    replica erased a user, or this replica's feed position was pruned before it read it.
    `user_hash`, when set, names the erased user: a cache that knows its entries' users
    (working sets, costly to rebuild) drops only theirs; the others drop the tenant's."""

    tenant_id: str | None
    user_hash: str = ""


Change = (
    EpisodeVectors
    | EpisodesRemoved
    | ScopeChanged
    | MessageRetracted
    | AgentChanged
    | MemoryVectors
    | MemoriesRemoved
    | KnowledgeVectors
    | DocumentsRemoved
    | UserErased
    | CachesStale
)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Declared(Generic[T]):
    """The changes a write makes, declared with it: half of a unit of work (the SQL operation
    is the other half). The writer computes `of(result)` inside the operation's transaction
    (or savepoint) and inserts their change-feed rows there, tagged with `origin` (the
    writing process), whatever path runs the operation; so a declared write cannot commit
    without its rows, nor its rows without the write. The change owner makes one per write."""

    of: Callable[[T], Iterable[Change]]
    origin: str


def _none(_: object) -> tuple[Change, ...]:
    return ()


# For a write that changes nothing recall or BuildContext can see (bulk loads, tests).
NO_CHANGES: Declared[Any] = Declared(_none, "")


@dataclass(frozen=True, slots=True)
class Recorded(Generic[T]):
    """A declared write, committed: its result, the changes its transaction computed, and
    whether it wrote change-feed rows (the other replicas are then to be woken). Only the
    writer that ran it (or a fake store, which has no feed) makes one."""

    result: T
    changes: Sequence[Change]
    in_feed: bool


@dataclass(frozen=True, slots=True)
class Committed(Generic[T]):
    """What a write returned, and how many vectors its changes took out of the index."""

    result: T
    vectors_removed: int


def scopes_of(change: Change) -> list[Scope]:
    """The scopes whose recall answers a change may alter."""
    if isinstance(change, EpisodeVectors | ScopeChanged):
        return [change.scope]
    if isinstance(change, EpisodesRemoved):
        return list(dict.fromkeys(scope for scope, _ in change.episodes))
    return []


def stale_keys(change: Change, held: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Which of a cache's (tenant, episode-or-agent) keys a change makes stale: the removed
    episodes, or every key of a tenant whose caches went stale (an AgentChanged is left to
    the one cache keyed by agent)."""
    if isinstance(change, CachesStale):
        return [key for key in held if change.tenant_id is None or key[0] == change.tenant_id]
    if isinstance(change, MessageRetracted):
        return [(change.scope.tenant_id, change.episode_id)]
    return episodes_of(change)


def episodes_of(change: Change) -> list[tuple[str, str]]:
    """(tenant, episode) pairs a change removed."""
    if isinstance(change, EpisodesRemoved):
        return [(scope.tenant_id, episode_id) for scope, episode_id in change.episodes]
    return []
