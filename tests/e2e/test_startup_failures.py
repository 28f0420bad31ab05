"""Starting `episodic serve`: a new SQLite file is created at the current schema; every
failure to start is one line on stderr that says what is wrong and what to do, exit code 2
(the traceback only with --debug); a busy port is refused, never shared."""

from __future__ import annotations

import socket
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from alembic import command

from episodic.store.migrate import _config
from tests.conftest import POSTGRES_ADMIN_URL
from tests.e2e.helpers import assert_serving, clean_environment, run_process
from tests.e2e.test_server_process import EPISODIC, START_TIMEOUT, open_episode_without_a_key, serving
from tests.ports import refusing_port


def _problem_lines(stderr: str) -> list[str]:
    """What stderr says besides the dev banner and JSON log lines."""
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith(("*", "{"))]


async def _refused(*flags: str, tmp_path: Path, debug: bool = False) -> str:
    """Runs `episodic serve` expecting it to refuse; returns its one line. Without an
    --address of its own it listens on a free port (127.0.0.1:0), never the default
    127.0.0.1:50051: a server the developer left running there (the README's quick start)
    must not turn the refusal under test into "the port is in use"."""
    address = () if "--address" in flags else ("--address", "127.0.0.1:0")
    argv = [*EPISODIC, "serve", "--insecure-dev", "--embedder", "hashing", *address, *flags]
    done = await run_process(
        *argv, *(["--debug"] if debug else []), env=clean_environment(), timeout=START_TIMEOUT
    )
    assert done.returncode == 2, done.stderr
    lines = _problem_lines(done.stderr)
    if debug:
        assert "Traceback" in done.stderr
        return lines[-1]
    assert len(lines) == 1 and lines[0].startswith("episodic: "), done.stderr
    return lines[0]


@pytest.fixture
def listening_socket() -> Iterator[int]:
    """A port held by another process's listener (here: this test's)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield int(held.getsockname()[1])


async def test_an_unreachable_postgresql_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with refusing_port() as port:
        url = f"postgresql://postgres@127.0.0.1:{port}/episodic"
        line = await _refused("--database-url", url, tmp_path=tmp_path)
    assert "cannot connect to the database at 127.0.0.1" in line and "connection refused" in line


@pytest.mark.postgres
async def test_a_missing_postgresql_database_is_one_line_and_exit_2(tmp_path: Path) -> None:
    name = f"episodic_missing_{uuid.uuid4().hex[:8]}"
    url = POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    line = await _refused("--database-url", url, tmp_path=tmp_path)
    assert f'database "{name}" does not exist' in line and "createdb" in line


async def test_a_missing_sqlite_directory_is_one_line_and_exit_2(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'nowhere' / 'x.db'}"
    line = await _refused("--database-url", url, tmp_path=tmp_path)
    assert "the directory" in line and "does not exist" in line


async def test_debug_adds_the_traceback(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'nowhere' / 'x.db'}"
    line = await _refused("--database-url", url, tmp_path=tmp_path, debug=True)
    assert line.startswith("episodic: ") and "the directory" in line and "does not exist" in line


async def test_a_port_held_by_another_process_is_one_line_and_exit_2(
    tmp_path: Path, listening_socket: int
) -> None:
    flags = ("--database-url", f"sqlite:///{tmp_path / 'x.db'}", "--address", f"127.0.0.1:{listening_socket}")
    line = await _refused(*flags, tmp_path=tmp_path)
    assert "port is in use" in line


async def test_a_port_out_of_range_is_refused_not_wrapped(tmp_path: Path) -> None:
    line = await _refused(
        "--database-url", f"sqlite:///{tmp_path / 'x.db'}", "--address", "127.0.0.1:99999", tmp_path=tmp_path
    )
    assert "out of range" in line


async def test_a_second_server_on_a_busy_port_refuses_to_start(tmp_path: Path) -> None:
    first = ("--insecure-dev", "--database-url", f"sqlite:///{tmp_path / 'a.db'}")
    async with serving(*first, cwd=tmp_path) as server:
        flags = ("--database-url", f"sqlite:///{tmp_path / 'b.db'}", "--address", server.address)
        line = await _refused(*flags, tmp_path=tmp_path)
        assert "port is in use" in line
        async with server.channel() as channel:
            await assert_serving(channel)
        assert await server.terminate() == 0
    assert not (tmp_path / "b.db").exists(), "the refused server must not have opened its database"


async def test_a_new_sqlite_file_is_created_at_the_current_schema(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    async with serving("--insecure-dev", "--database-url", url, cwd=tmp_path) as server:
        async with server.channel() as channel:
            await assert_serving(channel)
            await open_episode_without_a_key(channel)
        assert await server.terminate() == 0
    assert any(
        e.get("message") == "created a new SQLite database at the current schema" for e in server.logs()
    )


async def test_an_empty_sqlite_file_is_created_at_the_current_schema(tmp_path: Path) -> None:
    (tmp_path / "empty.db").touch()  # e.g. a volume's placeholder
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    async with serving("--insecure-dev", "--database-url", url, cwd=tmp_path) as server:
        async with server.channel() as channel:
            await open_episode_without_a_key(channel)
        assert await server.terminate() == 0


def _at_revision(path: Path, revision: str) -> None:
    """An existing database some releases old (synchronously, as alembic's CLI would)."""
    from sqlalchemy import create_engine

    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        command.upgrade(_config(conn), revision)
    engine.dispose()


async def test_an_older_sqlite_schema_refuses_to_start_until_episodic_migrate(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _at_revision(path, "0005")
    url = f"sqlite:///{path}"
    line = await _refused("--database-url", url, tmp_path=tmp_path)
    assert "revision 0005" in line and "episodic migrate" in line
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == ("0005",)

    migrated = await run_process(*EPISODIC, "migrate", "--database-url", url, env=clean_environment())
    assert migrated.returncode == 0, migrated.stderr
    async with serving("--insecure-dev", "--database-url", url, cwd=tmp_path) as server:
        async with server.channel() as channel:
            await open_episode_without_a_key(channel)
        assert await server.terminate() == 0


@pytest.mark.postgres
async def test_an_empty_postgresql_database_still_needs_an_explicit_migrate(tmp_path: Path) -> None:
    name = f"episodic_empty_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(POSTGRES_ADMIN_URL)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        url = POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
        line = await _refused("--database-url", url, tmp_path=tmp_path)
        assert "revision None" in line and "episodic migrate" in line
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
