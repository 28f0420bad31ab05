"""The erasure ledger as a file (store/ledger.py) and the SQLite lease (store/lease.py), on
a real file system: entries read back in order; a line torn by a crash mid-append is skipped
and never glued to the next entry; a ledger that cannot be written is UNAVAILABLE without
naming its path to the caller; a lease held shared by servers refuses the exclusive one of
a restore (and the reverse), and a killed holder leaves none behind."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from episodic.domain.erasure import user_hash
from episodic.domain.erasure_ledger import LedgerEntry
from episodic.errors import Unavailable
from episodic.store.lease import DatabaseInUse, SqliteLease
from episodic.store.ledger import FileErasureLedger, LedgerUnreadable

WHEN = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def entry(n: int) -> LedgerEntry:
    return LedgerEntry(f"er_{n}", "acme", user_hash("acme", f"user-{n}"), "", WHEN)


async def read_all(ledger: FileErasureLedger, size: int = 2) -> list[LedgerEntry]:
    return [e async for batch in ledger.batches(size) for e in batch]


async def test_entries_read_back_in_the_order_they_were_appended(tmp_path: Path) -> None:
    path = tmp_path / "episodic.db.erasures.jsonl"
    ledger = FileErasureLedger(path)
    assert await read_all(ledger) == []  # no file yet: no erasure was ever made
    await ledger.append([entry(1)])
    await ledger.append([entry(2), entry(3)])
    assert await read_all(ledger) == [entry(1), entry(2), entry(3)]
    assert path.stat().st_mode & 0o777 == 0o600 and "user-1" not in path.read_text()


async def test_a_line_torn_by_a_crash_is_skipped_and_the_next_entry_starts_a_line_of_its_own(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = FileErasureLedger(path)
    await ledger.append([entry(1)])
    with path.open("a") as file:
        file.write(entry(2).line()[:30])  # the power went mid-write: no newline
    await ledger.append([entry(3)])
    assert await read_all(ledger) == [entry(1), entry(3)]
    assert ledger.unreadable == 1


async def test_a_ledger_that_cannot_be_written_is_unavailable_without_naming_its_path(tmp_path: Path) -> None:
    ledger = FileErasureLedger(tmp_path / "missing-directory" / "ledger.jsonl")
    with pytest.raises(Unavailable) as raised:
        await ledger.append([entry(1)])
    assert raised.value.reason == "ERASURE_LEDGER_UNAVAILABLE" and "missing-directory" not in str(
        raised.value
    )


async def test_a_ledger_that_cannot_be_read_stops_the_replay(tmp_path: Path) -> None:
    ledger = FileErasureLedger(tmp_path)  # a directory: it opens, but cannot be read as a file
    with pytest.raises(LedgerUnreadable):
        await read_all(ledger)


def test_servers_share_the_lease_and_a_restore_is_refused_while_one_holds_it(tmp_path: Path) -> None:
    database = tmp_path / "episodic.db"
    shared = (SqliteLease(database, exclusive=False), SqliteLease(database, exclusive=False))
    with shared[0], shared[1], pytest.raises(DatabaseInUse, match="in use by a running server"):
        SqliteLease(database, exclusive=True)
    with SqliteLease(database, exclusive=True), pytest.raises(DatabaseInUse, match="being replaced"):
        SqliteLease(database, exclusive=False)
    SqliteLease(database, exclusive=True).release()  # all let go


async def test_a_killed_holder_leaves_no_lease_behind(tmp_path: Path) -> None:
    database = tmp_path / "episodic.db"
    holder = "from episodic.store.lease import SqliteLease; import sys, pathlib; "
    holder += (
        f"lease = SqliteLease(pathlib.Path({str(database)!r}), exclusive=False); print('held', flush=True); "
    )
    holder += "sys.stdin.read()"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", holder, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    assert await asyncio.wait_for(proc.stdout.readline(), 30) == b"held\n"
    with pytest.raises(DatabaseInUse):
        SqliteLease(database, exclusive=True)
    proc.kill()
    await proc.wait()
    SqliteLease(database, exclusive=True).release()
