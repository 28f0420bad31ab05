"""The erasure ledger's entries and the rules of its replay. Pure.

Every erasure is also appended to a ledger kept OUTSIDE the database (store/ledger.py),
before the database's own erasure commits. The database's `erasures` audit table is rolled
back with everything else when an older backup is restored; the ledger is not. So an entry
the database has not recorded names an erasure this database does not reflect (made after
its backup, or whose transaction failed after its intent was written): its user's rows are
erased again before anything is served (service/erasure_replay.py). An entry carries what
the audit row carries: a hash of the user id, never the id.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from episodic.domain.erasure import KINDS, Audit, user_hash

# The fields of an entry as the ledger file spells them, in this order.
FIELDS = ("erasure_id", "tenant_id", "user_hash", "agent_id", "erased_at")


class UnreadableEntry(ValueError):
    """A ledger line that is not an entry (a line torn by a crash mid-append, or damage)."""


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One erasure as the ledger keeps it: which tenant's user (by hash), in which agent
    ("" = every agent), when."""

    erasure_id: str
    tenant_id: str
    user_hash: str
    agent_id: str
    erased_at: datetime

    @property
    def key(self) -> tuple[str, str]:
        """What identifies an erasure in the audit table: (tenant, erasure id)."""
        return (self.tenant_id, self.erasure_id)

    @classmethod
    def of(cls, tenant_id: str, audit: Audit) -> LedgerEntry:
        return cls(audit.erasure_id, tenant_id, audit.user_hash, audit.agent_id, audit.erased_at)

    def audit(self) -> Audit:
        """The audit row a replay records: the original erasure's id and time, so the
        database then reads as if it had made that erasure itself."""
        return Audit(self.erasure_id, self.user_hash, self.agent_id, self.erased_at)

    def line(self) -> str:
        """One JSON line, newline included."""
        values = {
            "erasure_id": self.erasure_id,
            "tenant_id": self.tenant_id,
            "user_hash": self.user_hash,
            "agent_id": self.agent_id,
            "erased_at": self.erased_at.isoformat(),
        }
        return json.dumps(values, separators=(",", ":")) + "\n"

    @classmethod
    def parse(cls, line: str) -> LedgerEntry:
        """UnreadableEntry unless `line` is one entry as `line()` writes it."""
        try:
            values = json.loads(line)
        except ValueError as exc:
            raise UnreadableEntry("not JSON") from exc
        if not isinstance(values, dict) or not all(isinstance(values.get(f), str) for f in FIELDS):
            raise UnreadableEntry(f"not an object of the strings {', '.join(FIELDS)}")
        try:
            erased_at = datetime.fromisoformat(values["erased_at"])
        except ValueError as exc:
            raise UnreadableEntry("erased_at is not an ISO 8601 time") from exc
        if erased_at.tzinfo is None or not values["erasure_id"] or not values["tenant_id"]:
            raise UnreadableEntry("erased_at has no time zone, or an id is empty")
        return cls(
            values["erasure_id"], values["tenant_id"], values["user_hash"], values["agent_id"], erased_at
        )


def pending_by_tenant(entries: Iterable[LedgerEntry]) -> dict[str, list[LedgerEntry]]:
    """Entries grouped by tenant, in ledger order (the scan of a tenant's users is shared by
    all of that tenant's pending entries)."""
    grouped: dict[str, list[LedgerEntry]] = defaultdict(list)
    for entry in entries:
        grouped[entry.tenant_id].append(entry)
    return dict(grouped)


def matching(tenant_id: str, user_ids: Iterable[str], hashes: Iterable[str]) -> dict[str, str]:
    """Of `user_ids` (a tenant's), those whose hash is one of `hashes`: hash -> user id."""
    wanted = set(hashes)
    found: dict[str, str] = {}
    for user_id in user_ids:
        hashed = user_hash(tenant_id, user_id)
        if hashed in wanted:
            found[hashed] = user_id
    return found


@dataclass(slots=True)
class Replayed:
    """What one replay of the ledger found and did; counts only, never a user id."""

    entries: int = 0  # ledger entries read
    pending: int = 0  # of those, erasures this database had not recorded
    users: int = 0  # users found with rows here and erased again
    nothing_left: int = 0  # pending erasures whose user had no rows here: audit row recorded only
    adopted: int = 0  # audit rows of this database the ledger lacked, appended to it
    unreadable_lines: int = 0  # ledger lines that are not entries (skipped)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))  # rows erased

    def add(self, counts: Mapping[str, int]) -> None:
        for kind, n in counts.items():
            self.counts[kind] = self.counts.get(kind, 0) + n

    def summary(self) -> str:
        """The one line an operator reads (the server's log, `episodic restore`'s report)."""
        line = (
            f"re-erased {self.users} user{'s' if self.users != 1 else ''} erased after this database's backup"
        )
        if self.nothing_left:
            line += (
                f" ({self.nothing_left} erasure{'s' if self.nothing_left != 1 else ''} found nothing left)"
            )
        return line
