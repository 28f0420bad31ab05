"""Retention in SQL: soft-deleting closed episodes past their agent's TTL (their digests go,
so search never sees them again), and purging soft-deleted ones after the grace period.
Both work in batches and keep their state in SQL, so a restart simply resumes."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, bindparam, delete, select, update

from episodic.domain.changes import Declared, Recorded
from episodic.domain.retention import SoftDeleted
from episodic.store import schema as s
from episodic.store.database import Database
from episodic.store.writer import GroupCommitWriter

E, A, D = s.episodes, s.agents, s.digests


class SqlRetention:
    """`tenant_caps`: tenants whose episodes may be kept at most this many days, whatever
    their agents say (an agent's 0, "forever", is capped too)."""

    def __init__(
        self, db: Database, writer: GroupCommitWriter, tenant_caps: Mapping[str, int] | None = None
    ) -> None:
        self._db = db
        self._writer = writer
        self._caps = dict(tenant_caps or {})

    async def soft_delete_due(
        self, now: datetime, limit: int, declared: Declared[list[SoftDeleted]]
    ) -> Recorded[list[SoftDeleted]]:
        """At most `limit` closed episodes whose agent's retention has run out, agent by
        agent (tenant, agent order), each agent's oldest first: marked deleted, their
        digests (vectors, full text) removed."""

        def op(conn: Connection) -> list[SoftDeleted]:
            due: list[SoftDeleted] = []
            for tenant_id, agent_id, agent_days in conn.execute(_AGENTS).all():
                days = effective_days(agent_days, self._caps.get(tenant_id, 0))
                if not days:
                    continue
                due += _expired(conn, tenant_id, agent_id, now - timedelta(days=days), limit - len(due))
                if len(due) >= limit:
                    break
            _mark_deleted(conn, due, now)
            return due

        return await self._writer.run(op, declared)

    async def purge_due(self, deleted_before: datetime, limit: int) -> int:
        """Hard-deletes at most `limit` episodes soft-deleted before the cut-off, with every
        row they own (foreign keys cascade); returns how many."""

        def op(conn: Connection) -> int:
            keys = conn.execute(_PURGEABLE, {"cut": deleted_before, "n": limit}).all()
            for tenant_id, episode_id in keys:
                conn.execute(delete(E).where(E.c.tenant_id == tenant_id, E.c.episode_id == episode_id))
            return len(keys)

        return await self._writer.run(op)


_AGENTS = select(A.c.tenant_id, A.c.agent_id, A.c.retention_days).order_by(A.c.tenant_id, A.c.agent_id)


def effective_days(agent_days: int, tenant_cap: int) -> int:
    """The agent's TTL, capped by its tenant's; 0 (keep forever) only if neither limits it."""
    limits = [d for d in (agent_days, tenant_cap) if d > 0]
    return min(limits) if limits else 0


_PURGEABLE = (
    select(E.c.tenant_id, E.c.episode_id)
    .where(E.c.deleted_at.is_not(None), E.c.deleted_at < bindparam("cut"))
    .order_by(E.c.deleted_at)
    .limit(bindparam("n"))
)


def _expired(conn: Connection, tenant_id: str, agent_id: str, cut: datetime, limit: int) -> list[SoftDeleted]:
    stmt = (
        select(E.c.user_id, E.c.episode_id)
        .where(E.c.tenant_id == tenant_id, E.c.agent_id == agent_id, E.c.state == "closed")
        .where(E.c.ended_at < cut, E.c.deleted_at.is_(None))
        .order_by(E.c.ended_at)
        .limit(limit)
    )
    return [SoftDeleted(tenant_id, agent_id, user, episode) for user, episode in conn.execute(stmt).all()]


def _mark_deleted(conn: Connection, due: list[SoftDeleted], now: datetime) -> None:
    for d in due:
        key: list[Any] = [E.c.tenant_id == d.tenant_id, E.c.episode_id == d.episode_id]
        conn.execute(update(E).where(*key).values(deleted_at=now))
        conn.execute(delete(D).where(D.c.tenant_id == d.tenant_id, D.c.episode_id == d.episode_id))
