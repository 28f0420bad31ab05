"""ListUsers: the users of one agent, a page at a time, with their episode and memory counts
and their last activity."""

from __future__ import annotations

from dataclasses import dataclass

from episodic.domain.access import require_agent
from episodic.domain.inspection import UserSummary
from episodic.domain.model import Caller, Page
from episodic.domain.paging import decode_token, page_of, read_id
from episodic.domain.ports.episodes import AgentStore, UserDirectory
from episodic.domain.validation import Limits, Violations, check_id, resolve_page_size


@dataclass(frozen=True, slots=True, kw_only=True)
class UserService:
    users: UserDirectory
    agents: AgentStore
    limits: Limits

    async def list_users(
        self, caller: Caller, agent_id: str, page_size: int, page_token: str
    ) -> Page[UserSummary]:
        """By user id. A key restricted to other agents is refused (PERMISSION_DENIED, as
        GetAgent); an agent that does not exist is NOT_FOUND."""
        v = Violations()
        check_id(v, "agent_id", agent_id)
        limit = resolve_page_size(v, "page_size", page_size, self.limits)
        v.raise_if_any()
        require_agent(caller, agent_id)
        query = {"agent_id": agent_id, "list": "users"}
        position = decode_token(page_token, query)
        after = read_id(position, "user_id") if position else None
        await self.agents.get_agent(caller.tenant_id, agent_id)
        found = await self.users.list_users(caller.tenant_id, agent_id, after, limit + 1)
        return page_of(found, limit, lambda u: {"user_id": u.user_id}, query)
