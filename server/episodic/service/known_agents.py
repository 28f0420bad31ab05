"""NOT_FOUND for an agent that does not exist, read once per agent: agents are never
deleted, so a positive answer is remembered (a bounded set, cleared when full)."""

from __future__ import annotations

from episodic.domain.ports.episodes import AgentStore

MAX_REMEMBERED = 100_000


async def require_existing_agent(
    agents: AgentStore, known: set[tuple[str, str]], tenant_id: str, agent_id: str
) -> None:
    key = (tenant_id, agent_id)
    if key in known:
        return
    await agents.get_agent(tenant_id, agent_id)
    if len(known) > MAX_REMEMBERED:
        known.clear()
    known.add(key)
