"""The `ErasureLedger` port's contract, held by the file of JSON lines (store/ledger.py)
and by the fake of tests/fakes.py: appended entries read back whole, oldest first, at most
`size` at a time, appends accumulate, and a ledger that cannot be written answers
Unavailable and keeps nothing. (What only a file has, torn lines and several processes
sharing it, is tests/integration/test_erasure_ledger_file.py's.)"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from episodic.domain.erasure_ledger import LedgerEntry
from episodic.domain.ports.users import ErasureLedger
from episodic.errors import Unavailable
from episodic.store.ledger import FileErasureLedger
from tests.fakes import FakeErasureLedger

T0 = datetime(2025, 5, 1, 9, 30, tzinfo=UTC)


@dataclass(frozen=True)
class Ledgers:
    """A writable ledger, and one that cannot be written (a full or missing disk)."""

    writable: Callable[[], ErasureLedger]
    broken: Callable[[], ErasureLedger]


@pytest.fixture(params=["fake", "file"])
def ledgers(request: pytest.FixtureRequest, tmp_path: Path) -> Ledgers:
    if request.param == "fake":
        return Ledgers(FakeErasureLedger, lambda: FakeErasureLedger(broken=True))
    path, nowhere = tmp_path / "episodic.db.erasures.jsonl", tmp_path / "no-such-directory" / "ledger.jsonl"
    return Ledgers(lambda: FileErasureLedger(path), lambda: FileErasureLedger(nowhere))


def entry(n: int, agent_id: str = "") -> LedgerEntry:
    return LedgerEntry(f"erasure-{n}", f"tenant-{n % 2}", f"hash-{n}", agent_id, T0 + timedelta(seconds=n))


async def read(ledger: ErasureLedger, size: int = 100) -> list[list[LedgerEntry]]:
    return [batch async for batch in ledger.batches(size)]


async def test_a_new_ledger_holds_nothing_and_says_where_it_is(ledgers: Ledgers) -> None:
    ledger = ledgers.writable()
    assert [e for batch in await read(ledger) for e in batch] == []
    assert ledger.unreadable == 0
    assert ledger.where


async def test_entries_read_back_whole_and_oldest_first_whatever_the_appends(ledgers: Ledgers) -> None:
    ledger = ledgers.writable()
    written = [entry(1), entry(2, agent_id="agent-a"), entry(3), entry(4), entry(5)]
    await ledger.append(written[:1])
    await ledger.append(written[1:4])
    await ledger.append([])  # nothing to add: nothing changes
    await ledger.append(written[4:])
    assert [e for batch in await read(ledger) for e in batch] == written
    assert ledger.unreadable == 0


@pytest.mark.parametrize("size", [1, 2, 5, 100])
async def test_batches_hold_at_most_size_entries(ledgers: Ledgers, size: int) -> None:
    ledger = ledgers.writable()
    written = [entry(n) for n in range(7)]
    await ledger.append(written)
    batches = await read(ledger, size)
    assert all(len(batch) <= size for batch in batches)
    assert [e for batch in batches for e in batch] == written
    assert len(batches) >= -(-len(written) // size)


async def test_a_ledger_read_twice_reads_the_same(ledgers: Ledgers) -> None:
    ledger = ledgers.writable()
    await ledger.append([entry(1), entry(2)])
    assert await read(ledger) == await read(ledger)


async def test_a_ledger_that_cannot_be_written_is_unavailable_and_keeps_nothing(ledgers: Ledgers) -> None:
    ledger = ledgers.broken()
    with pytest.raises(Unavailable) as refused:
        await ledger.append([entry(1)])
    assert refused.value.reason == "ERASURE_LEDGER_UNAVAILABLE"
    assert [e for batch in await read(ledger) for e in batch] == []
