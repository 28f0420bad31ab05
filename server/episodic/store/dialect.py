"""The few statements whose spelling differs between SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.dml import Insert


def insert_ignoring_conflicts(conn: AsyncConnection, table: Table, values: dict[str, Any]) -> Insert:
    """INSERT that does nothing when the primary key exists (rowcount tells which)."""
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table).values(values).on_conflict_do_nothing()
    return sqlite.insert(table).values(values).on_conflict_do_nothing()
