"""A user's data as a whole: erasure (with its records and ledger) and export/import."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from episodic.domain.changes import Declared, Recorded
from episodic.domain.erasure import Audit, Erased
from episodic.domain.erasure_ledger import LedgerEntry
from episodic.domain.memories import Memory
from episodic.domain.transfer import EpisodeImported, EpisodeRows, ErasureWatch


class UserTransfer(Protocol):
    """ExportUser / ImportUser's storage (domain/transfer.py is the format): one user's rows
    as export records, read as of one snapshot, and an episode's records written in one
    transaction."""

    def export(
        self, tenant_id: str, user_id: str, agent_ids: Sequence[str] | None
    ) -> AsyncIterator[tuple[str, dict[str, object]]]:
        """(record type, record): each episode and what it owns, then the memories."""
        ...

    async def erasures_of(self, tenant_id: str, user_hash: str) -> frozenset[str]:
        """The ids of the user's erasures committed so far."""
        ...

    def episode_rows(self, part: str, records: Sequence[Mapping[str, object]], user_id: str) -> EpisodeRows:
        """An episode part's records, checked, as the rows to write (under `user_id`)."""
        ...

    def memories(
        self, part: str, records: Sequence[Mapping[str, object]], tenant_id: str, user_id: str
    ) -> list[Memory]: ...

    async def missing_agents(self, tenant_id: str, agent_ids: Iterable[str]) -> list[str]: ...

    async def import_episode(
        self,
        tenant_id: str,
        rows: EpisodeRows,
        now: datetime,
        watch: ErasureWatch,
        declared: Declared[EpisodeImported],
    ) -> Recorded[EpisodeImported]:
        """Writes the episode unless it is held; one held with other content is ALREADY_EXISTS.
        ABORTED (USER_ERASED) if an erasure of the user not in `watch` has committed: checked
        in the write's transaction, ordered with the erasure's."""
        ...


class Eraser(Protocol):
    """Deletes every row of one user (in one agent, or all), audited; then scrubs the free
    space of what was deleted (`counts`, per receipt kind: all zero needs no scrub)."""

    async def erase(
        self, tenant_id: str, user_id: str, agent_id: str, audit: Audit, declared: Declared[Erased]
    ) -> Recorded[Erased]: ...

    async def scrub(self, counts: Mapping[str, int]) -> bool: ...


class ErasureRecords(Protocol):
    """What the erasure ledger's replay asks the database (the eraser's store, which keeps
    the `erasures` audit table): which erasures it has recorded, which users a tenant has
    rows of, and an audit row recorded alone (for an erasure whose user has nothing left)."""

    async def recorded(self, keys: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """Of these (tenant, erasure id), those the audit table holds."""
        ...

    async def audits(self, after: tuple[str, str] | None, limit: int) -> list[LedgerEntry]:
        """Every audit row as a ledger entry, ordered by (tenant, erasure id), after `after`:
        what the ledger must hold too."""
        ...

    async def user_page(self, tenant_id: str, cursor: str, limit: int) -> tuple[list[str], str]:
        """The user ids the tenant has episodes or memories of, about `limit` at a time from
        `cursor` ("" to begin); the next cursor, "" after the last page. An id may come
        more than once (it has rows under several agents)."""
        ...

    async def record(self, tenant_id: str, audit: Audit) -> bool:
        """Inserts the audit row of an erasure that found nothing to delete; False when the
        row was there already (another replica replayed it first)."""
        ...


class ErasureLedger(Protocol):
    """Every erasure, kept outside the database so that restoring an older backup cannot
    roll it back; append-only."""

    async def append(self, entries: Sequence[LedgerEntry]) -> None:
        """Durable (on disk) when it returns; Unavailable when it cannot be written."""
        ...

    def batches(self, size: int) -> AsyncIterator[list[LedgerEntry]]:
        """Every entry, oldest first, at most `size` at a time. A line that is no entry (torn
        by a crash mid-append: its erasure never went ahead) is skipped and counted in
        `unreadable`."""
        ...

    @property
    def unreadable(self) -> int:
        """Lines skipped by the last full read."""
        ...

    @property
    def where(self) -> str:
        """Where it is kept, for operators ("" when there is none)."""
        ...
