"""Agent definitions in SQL. Writes are synchronous operations run by the writer."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, bindparam, select, update

from episodic.domain.changes import Declared, Recorded
from episodic.domain.model import Agent
from episodic.errors import AlreadyExists, NotFound
from episodic.store import schema as s
from episodic.store.database import Database
from episodic.store.dialect import InsertIgnoringConflicts
from episodic.store.rows import agent_from_row, agent_values
from episodic.store.writer import GroupCommitWriter

A = s.agents
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


def _key(tenant_id: str, agent_id: str) -> dict[str, object]:
    return {"b_tenant": tenant_id, "b_agent": agent_id}


def _agent_or_missing(row: object, agent_id: str) -> Agent:
    if row is None:
        raise NotFound("agent", agent_id)
    return agent_from_row(row)  # type: ignore[arg-type]
