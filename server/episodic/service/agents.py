"""Agent definitions: create, read, update, list."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from episodic.domain.access import require_agent
from episodic.domain.agents import AgentDraft, build_agent, update_agent
from episodic.domain.changes import AgentChanged
from episodic.domain.model import Agent, Caller, Page
from episodic.domain.paging import decode_token, encode_token, read_id
from episodic.domain.ports.changes import ChangeOwner
from episodic.domain.ports.clock import Clock
from episodic.domain.ports.episodes import AgentStore
from episodic.domain.ports.models import TokenCounter
from episodic.domain.validation import Limits, Violations, check_id, resolve_page_size


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentService:
    store: AgentStore
    tokens: TokenCounter
    limits: Limits
    clock: Clock
    changes: ChangeOwner  # an update changes what the agent's conversations see

    async def create_agent(self, caller: Caller, draft: AgentDraft) -> Agent:
        agent = build_agent(caller.tenant_id, draft, self.tokens, self.limits, self.clock())
        require_agent(caller, agent.agent_id)
        return await self.store.create_agent(agent)

    async def get_agent(self, caller: Caller, agent_id: str) -> Agent:
        _require_id("agent_id", agent_id)
        require_agent(caller, agent_id)
        return await self.store.get_agent(caller.tenant_id, agent_id)

    async def update_agent(self, caller: Caller, draft: AgentDraft, mask: Sequence[str]) -> Agent:
        _require_id("agent.agent_id", draft.agent_id)
        require_agent(caller, draft.agent_id)
        now = self.clock()

        def change(agent: Agent) -> Agent:
            return update_agent(agent, draft, mask, self.tokens, self.limits, now)

        committed = await self.changes.commit(
            lambda declared: self.store.update_agent(caller.tenant_id, draft.agent_id, change, declared),
            lambda _: [AgentChanged(caller.tenant_id, draft.agent_id)],
            exclusive=False,
        )
        return committed.result

    async def list_agents(self, caller: Caller, page_size: int, page_token: str) -> Page[Agent]:
        v = Violations()
        limit = resolve_page_size(v, "page_size", page_size, self.limits)
        v.raise_if_any()
        position = decode_token(page_token, {"list": "agents"})
        after = read_id(position, "after") if position else None
        agents = await self.store.list_agents(caller.tenant_id, after, limit + 1, only=caller.agents)
        if len(agents) <= limit:
            return Page(agents)
        token = encode_token({"after": agents[limit - 1].agent_id}, {"list": "agents"})
        return Page(agents[:limit], token)


def _require_id(field: str, value: str) -> None:
    v = Violations()
    check_id(v, field, value)
    v.raise_if_any()
