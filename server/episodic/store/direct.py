"""Statements run straight on SQLite's own sqlite3 connection, inside the SQLAlchemy
transaction that holds it: for the hot single-row statements of an AddMessage, where
SQLAlchemy's per-execute Python (~25-40 us a statement) was most of the SQL's time.

Each statement is still written with SQLAlchemy and compiled by it, once, for the
connection's dialect; its parameters and result columns go through the processors that
SQLAlchemy itself would apply (each type's dialect implementation: UTC datetimes, JSON,
booleans), so what is stored and read is exactly what `Connection.execute` would store and
read. A driver error arrives as sqlite3's own exception, which `faults.classify` reads the
same way as SQLAlchemy's wrapper of it. SQLite only: a statement with expanding or
literal-rendered parameters is refused when compiled. On any other driver the statement
runs through SQLAlchemy as usual."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Connection
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement, Executable

Processor = Callable[[Any], Any] | None


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    # per parameter, in the order of the SQL's placeholders: its name, its value in the
    # statement (a literal's; used when not given) and its type's bind processor
    binds: tuple[tuple[str, Any, Processor], ...]
    columns: tuple[str, ...]  # a SELECT's result columns, by key
    results: tuple[Processor, ...]

    def parameters(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        given = values.get
        return tuple(
            [
                given(name, default) if bind is None else bind(given(name, default))
                for name, default, bind in self.binds
            ]
        )

    def row(self, raw: Sequence[Any]) -> dict[str, Any]:
        return {
            column: value if result is None else result(value)
            for column, value, result in zip(self.columns, raw, self.results, strict=True)
        }


class Direct:
    """One statement, run directly on SQLite's pysqlite connection and by SQLAlchemy on any
    other; compiled at its first direct run (per set of INSERT columns) and kept."""

    __slots__ = ("_compiled", "_statement")

    def __init__(self, statement: Executable) -> None:
        self._statement = statement
        self._compiled: dict[tuple[str, ...], _Compiled] = {}

    def execute(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """The statement once per row (rows of one set of keys, as every bulk here has)."""
        driver = sqlite_driver(conn)
        if driver is None:  # one row runs as a plain execute: executemany's batching costs more
            conn.execute(self._statement, rows[0] if len(rows) == 1 else list(rows))
            return
        compiled = self._ready(conn.dialect, rows[0])
        if len(rows) == 1:
            driver.execute(compiled.sql, compiled.parameters(rows[0]))
        else:
            driver.executemany(compiled.sql, [compiled.parameters(row) for row in rows])

    def first(self, conn: Connection, values: Mapping[str, Any]) -> Mapping[Any, Any] | None:
        driver = sqlite_driver(conn)
        if driver is None:
            return conn.execute(self._statement, dict(values)).mappings().first()
        compiled = self._ready(conn.dialect, values)
        raw = driver.execute(compiled.sql, compiled.parameters(values)).fetchone()
        return None if raw is None else compiled.row(raw)

    def all(self, conn: Connection, values: Mapping[str, Any]) -> Sequence[Mapping[Any, Any]]:
        driver = sqlite_driver(conn)
        if driver is None:
            return conn.execute(self._statement, dict(values)).mappings().all()
        compiled = self._ready(conn.dialect, values)
        return [compiled.row(raw) for raw in driver.execute(compiled.sql, compiled.parameters(values))]

    def _ready(self, dialect: Dialect, values: Mapping[str, Any]) -> _Compiled:
        keys = tuple(values)
        compiled = self._compiled.get(keys)
        if compiled is None:
            compiled = self._compiled[keys] = _compile(self._statement, dialect, keys)
        return compiled


def sqlite_driver(conn: Connection) -> sqlite3.Connection | None:
    """The pysqlite connection under `conn`; None on any other driver (aiosqlite, asyncpg)."""
    driver = conn.connection.driver_connection
    return driver if isinstance(driver, sqlite3.Connection) else None


def _compile(statement: Executable, dialect: Dialect, keys: tuple[str, ...]) -> _Compiled:
    clause = cast(ClauseElement, statement)
    compiled = cast(SQLCompiler, clause.compile(dialect=dialect, column_keys=list(keys)))
    if compiled.post_compile_params or compiled.literal_execute_params or compiled.positiontup is None:
        raise TypeError("a direct statement needs plain positional parameters")
    by_name = {name: bind for bind, name in compiled.bind_names.items()}
    binds = tuple(
        (name, by_name[name].value, by_name[name].type.dialect_impl(dialect).bind_processor(dialect))
        for name in compiled.positiontup
    )
    selected = getattr(statement, "selected_columns", None)
    columns = tuple(selected.keys()) if selected is not None else ()
    results = tuple(
        column.type.dialect_impl(dialect).result_processor(dialect, None) for column in (selected or ())
    )
    return _Compiled(compiled.string, binds, columns, results)
