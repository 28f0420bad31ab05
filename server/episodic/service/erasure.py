"""EraseUser: every row and vector of one user in the caller's tenant, with a receipt.

The erasure is first appended to the erasure ledger (kept outside the database, so that a
restore of an older backup cannot roll it back: domain/erasure_ledger.py), durably, as an
intent: a ledger that cannot be written fails the call with UNAVAILABLE and nothing is
erased; a database erasure that fails after the intent is written is replayed at the next
start (service/erasure_replay.py), which is what the user asked for.

The rows are deleted and the vectors removed as one change through the change owner, which
orders it with every other index writer: a digest finishing during an erasure can neither
leave vectors behind nor bring them back. The change feed carries it to the other
replicas as `UserErased` (no row of the feed names the user afterwards); recall reads
digests from SQL too, so no replica surfaces an erased episode even before it hears.
"""

from __future__ import annotations

from dataclasses import dataclass

from episodic.domain.access import require_agent, require_every_agent
from episodic.domain.changes import EpisodesRemoved, MemoriesRemoved, UserErased
from episodic.domain.erasure import Audit, Erased, Receipt, user_hash
from episodic.domain.erasure_ledger import LedgerEntry
from episodic.domain.model import Caller
from episodic.domain.ports.changes import ChangeOwner
from episodic.domain.ports.clock import Clock, IdFactory
from episodic.domain.ports.users import Eraser, ErasureLedger
from episodic.domain.recall import Scope
from episodic.domain.validation import Violations, check_id


@dataclass(frozen=True, slots=True, kw_only=True)
class EraseService:
    eraser: Eraser
    changes: ChangeOwner
    clock: Clock
    new_id: IdFactory
    ledger: ErasureLedger

    async def erase_user(self, caller: Caller, user_id: str, agent_id: str = "") -> Receipt:
        v = Violations()
        check_id(v, "user_id", user_id)
        check_id(v, "agent_id", agent_id, required=False)
        v.raise_if_any()
        if agent_id:
            require_agent(caller, agent_id)
        else:  # a key limited to some agents may not erase what other agents hold
            require_every_agent(caller, "EraseUser without agent_id")
        tenant = caller.tenant_id
        audit = Audit(f"er_{self.new_id()}", user_hash(tenant, user_id), agent_id, self.clock())
        await self.ledger.append([LedgerEntry.of(tenant, audit)])  # the intent, before anything goes
        return await self.apply(tenant, user_id, audit)

    async def apply(self, tenant_id: str, user_id: str, audit: Audit, *, scrub: bool = True) -> Receipt:
        """The erasure itself, audited as `audit`: the ledger's replay erases through here too,
        so vectors, caches and the change feed follow as for a call. `scrub=False` leaves the
        freed space to one scrub after a batch of erasures (the receipt says not scrubbed)."""
        committed = await self.changes.commit(
            lambda declared: self.eraser.erase(tenant_id, user_id, audit.agent_id, audit, declared),
            lambda erased: [
                _removed(tenant_id, user_id, erased),
                MemoriesRemoved(erased.memories),
                UserErased(tenant_id, audit.user_hash),
            ],
        )
        counts = committed.result.counts
        scrubbed = await self.eraser.scrub(counts) if scrub else False  # nothing deleted: nothing to scrub
        return Receipt(
            audit.erasure_id, audit.erased_at, audit.user_hash, counts, committed.result.vectors, scrubbed
        )


def _removed(tenant_id: str, user_id: str, erased: Erased) -> EpisodesRemoved:
    scoped = [(Scope(tenant_id, agent, user_id), episode) for agent, episode in erased.episodes]
    return EpisodesRemoved(scoped)
