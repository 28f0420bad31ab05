"""DeleteAgent: an agent that holds nothing goes at once; one that holds data is refused
unless the caller asks to erase it all. Then each of its users is erased through EraseUser's
own path (`EraseService.apply`: the ledger's intent first, the rows, vectors, caches and
change feed through the change owner, audited), a page of users at a time, and the agent row
goes with its documents in one transaction that refuses if data was written for it
meanwhile. The freed space is scrubbed once, after every user (before that last step). Its
`AgentChanged` makes every replica's caches of the agent (its PII policy, the agents known to
exist) forget it."""

from __future__ import annotations

from dataclasses import dataclass

from episodic.domain.access import require_agent
from episodic.domain.agent_deletion import AgentDeleted, AgentRemoved, holds_data, summed
from episodic.domain.changes import AgentChanged, Change, DocumentsRemoved
from episodic.domain.erasure import KINDS, Audit, Receipt, user_hash
from episodic.domain.erasure_ledger import LedgerEntry
from episodic.domain.knowledge import knowledge_scope
from episodic.domain.model import Caller
from episodic.domain.ports.episodes import AgentStore
from episodic.domain.validation import Violations, check_id
from episodic.errors import PermissionDenied
from episodic.service.erasure import EraseService

USERS_PER_PAGE = 100  # users whose erasure intents are written to the ledger at once


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentDeletion:
    agents: AgentStore
    erasure: EraseService

    async def delete_agent(self, caller: Caller, agent_id: str, erase_data: bool) -> AgentDeleted:
        v = Violations()
        check_id(v, "agent_id", agent_id)
        v.raise_if_any()
        require_agent(caller, agent_id)
        tenant = caller.tenant_id
        await self.agents.get_agent(tenant, agent_id)  # NOT_FOUND before anything else
        held = await self.agents.holdings(tenant, agent_id)
        if not held.empty and not erase_data:
            raise holds_data(agent_id, held)
        if held.documents and not caller.writes_knowledge:
            raise PermissionDenied(
                f"agent {agent_id!r} holds {held.documents} document(s), which this API key may "
                "not delete; make a key with `episodic keygen --knowledge-write`",
                reason="KNOWLEDGE_READ_ONLY",
            )
        receipts = await self._erase_users(tenant, agent_id) if erase_data else []
        erased = summed(r.counts for r in receipts)
        # before the agent goes: a deletion refused at its last step has still erased users
        scrubbed = await self.erasure.eraser.scrub({k: erased[k] for k in KINDS})
        committed = await self.erasure.changes.commit(
            lambda declared: self.agents.delete_agent(tenant, agent_id, declared),
            lambda removed: _removed(tenant, removed),
        )
        return AgentDeleted(
            agent_id=agent_id,
            deleted_at=self.erasure.clock(),
            erasure_ids=[r.erasure_id for r in receipts],
            counts=erased | {"documents": len(committed.result.documents)},
            index_vectors=sum(r.index_vectors for r in receipts) + committed.vectors_removed,
            storage_scrubbed=scrubbed,
        )

    async def _erase_users(self, tenant_id: str, agent_id: str) -> list[Receipt]:
        """Every user of the agent, erased as EraseUser with agent_id erases one: a page of
        intents in the ledger, then each erasure."""
        e = self.erasure
        receipts: list[Receipt] = []
        after: str | None = None
        while users := await self.agents.user_ids(tenant_id, agent_id, after, USERS_PER_PAGE):
            audits = [
                (u, Audit(f"er_{e.new_id()}", user_hash(tenant_id, u), agent_id, e.clock())) for u in users
            ]
            await e.ledger.append([LedgerEntry.of(tenant_id, audit) for _, audit in audits])
            for user_id, audit in audits:
                receipts.append(await e.apply(tenant_id, user_id, audit, scrub=False))
            after = users[-1]
        return receipts


def _removed(tenant_id: str, removed: AgentRemoved) -> list[Change]:
    scope = knowledge_scope(tenant_id, removed.agent.agent_id)
    return [
        DocumentsRemoved([(scope, d) for d in removed.documents]),
        AgentChanged(tenant_id, removed.agent.agent_id),
    ]
