"""The few statements whose spelling differs between SQLite and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import Insert


class InsertIgnoringConflicts:
    """INSERT that does nothing when the primary key exists (rowcount tells which);
    built once per table and dialect."""

    def __init__(self, table: Table) -> None:
        self._by_dialect: dict[str, Insert] = {
            "sqlite": sqlite.insert(table).on_conflict_do_nothing(),
            "postgresql": postgresql.insert(table).on_conflict_do_nothing(),
        }

    def inserted(self, conn: Connection, values: dict[str, object]) -> bool:
        return conn.execute(self._by_dialect[conn.dialect.name], values).rowcount == 1
