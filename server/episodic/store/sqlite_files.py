"""SQLite databases as files, for `episodic backup` and `episodic restore`: a consistent copy
of a live database, the checks a copy must pass, and putting a file in place atomically.

A copy is made with SQLite's online backup API in ONE step, inside a read transaction of
the source connection: the pages copied are one snapshot (WAL mode lets the server keep
writing meanwhile; its commits after the snapshot are simply not in the copy), and the
row counts read in the same transaction are the counts the copy must have. The copy is
then switched out of WAL mode, so it is one self-contained file.

Files are written under a temporary name in the target's directory and renamed into place
only once complete, fsync'd and checked: a failure (a full disk, a crash) never leaves a
partial file under the target's name, and the temporary file is removed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from episodic.errors import FailedPrecondition

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

SQLITE_MAGIC = b"SQLite format 3\x00"
SIDE_FILES = ("-wal", "-shm", "-journal")
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
NO_HARD_LINKS = (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK)
INTEGRITY_LINES = 3  # of integrity_check's complaints, how many an error quotes


class SqliteFileError(FailedPrecondition):
    """One line naming the file and what is wrong with it (or with writing it)."""

    reason = "SQLITE_FILE"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a copy holds: rows per table (virtual tables included, their shadow tables not),
    and the Episodic schema revision (None: no alembic_version table)."""

    counts: dict[str, int]
    revision: str | None


def sqlite_file(database_url: str) -> Path | None:
    """The file of a SQLite URL; None for PostgreSQL and an in-memory SQLite database."""
    from episodic.store.database import normalize_url  # SQLAlchemy: only when a URL is read

    return file_of(normalize_url(database_url))


def file_of(url: URL) -> Path | None:
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return Path(url.database or "")


def open_read_only(path: Path) -> sqlite3.Connection:
    """Never creates, never writes (a backup may run as a user who can only read)."""
    if not path.is_file():
        raise SqliteFileError(f"{path} does not exist or is not a file")
    try:
        return sqlite3.connect(
            f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None, timeout=10
        )
    except sqlite3.Error as exc:
        raise SqliteFileError(f"cannot open {path}: {exc}") from exc


def is_sqlite_file(path: Path) -> bool:
    with path.open("rb") as file:
        return file.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC


def copy_snapshot(source: sqlite3.Connection, target: Path) -> Snapshot:
    """Copies one snapshot of `source` into the new file `target`; returns that snapshot's
    counts, read in the same read transaction as the pages."""
    destination = sqlite3.connect(target, isolation_level=None)
    try:
        source.execute("BEGIN")
        try:
            snapshot = read_snapshot(source)
            source.backup(destination)  # pages=-1: one step, so one snapshot
        finally:
            source.execute("COMMIT")
        destination.execute("PRAGMA journal_mode=DELETE")  # one file: no -wal beside it
    finally:
        destination.close()
    return snapshot


def read_snapshot(conn: sqlite3.Connection) -> Snapshot:
    counts = {
        table: int(conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]) for table in tables(conn)
    }
    return Snapshot(counts, revision(conn))


def tables(conn: sqlite3.Connection) -> list[str]:
    """Ordinary and virtual tables, without SQLite's own and the shadow tables of virtual
    ones (full-text segments: counted through their virtual table)."""
    try:
        rows = conn.execute("PRAGMA main.table_list").fetchall()  # SQLite 3.37+
        names = [name for _, name, kind, *_ in rows if kind in ("table", "virtual")]
    except sqlite3.OperationalError:
        names = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return sorted(n for n in names if not n.startswith("sqlite_"))


def revision(conn: sqlite3.Connection) -> str | None:
    try:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.OperationalError:  # no such table
        return None
    return None if row is None else str(row[0])


def integrity_problems(conn: sqlite3.Connection) -> list[str]:
    """integrity_check's complaints; none for a sound file."""
    found = [str(row[0]) for row in conn.execute("PRAGMA integrity_check")]
    return [] if found == ["ok"] else found


def check_integrity(path: Path) -> Snapshot:
    """The file's snapshot, or SqliteFileError naming what integrity_check found."""
    conn = open_read_only(path)
    try:
        problems = integrity_problems(conn)
        if problems:
            raise SqliteFileError(
                f"{path} is corrupt: integrity_check says {'; '.join(problems[:INTEGRITY_LINES])}"
            )
        return read_snapshot(conn)
    except sqlite3.DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
        raise SqliteFileError(f"{path} is corrupt: {exc}") from exc
    finally:
        conn.close()


def self_contained(path: Path) -> None:
    """Checkpoints the file's WAL into it and leaves WAL mode: nothing beside it matters."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=10)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode=DELETE")
    finally:
        conn.close()
    remove_side_files(path)


def remove_side_files(path: Path) -> None:
    for suffix in SIDE_FILES:
        with contextlib.suppress(FileNotFoundError):
            path.with_name(path.name + suffix).unlink()


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temporary_beside(target: Path, purpose: str) -> Path:
    """A name in the target's directory (so the final rename stays on one file system)."""
    return target.with_name(f".{target.name}.{purpose}-{os.getpid()}")


@contextlib.contextmanager
def removed_on_failure(temporary: Path) -> Iterator[None]:
    """Whatever goes wrong in the block, the temporary file and its side files are gone."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        remove_side_files(temporary)
        raise


def install(temporary: Path, target: Path, *, replace: bool) -> None:
    """Renames the complete, fsync'd file into place: atomically; without `replace`, never
    over a file that appeared meanwhile (a hard link fails on an existing name)."""
    fsync_file(temporary)
    if replace or not _linked(temporary, target):
        os.replace(temporary, target)
    else:
        temporary.unlink()
    fsync_directory(target.parent)


def _linked(temporary: Path, target: Path) -> bool:
    """Links `temporary` as `target`, refusing an existing one; False on a file system
    without hard links (`target` was then checked absent, and a rename does)."""
    try:
        os.link(temporary, target)
    except FileExistsError:
        raise SqliteFileError(f"{target} exists: pass --replace to overwrite it") from None
    except OSError as exc:
        if exc.errno in NO_HARD_LINKS and not target.exists():
            return False
        raise
    return True


def writing_failed(target: Path, exc: BaseException) -> SqliteFileError:
    """A full disk, an unwritable directory, ...: one line, nothing left behind."""
    code = exc.errno if isinstance(exc, OSError) else None
    full = code in NO_SPACE or getattr(exc, "sqlite_errorname", "") == "SQLITE_FULL"
    if full:
        return SqliteFileError(
            f"no space left to write {target} (its file system is full): nothing was written"
        )
    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return SqliteFileError(f"cannot write {target}: {why}: nothing was written")


def writable_directory(target: Path) -> None:
    """The target's directory must exist and be writable (checked first, for a clear line)."""
    directory = target.parent
    if not directory.is_dir():
        raise SqliteFileError(f"cannot write {target}: the directory {directory} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise SqliteFileError(f"cannot write {target}: {directory} is not writable by this user")
