"""Throwaway databases, one per backend per run: a SQLite file in a temporary directory,
or a fresh PostgreSQL database dropped afterwards, so runs never see each other's rows."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from sqlalchemy import make_url
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine
from sqlalchemy.pool import NullPool

from episodic_lab.bench import BenchError

CONNECT_TIMEOUT_SECONDS = 5.0


@asynccontextmanager
async def throwaway_database(backend: str, workdir: Path, admin_url: str) -> AsyncIterator[str]:
    """Yields the server's database URL. BenchError if PostgreSQL cannot be reached."""
    if backend == "sqlite":
        yield f"sqlite:///{workdir / 'bench.db'}"
        return
    name = f"episodic_bench_{uuid.uuid4().hex[:12]}"
    await _admin(admin_url, f'CREATE DATABASE "{name}"')
    try:
        yield _with_database(admin_url, name)
    finally:
        await _admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def describe_database(backend: str, admin_url: str) -> str:
    """ "SQLite 3.x" or "PostgreSQL 15.x"; BenchError if PostgreSQL cannot be reached."""
    if backend == "sqlite":
        return f"SQLite {sqlite3.sqlite_version}"
    return f"PostgreSQL {await postgres_version(admin_url)}"


async def postgres_version(admin_url: str) -> str:
    async with _admin_connection(admin_url) as conn:
        return str((await conn.exec_driver_sql("SHOW server_version")).scalar())


async def _admin(admin_url: str, sql: str) -> None:
    async with _admin_connection(admin_url) as conn:
        await conn.exec_driver_sql(sql)


@asynccontextmanager
async def _admin_connection(admin_url: str) -> AsyncIterator[AsyncConnection]:
    """Autocommit: CREATE/DROP DATABASE refuse to run inside a transaction."""
    engine = create_async_engine(
        _asyncpg(admin_url),
        isolation_level="AUTOCOMMIT",
        poolclass=NullPool,
        connect_args={"timeout": CONNECT_TIMEOUT_SECONDS},
    )
    try:
        async with engine.connect() as conn:
            yield conn
    except (OSError, TimeoutError, SQLAlchemyError) as exc:
        raise BenchError(f"PostgreSQL at {_shown(admin_url)}: {exc}") from exc
    finally:
        await engine.dispose()


def _asyncpg(url: str) -> URL:
    return make_url(url).set(drivername="postgresql+asyncpg")


def _with_database(admin_url: str, name: str) -> str:
    url = make_url(admin_url).set(drivername="postgresql", database=name)
    return url.render_as_string(hide_password=False)


def _shown(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)
