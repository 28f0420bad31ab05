"""Shared fixtures: real databases (a SQLite file per test, copied from one migrated per
run; one throwaway PostgreSQL database per run) and a real gRPC server on a loopback port."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

from episodic.store.database import open_database
from episodic.store.migrate import upgrade_to_head

POSTGRES_ADMIN_URL = os.environ.get(
    "EPISODIC_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def unique(prefix: str) -> str:
    """Ids unique per test, so tests can share one PostgreSQL database."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(POSTGRES_ADMIN_URL.replace("postgresql+asyncpg", "postgresql"))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _create_migrated(url: str) -> None:
    database = open_database(url)
    try:
        await upgrade_to_head(database.engine)
    finally:
        await database.dispose()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throwaway database, created and migrated once per run, dropped afterwards."""
    name = f"episodic_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    url = POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    try:
        asyncio.run(_create_migrated(url))
        yield url
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def migrated_sqlite_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to head once per run: each test's file is a copy of it."""
    path = tmp_path_factory.mktemp("migrated") / "episodic.db"
    asyncio.run(_create_migrated(f"sqlite:///{path}"))
    leftovers = [p.name for p in path.parent.iterdir() if p != path]
    assert not leftovers, f"the migrated file is not whole on its own: {leftovers}"
    return path


@pytest.fixture
def sqlite_url(tmp_path: Path, migrated_sqlite_file: Path) -> str:
    """A migrated SQLite file of the test's own: a copy of the one migrated per run (the
    same schema and alembic version; migrating each test's file took ~0.1 s a test, and
    the migrations themselves are tests/integration/test_migrations.py's)."""
    path = tmp_path / "episodic.db"
    shutil.copyfile(migrated_sqlite_file, path)
    return f"sqlite:///{path}"


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest) -> str:
    """Runs the test once on SQLite and once on PostgreSQL."""
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    return str(request.getfixturevalue(name))


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[str]:
    """A PostgreSQL database migrated once per run that nobody connects to afterwards (a
    template must have no sessions): each fresh database is a copy of it."""
    name = f"episodic_template_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    try:
        asyncio.run(_create_migrated(POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"))
        yield name
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
def fresh_postgres_url(postgres_template: str) -> Iterator[str]:
    """A migrated PostgreSQL database of the test's own, copied from the template (~0.1 s)."""
    name = f"episodic_fresh_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}" TEMPLATE "{postgres_template}"'))
    try:
        yield POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(params=BACKENDS)
def fresh_database_url(request: pytest.FixtureRequest) -> str:
    """Like `database_url`, but a database of the test's own on both backends: for work that
    serves every tenant (re-embedding, retention sweeps), which on the shared PostgreSQL
    database would take every other test's rows too and grow with the suite."""
    name = "sqlite_url" if request.param == "sqlite" else "fresh_postgres_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
async def no_leaked_tasks() -> AsyncIterator[None]:
    yield
    pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert not pending, f"tasks left running: {pending}"


@pytest.fixture
def restored_logging() -> Iterator[None]:
    """For tests that call `episodic.cli.main.main()` in-process: it sets up the process's
    logging (a handler on the captured stderr, our loggers' level); put back as it was, so
    later tests' caplog sees each record once and captures none of our INFO lines."""
    root, ours = logging.getLogger(), logging.getLogger("episodic")
    handlers, root_level, our_level = root.handlers[:], root.level, ours.level
    yield
    root.handlers[:] = handlers
    root.setLevel(root_level)
    ours.setLevel(our_level)
