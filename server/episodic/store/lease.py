"""Who is using a SQLite database file: a lease on `<file>.lock`, held with flock.

Every process that serves a SQLite database (`episodic serve`, `mcp`, the in-process
`open_app`) holds a SHARED lock on the lease file from before the database is opened until
after it is closed; `episodic restore` takes it EXCLUSIVE, without waiting. So a restore is
refused while any server has the database open, busy or idle, and a server does not start
while a restore is replacing the file. The kernel releases a flock when its holder dies
(even by SIGKILL), so a crashed server never leaves a stale lease behind.

A lock file beside the database, not a lock on the database file itself: SQLite takes POSIX
locks on that file, and closing any other descriptor of it in the same process would drop
them. The lease file is empty and stays once made.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from episodic.errors import FailedPrecondition

LEASE_SUFFIX = ".lock"


class DatabaseInUse(FailedPrecondition):
    reason = "DATABASE_IN_USE"


def lease_path(database: Path) -> Path:
    return database.with_name(database.name + LEASE_SUFFIX)


class SqliteLease:
    """A held lease; `release()` (or the process's end) lets it go."""

    def __init__(self, database: Path, *, exclusive: bool) -> None:
        self.path = lease_path(database)
        self._fd: int | None = None
        fd = self._open()
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DatabaseInUse(_in_use(database, exclusive)) from None
        except OSError as exc:
            os.close(fd)
            raise DatabaseInUse(f"cannot lock {self.path}: {exc.strerror}") from exc
        self._fd = fd

    def _open(self) -> int:
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise DatabaseInUse(f"cannot open the lease file {self.path}: {exc.strerror}") from exc

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # and with it the lock

    def __enter__(self) -> SqliteLease:
        return self

    def __exit__(self, *_: object) -> None:
        self.release()


def _in_use(database: Path, exclusive: bool) -> str:
    if exclusive:
        return f"{database} is in use by a running server (it holds {lease_path(database).name}): stop it"
    return f"{database} is being replaced by `episodic restore`: try again when it has finished"
