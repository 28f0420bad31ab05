"""Before anything is served: the schema is the code's (or migrated to it), and a SQLite database is
held by this process alone (its lease)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from episodic.config import ConfigError
from episodic.errors import EpisodicError
from episodic.store.database import Database, normalize_url, open_database
from episodic.store.faults import sqlite_path_problem, startup_failure
from episodic.store.lease import DatabaseInUse, SqliteLease
from episodic.store.migrate import current_revision, head_revision, is_new_sqlite, upgrade_to_head
from episodic.store.sqlite_files import file_of

log = logging.getLogger("episodic.server")


class DatabaseNotReady(ConfigError):
    """The database cannot be opened, or is not at this server's schema: one line that
    says what to do."""


async def ensure_schema(database: Database, migrate: bool) -> None:
    problem = sqlite_path_problem(database.url)
    if problem is not None:
        raise DatabaseNotReady(f"database_url: {problem}")
    with explained_startup_failures(database):
        await _bring_schema_up(database, migrate)


@contextmanager
def explained_startup_failures(database: Database) -> Iterator[None]:
    """A database that cannot be reached or read at start-up (by serve, migrate, an operator's
    command) becomes DatabaseNotReady's one line; anything else passes through."""
    try:
        yield
    except (DatabaseNotReady, EpisodicError):  # already say what is wrong
        raise
    except Exception as exc:
        message = startup_failure(exc, database.url)
        if message is None:
            raise
        raise DatabaseNotReady(f"database_url: {message}") from exc


async def _bring_schema_up(database: Database, migrate: bool) -> None:
    """A new, empty SQLite file (the embedded default) is created at the current schema;
    an older schema and PostgreSQL wait for an explicit migrate."""
    if migrate or await is_new_sqlite(database):
        await upgrade_to_head(database.maintenance)  # a long migration must not meet statement_timeout
        if not migrate:
            log.info(
                "created a new SQLite database at the current schema", extra={"revision": head_revision()}
            )
    found, wanted = await current_revision(database.engine), head_revision()
    if found != wanted:
        raise DatabaseNotReady(
            f"database_url: the database schema is at revision {found}, this server needs {wanted}: "
            "run `episodic migrate` or start with --migrate-on-start"
        )


async def migrate_database(database_url: str, *, held: bool = True) -> tuple[str | None, str | None]:
    """The schema brought to this release's head (`episodic migrate`; restore, on its private
    copy: `held=False`); the revisions before and after. A SQLite file is held meanwhile, so no
    restore swaps it mid-migration."""
    database = open_database(database_url, pool_size=1)
    lease: SqliteLease | None = None
    try:
        with explained_startup_failures(database):
            if held:
                lease = hold_database(database)
            before = await current_revision(database.engine)
            await upgrade_to_head(database.engine)
            return before, await current_revision(database.engine)
    finally:
        await database.dispose()
        if lease is not None:
            lease.release()


def hold_database(database: Database) -> SqliteLease | None:
    """A SQLite file is leased (shared) for as long as this process has it open, so
    `episodic restore` refuses to replace it meanwhile (store/lease.py)."""
    file = file_of(database.url)
    if file is None:
        return None
    problem = sqlite_path_problem(database.url)
    if problem is not None:
        raise DatabaseNotReady(f"database_url: {problem}")
    try:
        return SqliteLease(file, exclusive=False)
    except DatabaseInUse as exc:
        raise DatabaseNotReady(f"database_url: {exc.message}") from exc


def require_existing(database_url: str) -> None:
    """For a tool that only reads: opening a SQLite file that is not there would create an
    empty one."""
    url = normalize_url(database_url)
    if url.get_backend_name() == "sqlite" and url.database and not Path(url.database).exists():
        raise DatabaseNotReady(f"database_url: no database at {url.database}")


async def require_current_schema(database: Database) -> None:
    """For a tool that only reads: the schema is this release's, or it says to migrate (and
    nothing is migrated)."""
    alembic = logging.getLogger("alembic")
    level = alembic.level
    alembic.setLevel(logging.WARNING)  # its INFO lines say nothing to someone reading the tool's output
    try:
        found, wanted = await current_revision(database.engine), head_revision()
    finally:
        alembic.setLevel(level)
    if found != wanted:
        raise DatabaseNotReady(
            f"database_url: the database schema is at revision {found}, this version reads {wanted}: "
            "run `episodic migrate`"
        )
