"""NOT_FOUND for an agent that does not exist, read once per agent: a positive answer is
remembered (a bounded set, cleared when full). An agent is deleted only by DeleteAgent, whose
`AgentChanged` reaches every replica's set through the change owner (`KnownAgents.changed`),
so a deleted agent is read again, and found missing, on every replica."""

from __future__ import annotations

from episodic.domain.changes import AgentChanged, CachesStale, Change
from episodic.domain.ports.episodes import AgentStore

MAX_REMEMBERED = 100_000


class KnownAgents(set[tuple[str, str]]):
    """(tenant, agent) pairs known to exist; one set shared by the use cases that check,
    watched by the change owner."""

    def changed(self, change: Change) -> None:
        if isinstance(change, AgentChanged):  # updated or deleted: read again
            self.discard((change.tenant_id, change.agent_id))
        elif isinstance(change, CachesStale):
            stale = [k for k in self if change.tenant_id is None or k[0] == change.tenant_id]
            self.difference_update(stale)


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
