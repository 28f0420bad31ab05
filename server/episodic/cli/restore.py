"""`episodic restore FILE`: a backup put in place of the configured SQLite database.

In order, and nothing is touched until every check passed:
1. FILE is verified: a SQLite file that passes `PRAGMA integrity_check` and is an Episodic
   database at a migration revision this release knows (a corrupt or foreign file is
   refused, naming why);
2. the database is leased EXCLUSIVELY (store/lease.py): refused while any server has it
   open, busy or idle, and no server starts until the restore is done; an existing
   database is refused without `--replace`;
3. FILE is copied beside the database under a temporary name, the copy is migrated to this
   release's head, and the erasure ledger (which a backup never holds) is replayed on it:
   every user erased after the backup was taken is erased again, through the server's own
   erase path, before the file goes live;
4. the copy is made self-contained (no WAL), fsync'd and renamed over the database
   atomically (the old database's WAL checkpointed and removed first, so it can never be
   applied to the new file). The report says what was found and done at each step.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from alembic.script import ScriptDirectory

from episodic.cli.counts import count_lines
from episodic.config import Settings
from episodic.domain.erasure_ledger import Replayed
from episodic.store import migrate
from episodic.store.lease import DatabaseInUse, SqliteLease
from episodic.store.ledger import ledger_path
from episodic.store.sqlite_files import (
    Snapshot,
    SqliteFileError,
    check_integrity,
    copy_snapshot,
    install,
    is_sqlite_file,
    open_read_only,
    remove_side_files,
    removed_on_failure,
    self_contained,
    sqlite_file,
    temporary_beside,
    writable_directory,
    writing_failed,
)


@dataclass(frozen=True, slots=True)
class RestoreReport:
    source: Path
    target: Path
    replaced: bool
    verified: Snapshot
    migrated_from: str
    migrated_to: str
    ledger: Path
    replayed: Replayed

    def lines(self) -> list[str]:
        return [
            f"restore: {self.source} -> {self.target}"
            + (" (replaced the previous database)" if self.replaced else " (a new database)"),
            f"  verified {self.source}: integrity_check ok; Episodic schema at revision {self.migrated_from}",
            "  rows per table in the backup:",
            *count_lines(self.verified.counts),
            self._migration(),
            self._replay(),
            "  installed atomically (temporary file, fsync, rename): a server may start on it now",
        ]

    def _migration(self) -> str:
        if self.migrated_from == self.migrated_to:
            return f"  schema: at this release's head ({self.migrated_to}), nothing to migrate"
        return f"  schema: migrated {self.migrated_from} -> {self.migrated_to}"

    def _replay(self) -> str:
        r = self.replayed
        head = f"  erasure ledger {self.ledger}: {r.entries} entr{'ies' if r.entries != 1 else 'y'}"
        if not r.pending:
            line = f"{head}, none made after this backup: nothing to erase again"
        else:
            erased = ", ".join(f"{r.counts[k]} {k}" for k in ("episodes", "messages", "memories"))
            line = f"{head}, {r.pending} not in this backup: {r.summary()}; deleted {erased}"
        if r.adopted:
            line += f"; {r.adopted} erasure(s) only the backup recorded added to the ledger"
        if r.unreadable_lines:
            line += f"; {r.unreadable_lines} unreadable line(s) skipped"
        return line


def restore(settings: Settings, source: Path, *, replace: bool) -> RestoreReport:
    target = sqlite_file(settings.database_url)
    ledger = ledger_path(settings.erasure_ledger, settings.database_url)
    if target is None or ledger is None:
        raise SqliteFileError("restore: an in-memory SQLite database has no file to restore into")
    try:
        verified = verify(source)
        writable_directory(target)
        with _exclusive(target):
            replaced = _database_exists(target)
            if replaced and not replace:
                raise SqliteFileError(
                    f"{target} exists: pass --replace to overwrite it (back it up first if it may be needed)"
                )
            before, after, replayed = _put_in_place(settings, source, target, ledger)
    except SqliteFileError as exc:
        raise SqliteFileError(f"restore: {exc.message}") from exc
    return RestoreReport(source, target, replaced, verified, before, after, ledger, replayed)


def verify(source: Path) -> Snapshot:
    """FILE as a backup of an Episodic database this release can migrate, or why not."""
    if not source.is_file():
        raise SqliteFileError(f"{source} does not exist or is not a file")
    if not is_sqlite_file(source):
        raise SqliteFileError(f"{source} is not a SQLite database (its header is not 'SQLite format 3')")
    snapshot = check_integrity(source)
    if snapshot.revision is None:
        raise SqliteFileError(f"{source} is not an Episodic database: it has no alembic_version table")
    if snapshot.revision not in known_revisions():
        raise SqliteFileError(
            f"{source} is at schema revision {snapshot.revision!r}, which this release does not know "
            f"(its newest is {migrate.head_revision()}): not an Episodic database, or one made by a newer "
            "release (restore it with that release)"
        )
    return snapshot


def known_revisions() -> set[str]:
    scripts = ScriptDirectory(str(Path(migrate.__file__).with_name("migrations")))
    return {script.revision for script in scripts.walk_revisions()}


def _exclusive(target: Path) -> SqliteLease:
    try:
        return SqliteLease(target, exclusive=True)
    except DatabaseInUse as exc:
        raise SqliteFileError(exc.message) from exc


def _database_exists(target: Path) -> bool:
    return target.exists() or target.with_name(target.name + "-wal").exists()


def _put_in_place(settings: Settings, source: Path, target: Path, ledger: Path) -> tuple[str, str, Replayed]:
    temporary = temporary_beside(target, "restoring")
    with removed_on_failure(temporary):
        _copy(source, temporary, target)
        on_copy = dataclasses.replace(
            settings, database_url=f"sqlite:///{temporary.resolve()}", erasure_ledger=str(ledger)
        )
        before, after, replayed = asyncio.run(_migrate_and_replay(on_copy))
        self_contained(temporary)
        _retire(target)
        try:
            install(temporary, target, replace=True)
        except OSError as exc:
            raise writing_failed(target, exc) from exc
    return before, after, replayed


def _copy(source: Path, temporary: Path, target: Path) -> None:
    conn = open_read_only(source)
    try:
        copy_snapshot(conn, temporary)
    except (OSError, sqlite3.Error) as exc:
        raise writing_failed(target, exc) from exc
    finally:
        conn.close()


async def _migrate_and_replay(on_copy: Settings) -> tuple[str, str, Replayed]:
    from episodic.bootstrap.erasure_replay import replay_offline
    from episodic.bootstrap.schema import migrate_database

    before, after = await migrate_database(on_copy.database_url, held=False)  # restore holds it alone
    replayed = await replay_offline(on_copy)
    return str(before), str(after), replayed


def _retire(target: Path) -> None:
    """The database about to be replaced: its WAL checkpointed into it and removed, so no
    frame of it can ever be applied to the new file (a crash here loses nothing)."""
    if not target.exists():
        remove_side_files(target)
        return
    try:
        self_contained(target)
    except sqlite3.Error:  # damaged beyond reading: it is being replaced anyway
        remove_side_files(target)
