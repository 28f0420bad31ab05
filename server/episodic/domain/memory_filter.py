"""Which of a scope's memories a listing or search may return (`MemoryFilter`): the one
statement of the rule. Pure.

The fake store applies `passes` whole. The SQL store says what it can portably in its WHERE
clause (store/memories.py `_filtered`) and applies `tagged` (topics and entities, "any of"
over JSON lists) here; its lookups by id apply `passes`. tests/contracts checks that the
WHERE clause and this rule agree, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime

from episodic.domain.memories import Memory, MemoryKind
from episodic.domain.ports.memories import MemoryFilter
from episodic.domain.recall import Scope


def happened(m: Memory) -> datetime:
    """When a memory happened: an EVENT's event_time (its creation if it has none), else
    its creation. What `after` and `before` compare."""
    return (m.event_time or m.created_at) if m.kind is MemoryKind.EVENT else m.created_at


def expired(m: Memory, now: datetime) -> bool:
    """Past its expiry: never returned, whatever the filter."""
    return m.expires_at is not None and m.expires_at <= now


def tagged(m: Memory, where: MemoryFilter) -> bool:
    """Any of the wanted topics, and any of the wanted entities (exact, as stored)."""
    if where.topics and where.topics.isdisjoint(m.topics):
        return False
    return not (where.entities and where.entities.isdisjoint(m.entities))


def passes(m: Memory, scope: Scope, where: MemoryFilter, now: datetime) -> bool:
    """Whether `where` lets a listing or search of `scope` return `m` at `now`."""
    if m.scope != scope or expired(m, now):
        return False
    if where.kinds and m.kind not in where.kinds:
        return False
    if where.state is not None and m.state is not where.state:
        return False
    if m.superseded_by and not where.include_superseded:
        return False
    if where.episode_id and where.episode_id not in (m.episode_id, m.source.episode_id):
        return False
    at = happened(m)
    if (where.after is not None and at < where.after) or (where.before is not None and at >= where.before):
        return False
    return tagged(m, where)
