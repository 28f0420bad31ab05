"""The `ErasureLedger` port as a file of JSON lines, kept outside the database.

Why a file: the database's own `erasures` table goes back in time with the database when
an older backup is restored (SQLite: `episodic restore`; PostgreSQL: pg_restore or a
point-in-time recovery); a file beside it does not. One line per erasure, appended and
fsync'd before the database's erasure commits, so the ledger always holds at least every
erasure the database does (and possibly one whose transaction then failed: replayed at the
next start, as the user asked).

Appends open the file with O_APPEND, take an exclusive flock (several processes sharing
the file: replicas on one volume) and fsync it (and its directory when it was empty, so a
new file survives a power cut); an append that fails (a full disk) is cut back off the
file, so a caller answered UNAVAILABLE leaves no entry behind. A crash mid-append can
leave a torn last line without its newline: the next append first ends that line, and
readers skip lines that are no entry (that erasure never went ahead: its caller got no
answer). A line holds a tenant id and a hash of the user id, never the user id
(domain/erasure_ledger.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import BinaryIO

from episodic.domain.erasure_ledger import LedgerEntry, UnreadableEntry
from episodic.errors import Unavailable
from episodic.store.sqlite_files import sqlite_file

log = logging.getLogger(__name__)
LEDGER_SUFFIX = ".erasures.jsonl"  # the default ledger of a SQLite database: <file>.erasures.jsonl
LOGGED_LINES = 3  # unreadable lines logged one by one; the rest only counted


def ledger_path(setting: str, database_url: str) -> Path | None:
    """The `erasure_ledger` setting, else beside a SQLite file (`FILE.erasures.jsonl`);
    None: no ledger (PostgreSQL without the setting, an in-memory SQLite database)."""
    if setting:
        return Path(setting)
    file = sqlite_file(database_url)
    return None if file is None else file.with_name(file.name + LEDGER_SUFFIX)


class LedgerUnreadable(Unavailable):
    """The ledger exists but cannot be read: a server must not start without replaying it."""

    reason = "ERASURE_LEDGER_UNREADABLE"


class FileErasureLedger:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()  # one append at a time in this process (flock: across them)
        self._unreadable = 0

    @property
    def where(self) -> str:
        return str(self._path)

    @property
    def unreadable(self) -> int:
        return self._unreadable

    async def append(self, entries: Sequence[LedgerEntry]) -> None:
        """One write and one fsync for all of `entries`."""
        if not entries:
            return
        try:
            await asyncio.to_thread(self._append, "".join(e.line() for e in entries).encode())
        except OSError as exc:
            log.warning(
                "the erasure ledger cannot be written: erasures answer UNAVAILABLE",
                extra={"ledger": str(self._path), "error": _error_name(exc)},
            )
            raise Unavailable(
                "the erasure ledger cannot be written: nothing was erased; retry shortly",
                reason="ERASURE_LEDGER_UNAVAILABLE",
            ) from exc

    def _append(self, data: bytes) -> None:
        with self._lock:
            fd = os.open(self._path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    data = b"\n" + data  # a torn line (a crash mid-append) stays a line of its own
                _write_durably(fd, data, size)
            finally:
                os.close(fd)  # and with it the flock
            if size == 0:
                _fsync_directory(self._path.parent)

    async def batches(self, size: int) -> AsyncIterator[list[LedgerEntry]]:
        self._unreadable = 0
        try:
            file = await asyncio.to_thread(self._open)
        except OSError as exc:
            raise LedgerUnreadable(f"the erasure ledger {self._path} cannot be read: {exc.strerror}") from exc
        if file is None:
            return  # no erasure was ever made here
        try:
            number = 0
            while lines := await asyncio.to_thread(_read_lines, file, size):
                batch = []
                for line in lines:
                    number += 1
                    entry = self._parsed(line, number)
                    if entry is not None:
                        batch.append(entry)
                yield batch
        except OSError as exc:
            raise LedgerUnreadable(f"the erasure ledger {self._path} cannot be read: {exc.strerror}") from exc
        finally:
            file.close()

    def _open(self) -> BinaryIO | None:
        try:
            return self._path.open("rb")
        except FileNotFoundError:
            return None

    def _parsed(self, line: bytes, number: int) -> LedgerEntry | None:
        if not line.strip():
            return None
        try:
            return LedgerEntry.parse(line.decode())
        except (UnicodeDecodeError, UnreadableEntry) as exc:
            self._unreadable += 1
            if self._unreadable > LOGGED_LINES:
                return None  # the replay's summary counts them all
            log.warning(
                "erasure ledger: a line is no entry (torn by a crash mid-append, or damaged): skipped",
                extra={"ledger": str(self._path), "line": number, "why": str(exc)},
            )
            return None


class NoErasureLedger:
    """No ledger configured (PostgreSQL without EPISODIC_ERASURE_LEDGER, an in-memory
    SQLite database): erasures are not protected against a restore of an older backup."""

    @property
    def where(self) -> str:
        return ""

    @property
    def unreadable(self) -> int:
        return 0

    async def append(self, entries: Sequence[LedgerEntry]) -> None:
        return None

    async def batches(self, size: int) -> AsyncIterator[list[LedgerEntry]]:
        return
        yield  # an async generator that yields nothing


def _error_name(exc: OSError) -> str:
    """ENOSPC, EACCES, ...: what went wrong, without the message (which names the path)."""
    return errno.errorcode.get(exc.errno or 0, type(exc).__name__)


def _read_lines(file: BinaryIO, limit: int) -> list[bytes]:
    lines = []
    for _ in range(limit):
        line = file.readline()
        if not line:
            break
        lines.append(line)
    return lines


def _write_durably(fd: int, data: bytes, size: int) -> None:
    """Written and fsync'd, or the file cut back to `size` (under the flock, nobody else
    appended meanwhile): an append that failed leaves no entry to be replayed later."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)
        raise


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
