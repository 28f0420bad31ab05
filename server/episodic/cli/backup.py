"""`episodic backup --to FILE` and `episodic restore FILE` (restore.py): an operator's copies
of a SQLite database, made while a server runs, checked before they are trusted.

A backup is one consistent snapshot (SQLite's online backup API, from a process of its own:
the server keeps writing), written under a temporary name beside FILE and renamed into
place only once it passed `PRAGMA integrity_check` and has, table by table, the rows the
database had at that snapshot; a full disk or an unwritable target is one line and exit 2,
with no partial file left. An existing FILE is refused without `--replace`.

PostgreSQL is backed up with its own tools: for a postgresql:// URL both commands print the
procedure (docs/operations.md, "Backups") and exit 2 rather than run anything themselves.
The erasure ledger is never part of a backup: it must outlive the database's restores.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from episodic import config
from episodic.cli.counts import count_lines
from episodic.logs import configure_logging
from episodic.store.ledger import ledger_path
from episodic.store.sqlite_files import (
    Snapshot,
    SqliteFileError,
    check_integrity,
    copy_snapshot,
    install,
    open_read_only,
    removed_on_failure,
    sqlite_file,
    temporary_beside,
    writable_directory,
    writing_failed,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

POSTGRES_BACKUP = """\
{url} is PostgreSQL: `episodic backup` copies SQLite files only. Back it up with PostgreSQL's tools
(docs/operations.md, "Backups"); pass the password through PGPASSWORD or ~/.pgpass:

  # a logical backup: one consistent snapshot, taken while the servers keep writing
  pg_dump --format=custom --file=episodic-$(date +%Y%m%d-%H%M).dump '{url}'
  pg_restore --list episodic-*.dump > /dev/null     # the archive reads back

  # point in time: a base backup plus continuous WAL archiving (archive_mode=on, archive_command)
  pg_basebackup --pgdata=/backups/base-$(date +%Y%m%d) --wal-method=stream --checkpoint=fast

The erasure ledger ({ledger}) is not in the database and must not be in its backups' rotation:
keep it on its own durable storage and never roll it back; servers replay it at start.
"""

POSTGRES_RESTORE = """\
{url} is PostgreSQL: `episodic restore` replaces SQLite files only. Restore with PostgreSQL's tools
(docs/operations.md, "Backups"), into a new, empty database, with every server stopped:

  createdb --host=HOST --username=USER episodic_restored
  pg_restore --dbname='postgresql://USER@HOST:PORT/episodic_restored' --no-owner --exit-on-error FILE.dump
  episodic migrate --database-url 'postgresql://USER@HOST:PORT/episodic_restored'

Then point the servers at it with the SAME erasure ledger ({ledger}): at start each replays it and
erases again every user erased after the dump was taken (one log line: "restore: re-erased N users
erased after this database's backup"); none serves before that is done.
"""


@dataclass(frozen=True, slots=True)
class BackupReport:
    source: Path
    target: Path
    snapshot: Snapshot
    size: int
    ledger: Path | None

    def lines(self) -> list[str]:
        revision = self.snapshot.revision or "none (not an Episodic database?)"
        return [
            f"backup: {self.source} -> {self.target} ({self.size:,} bytes)",
            f"  schema revision: {revision}",
            "  one snapshot, taken while the server may write; integrity_check: ok",
            "  rows per table (the database at that snapshot = the backup):",
            *count_lines(self.snapshot.counts),
            ledger_note(self.ledger),
        ]


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """`backup` and `restore`, registered by the CLI in one line."""
    backup = commands.add_parser(
        "backup",
        help="copy the SQLite database to FILE while the server runs, verified (PostgreSQL: pg_dump)",
    )
    backup.add_argument("--to", required=True, metavar="FILE", help="where the copy goes")
    backup.add_argument("--replace", action="store_true", help="overwrite FILE if it exists")
    _common_flags(backup, "backup")
    backup.set_defaults(run=_run_backup)
    restore = commands.add_parser(
        "restore",
        help="put a backup in place of the (stopped) SQLite database, verified, migrated, erasures replayed",
    )
    restore.add_argument("file", metavar="FILE", help="a file made by `episodic backup`")
    restore.add_argument("--replace", action="store_true", help="overwrite the existing database")
    _common_flags(restore, "restore")
    restore.set_defaults(run=_run_restore)


def _common_flags(parser: argparse.ArgumentParser, command: str) -> None:
    config.add_flags(parser, command)
    parser.add_argument("--debug", action="store_true", help="on a failure, print the full traceback too")


def _settings(args: argparse.Namespace) -> config.Settings:
    settings = config.load_process(args)
    configure_logging(settings.log_level)
    return settings


def _run_backup(args: argparse.Namespace) -> int:
    from episodic.store.database import normalize_url  # SQLAlchemy loads for these commands only

    settings = _settings(args)
    url = normalize_url(settings.database_url)
    if url.get_backend_name() != "sqlite":
        return postgres_instead(POSTGRES_BACKUP, url, settings, "backup")
    print("\n".join(backup(settings, Path(args.to), replace=args.replace).lines()))
    return 0


def _run_restore(args: argparse.Namespace) -> int:
    from episodic.cli.restore import restore
    from episodic.store.database import normalize_url

    settings = _settings(args)
    url = normalize_url(settings.database_url)
    if url.get_backend_name() != "sqlite":
        return postgres_instead(POSTGRES_RESTORE, url, settings, "restore")
    print("\n".join(restore(settings, Path(args.file), replace=args.replace).lines()))
    return 0


def postgres_instead(procedure: str, url: URL, settings: config.Settings, command: str) -> int:
    """The documented procedure on stdout, one line on stderr, exit 2: nothing is run."""
    shown = url.set(drivername="postgresql").render_as_string(hide_password=True)
    ledger = settings.erasure_ledger or "none configured: set EPISODIC_ERASURE_LEDGER"
    print(procedure.format(url=shown, ledger=ledger), end="")
    print(f"episodic: {command}: PostgreSQL is backed up with pg_dump / pg_restore (above)", file=sys.stderr)
    return 2


def backup(settings: config.Settings, target: Path, *, replace: bool) -> BackupReport:
    """The database of `settings` (SQLite) copied to `target`, checked, then put in place."""
    source = sqlite_file(settings.database_url)
    if source is None:
        raise SqliteFileError("backup: an in-memory SQLite database has no file to back up")
    if target.exists() and not replace:
        raise SqliteFileError(f"backup: {target} exists: pass --replace to overwrite it")
    if target.exists() and target.resolve() == source.resolve():
        raise SqliteFileError(f"backup: {target} is the database itself")
    try:
        writable_directory(target)
        snapshot = _copy_checked(source, target, replace)
    except SqliteFileError as exc:
        raise SqliteFileError(f"backup: {exc.message}") from exc
    ledger = ledger_path(settings.erasure_ledger, settings.database_url)
    return BackupReport(source, target, snapshot, target.stat().st_size, ledger)


def _copy_checked(source: Path, target: Path, replace: bool) -> Snapshot:
    conn = open_read_only(source)
    temporary = temporary_beside(target, "partial")
    try:
        with removed_on_failure(temporary):
            try:
                taken = copy_snapshot(conn, temporary)
            except (OSError, sqlite3.Error) as exc:  # SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_IOERR...
                raise _copy_failed(source, target, exc) from exc
            copied = check_integrity(temporary)
            if copied.counts != taken.counts:  # cannot happen with one snapshot: never trusted blindly
                raise SqliteFileError(
                    f"the copy's row counts differ from the database's: {_differences(taken, copied)}"
                )
            try:
                install(temporary, target, replace=replace)
            except OSError as exc:
                raise writing_failed(target, exc) from exc
    finally:
        conn.close()
    return copied


def _copy_failed(source: Path, target: Path, exc: Exception) -> SqliteFileError:
    """The source's fault (a damaged database) or the target's (no space, no access)."""
    if getattr(exc, "sqlite_errorname", "") in ("SQLITE_CORRUPT", "SQLITE_NOTADB"):
        return SqliteFileError(f"the database {source} is damaged ({exc}): nothing was written")
    return writing_failed(target, exc)


def _differences(expected: Snapshot, found: Snapshot) -> str:
    names = sorted(set(expected.counts) | set(found.counts))
    return ", ".join(
        f"{n} {expected.counts.get(n)} != {found.counts.get(n)}"
        for n in names
        if expected.counts.get(n) != found.counts.get(n)
    )


def ledger_note(ledger: Path | None) -> str:
    if ledger is None:
        return "  erasure ledger: none configured (EPISODIC_ERASURE_LEDGER)"
    return (
        f"  erasure ledger: {ledger} is not in the backup, on purpose: a restore replays it. "
        "Back it up on its own; never roll it back."
    )
