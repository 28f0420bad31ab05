"""Replaying the erasure ledger at start: a restore never resurrects an erased user.

The ledger (kept outside the database) holds every erasure; the database's `erasures`
audit table holds those it made. An entry the database lacks is an erasure made after the
database's backup was taken (or one whose transaction failed after its intent was written).
Its user is found by hash among the tenant's user ids (the ledger never holds the id) and
erased again through `EraseService.apply`, the path of a call, so vectors, caches and the
change feed follow; the audit row keeps the original erasure's id and time, so the next
replay finds it recorded. An erasure whose user has nothing left here gets its audit row
alone. Then the audit rows the ledger lacks (erasures made before the ledger existed, or a
ledger lost) are appended to it, so a restore of a still older backup is covered too.

Cost: one read of the ledger (about 220 bytes per erasure; the keys of every entry are
held while it runs) with one indexed query per batch; the user scan runs only for tenants
with something pending, a page of user ids at a time (an index range scan per page).
"""

from __future__ import annotations

from dataclasses import dataclass

from episodic.domain.erasure_ledger import LedgerEntry, Replayed, matching, pending_by_tenant
from episodic.domain.ports.users import ErasureLedger, ErasureRecords
from episodic.service.erasure import EraseService

BATCH = 1000  # ledger entries, audit rows or user ids per read


@dataclass(frozen=True, slots=True, kw_only=True)
class ErasureReplay:
    ledger: ErasureLedger
    records: ErasureRecords
    erasure: EraseService
    batch: int = BATCH

    async def run(self) -> Replayed:
        report = Replayed()
        pending, known = await self._pending(report)
        for tenant_id, entries in pending_by_tenant(pending).items():
            await self._replay_tenant(tenant_id, entries, report)
        if any(report.counts.values()):  # one scrub for the whole replay
            await self.erasure.eraser.scrub(report.counts)
        report.adopted = await self._adopt(known)
        return report

    async def _pending(self, report: Replayed) -> tuple[list[LedgerEntry], set[tuple[str, str]]]:
        """The entries the database has not recorded (each once: two replicas adopting the same
        audit rows may both have appended them), and the keys of every entry."""
        pending: list[LedgerEntry] = []
        known: set[tuple[str, str]] = set()
        async for batch in self.ledger.batches(self.batch):
            fresh = {e.key: e for e in batch if e.key not in known}
            known.update(fresh)
            recorded = await self.records.recorded(list(fresh))
            pending.extend(e for key, e in fresh.items() if key not in recorded)
            report.entries += len(batch)
        report.pending = len(pending)
        report.unreadable_lines = self.ledger.unreadable
        return pending, known

    async def _replay_tenant(self, tenant_id: str, entries: list[LedgerEntry], report: Replayed) -> None:
        found = await self._find_users(tenant_id, {e.user_hash for e in entries})
        erased: set[str] = set()
        for entry in entries:
            user_id = found.get(entry.user_hash)
            if user_id is None:
                await self.records.record(tenant_id, entry.audit())
                report.nothing_left += 1
                continue
            receipt = await self.erasure.apply(tenant_id, user_id, entry.audit(), scrub=False)
            report.add(receipt.counts)
            if any(receipt.counts.values()):
                erased.add(entry.user_hash)
            else:  # an earlier entry of the same user took everything
                report.nothing_left += 1
        report.users += len(erased)

    async def _find_users(self, tenant_id: str, hashes: set[str]) -> dict[str, str]:
        """hash -> user id, for the hashes that belong to a user with rows in the tenant; the
        walk stops once every hash is found."""
        found: dict[str, str] = {}
        cursor = ""
        while True:
            user_ids, cursor = await self.records.user_page(tenant_id, cursor, self.batch)
            found |= matching(tenant_id, user_ids, hashes - found.keys())
            if not cursor or found.keys() == hashes:
                return found

    async def _adopt(self, known: set[tuple[str, str]]) -> int:
        adopted, after = 0, None
        while rows := await self.records.audits(after, self.batch):
            missing = [entry for entry in rows if entry.key not in known]
            await self.ledger.append(missing)  # one fsync per page
            adopted += len(missing)
            after = rows[-1].key
        return adopted
