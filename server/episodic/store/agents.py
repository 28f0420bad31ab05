"""Agent definitions in SQL."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from episodic.domain.model import Agent
from episodic.errors import AlreadyExists, NotFound
from episodic.store import schema as s
from episodic.store.database import Database
from episodic.store.dialect import insert_ignoring_conflicts
from episodic.store.rows import agent_from_row, agent_values
from episodic.store.writer import GroupCommitWriter


class SqlAgentStore:
    def __init__(self, db: Database, writer: GroupCommitWriter) -> None:
        self._db = db
        self._writer = writer

    async def create_agent(self, agent: Agent) -> Agent:
        async def op(conn: AsyncConnection) -> Agent:
            stmt = insert_ignoring_conflicts(conn, s.agents, agent_values(agent))
            if (await conn.execute(stmt)).rowcount != 1:
                raise AlreadyExists(f"agent {agent.agent_id!r} already exists", reason="AGENT_EXISTS")
            return agent

        return await self._writer.run(op)

    async def get_agent(self, tenant_id: str, agent_id: str) -> Agent:
        async with self._db.reader.connect() as conn:
            return await _load_agent(conn, tenant_id, agent_id)

    async def update_agent(self, tenant_id: str, agent_id: str, change: Callable[[Agent], Agent]) -> Agent:
        async def op(conn: AsyncConnection) -> Agent:
            changed = change(await _load_agent(conn, tenant_id, agent_id, lock=True))
            a = s.agents
            await conn.execute(
                update(a)
                .where(a.c.tenant_id == tenant_id, a.c.agent_id == agent_id)
                .values(agent_values(changed))
            )
            return changed

        return await self._writer.run(op)

    async def list_agents(self, tenant_id: str, after: str | None, limit: int) -> list[Agent]:
        a = s.agents
        stmt = select(a).where(a.c.tenant_id == tenant_id)
        if after is not None:
            stmt = stmt.where(a.c.agent_id > after)
        stmt = stmt.order_by(a.c.agent_id).limit(limit)
        async with self._db.reader.connect() as conn:
            return [agent_from_row(r) for r in (await conn.execute(stmt)).mappings()]


async def _load_agent(conn: AsyncConnection, tenant_id: str, agent_id: str, *, lock: bool = False) -> Agent:
    a = s.agents
    stmt = select(a).where(a.c.tenant_id == tenant_id, a.c.agent_id == agent_id)
    if lock:
        stmt = stmt.with_for_update()
    row = (await conn.execute(stmt)).mappings().first()
    if row is None:
        raise NotFound("agent", agent_id)
    return agent_from_row(row)
