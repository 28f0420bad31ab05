"""Agent definitions in SQL. Writes are synchronous operations run by the writer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import CompoundSelect, Connection, bindparam, delete, func, select, union, update

from episodic.domain.agent_deletion import AgentHoldings, AgentRemoved, holds_data
from episodic.domain.changes import Declared, Recorded
from episodic.domain.model import Agent
from episodic.errors import AlreadyExists, NotFound
from episodic.store import schema as s
from episodic.store.database import Database
from episodic.store.dialect import InsertIgnoringConflicts
from episodic.store.rows import agent_from_row, agent_values
from episodic.store.writer import GroupCommitWriter

A, E, MEM, DOC, CHUNK = s.agents, s.episodes, s.memories, s.knowledge_documents, s.knowledge_chunks
_AGENT = select(A).where(A.c.tenant_id == bindparam("b_tenant"), A.c.agent_id == bindparam("b_agent"))
_INSERT_AGENT = InsertIgnoringConflicts(A)


class SqlAgentStore:
    def __init__(self, db: Database, writer: GroupCommitWriter) -> None:
        self._db = db
        self._writer = writer

    async def create_agent(self, agent: Agent) -> Agent:
        def op(conn: Connection) -> Agent:
            if not _INSERT_AGENT.inserted(conn, agent_values(agent)):
                raise AlreadyExists(f"agent {agent.agent_id!r} already exists", reason="AGENT_EXISTS")
            return agent

        return await self._writer.run(op)

    async def get_agent(self, tenant_id: str, agent_id: str) -> Agent:
        row = await self._db.quick_read(
            lambda conn: conn.execute(_AGENT, _key(tenant_id, agent_id)).mappings().first()
        )
        return _agent_or_missing(row, agent_id)

    async def update_agent(
        self, tenant_id: str, agent_id: str, change: Callable[[Agent], Agent], declared: Declared[Agent]
    ) -> Recorded[Agent]:
        def op(conn: Connection) -> Agent:
            row = conn.execute(_AGENT.with_for_update(), _key(tenant_id, agent_id)).mappings().first()
            changed = change(_agent_or_missing(row, agent_id))
            stmt = update(A).where(A.c.tenant_id == tenant_id, A.c.agent_id == agent_id)
            conn.execute(stmt.values(agent_values(changed)))
            return changed

        return await self._writer.run(op, declared)

    async def list_agents(
        self, tenant_id: str, after: str | None, limit: int, only: frozenset[str] | None = None
    ) -> list[Agent]:
        stmt = select(A).where(A.c.tenant_id == tenant_id)
        if only is not None:
            stmt = stmt.where(A.c.agent_id.in_(sorted(only)))
        if after is not None:
            stmt = stmt.where(A.c.agent_id > after)
        stmt = stmt.order_by(A.c.agent_id).limit(limit)
        return await self._db.read(lambda conn: [agent_from_row(r) for r in conn.execute(stmt).mappings()])

    async def holdings(self, tenant_id: str, agent_id: str) -> AgentHoldings:
        return await self._db.read(lambda conn: _holdings(conn, tenant_id, agent_id))

    async def user_ids(self, tenant_id: str, agent_id: str, after: str | None, limit: int) -> list[str]:
        """The first `limit` of the episodes' and the memories' next user ids (each a walk of
        an index that starts (tenant, agent, user))."""
        pages = [
            select(t.c.user_id)
            .where(
                t.c.tenant_id == tenant_id,
                t.c.agent_id == agent_id,
                *([t.c.user_id > after] if after is not None else []),
            )
            .distinct()
            .order_by(t.c.user_id)
            .limit(limit)
            for t in (E, MEM)
        ]
        return await self._db.read(
            lambda conn: sorted({r[0] for page in pages for r in conn.execute(page)})[:limit]
        )

    async def delete_agent(
        self, tenant_id: str, agent_id: str, declared: Declared[AgentRemoved]
    ) -> Recorded[AgentRemoved]:
        def op(conn: Connection) -> AgentRemoved:
            row = conn.execute(_AGENT.with_for_update(), _key(tenant_id, agent_id)).mappings().first()
            agent = _agent_or_missing(row, agent_id)
            held = _holdings(conn, tenant_id, agent_id)
            if held.episodes or held.memories:
                raise holds_data(agent_id, held, meanwhile=True)
            mine = (DOC.c.tenant_id == tenant_id, DOC.c.agent_id == agent_id)
            documents = [r[0] for r in conn.execute(select(DOC.c.document_id).where(*mine))]
            # The chunks would go in the cascade; named here so no setting of the connection
            # (SQLite's foreign_keys) decides it, as the knowledge store's delete does.
            conn.execute(delete(CHUNK).where(CHUNK.c.tenant_id == tenant_id, CHUNK.c.agent_id == agent_id))
            conn.execute(delete(DOC).where(*mine))
            conn.execute(delete(A).where(A.c.tenant_id == tenant_id, A.c.agent_id == agent_id))
            return AgentRemoved(agent, sorted(documents))

        return await self._writer.run(op, declared)


def _users_of(tenant_id: str, agent_id: str, after: str | None) -> CompoundSelect[str]:
    """Every user with rows of the agent: episodes (soft-deleted ones too) or memories."""
    episodes = select(E.c.user_id).where(E.c.tenant_id == tenant_id, E.c.agent_id == agent_id)
    memories = select(MEM.c.user_id).where(MEM.c.tenant_id == tenant_id, MEM.c.agent_id == agent_id)
    if after is not None:
        episodes, memories = episodes.where(E.c.user_id > after), memories.where(MEM.c.user_id > after)
    return union(episodes, memories)


def _holdings(conn: Connection, tenant_id: str, agent_id: str) -> AgentHoldings:
    def counted(table: Any) -> int:
        stmt = (
            select(func.count())
            .select_from(table)
            .where(table.c.tenant_id == tenant_id, table.c.agent_id == agent_id)
        )
        return int(conn.execute(stmt).scalar_one())

    users = _users_of(tenant_id, agent_id, None).subquery()
    count_users = int(conn.execute(select(func.count()).select_from(users)).scalar_one())
    return AgentHoldings(count_users, counted(E), counted(MEM), counted(DOC))


def _key(tenant_id: str, agent_id: str) -> dict[str, object]:
    return {"b_tenant": tenant_id, "b_agent": agent_id}


def _agent_or_missing(row: object, agent_id: str) -> Agent:
    if row is None:
        raise NotFound("agent", agent_id)
    return agent_from_row(row)  # type: ignore[arg-type]
