"""`episodic backup` and `episodic restore` on SQLite, each run as a process of its own
beside a live server: a backup taken while the server writes is one consistent snapshot
that passes integrity_check; a full disk or an existing file is one line and no partial
file; a restore refuses a running server's database, an existing one without --replace, a
corrupt file and a foreign one; and no restore (by the command or by hand) brings back a
user erased after the backup was taken: the erasure ledger outside the database is replayed
first, and says so in one line."""

from __future__ import annotations

import asyncio
import logging
import shutil
import sqlite3
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from grpc import StatusCode
from sqlalchemy import create_engine

from episodic.cli.backup import backup
from episodic.cli.restore import restore
from episodic.domain.erasure import user_hash
from episodic.store import migrate
from episodic.store.migrate import head_revision
from episodic.store.sqlite_files import remove_side_files
from episodic.v1 import episode_service_pb2
from tests.e2e.backup_helpers import EPISODIC, RE_ERASED_ONE, episodic, erase, holdings, logged, remember
from tests.e2e.helpers import Client, assert_serving, error_reason, expect_code, run_process, user_message
from tests.server_harness import KEY_A, TENANT_A, RunningServer, bearer, running_server, settings_for


def file_of(sqlite_url: str) -> Path:
    return Path(sqlite_url.removeprefix("sqlite:///"))


def rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def reported_count(stdout: str, table: str) -> int:
    (line,) = [line for line in stdout.splitlines() if line.split()[:1] == [table]]
    return int(line.split()[1].replace(",", ""))


async def write_until(client: Client, episode_id: str, stop: asyncio.Event, started: asyncio.Event) -> None:
    turn = 0
    while not stop.is_set():
        await client.add(episode_id, user_message(f"turn {turn}"), user_message(f"and {turn}"))
        turn += 1
        if turn == 3:
            started.set()


async def test_an_online_backup_taken_while_the_server_writes_is_one_consistent_snapshot(
    sqlite_url: str, tmp_path: Path
) -> None:
    target = tmp_path / "backup.db"
    async with running_server(settings_for(sqlite_url)) as server, server.channel() as channel:
        client = Client.of(channel, KEY_A)
        agent = await client.create_agent()
        episodes = [await client.open_episode(agent, user_id=f"user-{n}") for n in range(4)]
        stop, started = asyncio.Event(), [asyncio.Event() for _ in episodes]
        writers = [
            asyncio.create_task(write_until(client, e, stop, s))
            for e, s in zip(episodes, started, strict=True)
        ]
        await asyncio.gather(*(s.wait() for s in started))  # every writer is writing
        done = await episodic("backup", "--to", str(target), "--database-url", sqlite_url)
        stop.set()
        await asyncio.gather(*writers)
        written = sum([(await client.get_episode(e)).message_count for e in episodes])
    assert done.returncode == 0, done.stderr
    print(f"\n$ episodic backup --to {target} --database-url {sqlite_url}\n{done.stdout}")
    assert rows(target, "PRAGMA integrity_check") == [("ok",)]
    counts = {str(e): int(str(n)) for e, n in rows(target, "SELECT episode_id, message_count FROM episodes")}
    for episode_id, seqs in _seqs(target).items():  # every append in it whole, none in part
        assert seqs == list(range(1, counts[episode_id] + 1))
    in_backup = rows(target, "SELECT count(*) FROM messages")[0][0]
    assert isinstance(in_backup, int) and 4 * 6 <= in_backup <= written
    assert reported_count(done.stdout, "messages") == in_backup
    assert reported_count(done.stdout, "episodes") == 4
    assert not list(tmp_path.glob(".backup.db*"))  # noqa: ASYNC240 - no temporary file left (a local glob)


def _seqs(path: Path) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for episode_id, seq in rows(path, "SELECT episode_id, seq FROM messages ORDER BY episode_id, seq"):
        found.setdefault(str(episode_id), []).append(int(str(seq)))
    return found


async def test_a_backup_refuses_an_existing_file_unless_told_to_replace_it(
    sqlite_url: str, tmp_path: Path
) -> None:
    target = tmp_path / "backup.db"
    target.write_bytes(b"precious")
    refused = await episodic("backup", "--to", str(target), "--database-url", sqlite_url)
    assert refused.returncode == 2 and target.read_bytes() == b"precious"
    assert refused.stderr.strip() == f"episodic: backup: {target} exists: pass --replace to overwrite it"
    replaced = await episodic("backup", "--to", str(target), "--replace", "--database-url", sqlite_url)
    assert replaced.returncode == 0, replaced.stderr
    assert rows(target, "SELECT version_num FROM alembic_version")


async def test_a_backup_to_a_full_disk_fails_in_one_line_and_leaves_no_partial_file(
    sqlite_url: str, tmp_path: Path
) -> None:
    """A real ENOSPC: a 64 KiB tmpfs mounted in a mount namespace of the test's own
    (`unshare -rm`: root, or unprivileged user namespaces), smaller than the database."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) to mount a small file system")
    disk = tmp_path / "disk"
    disk.mkdir()
    backup = " ".join([*EPISODIC, "backup", "--to", f"{disk}/b.db", "--database-url", sqlite_url])
    script = (
        f"mount -t tmpfs -o size=64k tmpfs {disk} || exit 99; {backup}; echo rc=$?; echo files:; ls -A {disk}"
    )
    done = await run_process("unshare", "-rm", "sh", "-c", script, timeout=120)
    if done.returncode == 99 or "unshare:" in done.stderr:
        pytest.skip(f"cannot mount a tmpfs in a namespace here: {done.stderr.strip()}")
    print(f"\n$ episodic backup --to {disk}/b.db   # a 64 KiB tmpfs\n{done.stderr}")
    assert "rc=2" in done.stdout
    assert done.stdout.split("files:", 1)[1].split() == []  # nothing under the target's name, no temp file
    problem = [line for line in done.stderr.splitlines() if line.startswith("episodic:")]
    assert problem == [
        f"episodic: backup: no space left to write {disk}/b.db (its file system is full): nothing was written"
    ]


async def test_a_backup_of_a_postgres_database_prints_the_pg_dump_procedure_and_runs_nothing() -> None:
    done = await episodic(
        "backup", "--to", "/tmp/never.db", "--database-url", "postgresql://u:secret@db:5432/ep"
    )
    assert done.returncode == 2
    assert "pg_dump --format=custom" in done.stdout and "pg_basebackup" in done.stdout
    assert "secret" not in done.stdout + done.stderr
    assert (
        done.stderr.strip() == "episodic: backup: PostgreSQL is backed up with pg_dump / pg_restore (above)"
    )
    assert not Path("/tmp/never.db").exists()  # noqa: ASYNC240 - one local stat


# --- restore: what it refuses ---------------------------------------------------------


@pytest.fixture
def backup_file(sqlite_url: str, tmp_path: Path) -> Path:
    """A backup of a fresh database (made in process: the command is tested above)."""
    path = tmp_path / "backup.db"
    backup(settings_for(sqlite_url), path, replace=False)
    return path


async def restore_refused(file: Path, target_url: str, *flags: str) -> str:
    done = await episodic("restore", str(file), *flags, "--database-url", target_url)
    assert done.returncode == 2, done.stdout
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("episodic:")]
    return line


async def test_a_restore_over_an_existing_database_needs_replace(backup_file: Path, sqlite_url: str) -> None:
    before = file_of(sqlite_url).read_bytes()
    line = await restore_refused(backup_file, sqlite_url)
    assert line.startswith(f"episodic: restore: {file_of(sqlite_url)} exists: pass --replace")
    assert file_of(sqlite_url).read_bytes() == before


async def test_a_restore_is_refused_while_a_server_has_the_database_open_even_idle(
    backup_file: Path, sqlite_url: str
) -> None:
    async with running_server(settings_for(sqlite_url)) as server, server.channel() as channel:
        line = await restore_refused(backup_file, sqlite_url, "--replace")
        await assert_serving(channel, bearer(KEY_A))  # untouched, still serving
    in_use = "is in use by a running server (it holds episodic.db.lock): stop it"
    assert line == f"episodic: restore: {file_of(sqlite_url)} {in_use}"


async def test_a_corrupt_backup_is_refused_naming_why(backup_file: Path, tmp_path: Path) -> None:
    conn = sqlite3.connect(backup_file)
    root, size = conn.execute(
        "SELECT rootpage, (SELECT page_size FROM pragma_page_size) FROM sqlite_master WHERE name = 'episodes'"
    ).fetchone()
    conn.close()
    with backup_file.open("r+b") as file:  # the episodes table's root page overwritten
        file.seek((root - 1) * size)
        file.write(b"\x0d" + b"\xff" * 200)
    target = tmp_path / "restored.db"
    line = await restore_refused(backup_file, f"sqlite:///{target}")
    assert line.startswith(f"episodic: restore: {backup_file} is corrupt: ")
    assert not target.exists()


FOREIGN_SQL = {
    "foreign-sqlite": "CREATE TABLE orders (id INTEGER PRIMARY KEY)",
    "newer-release": (
        "CREATE TABLE alembic_version (version_num TEXT); INSERT INTO alembic_version VALUES ('0999');"
    ),
}


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"not a database at all, just text", "is not a SQLite database"),
        ("foreign-sqlite", "is not an Episodic database: it has no alembic_version table"),
        ("newer-release", "is at schema revision '0999', which this release does not know"),
    ],
    ids=["not-sqlite", "foreign-sqlite", "newer-release"],
)
async def test_a_file_that_is_no_episodic_backup_is_refused(
    tmp_path: Path, content: bytes | str, why: str
) -> None:
    file = tmp_path / "foreign.db"
    if isinstance(content, str):
        conn = sqlite3.connect(file)
        conn.executescript(FOREIGN_SQL[content])
        conn.close()
    else:
        file.write_bytes(content)
    target = tmp_path / "restored.db"
    line = await restore_refused(file, f"sqlite:///{target}")
    assert line.startswith(f"episodic: restore: {file} {why}")
    assert not target.exists()


def test_a_backup_made_by_an_older_release_is_migrated_to_head_as_it_is_restored(tmp_path: Path) -> None:
    older, target = tmp_path / "older.db", tmp_path / "restored.db"
    _at_revision(older, "0013")
    report = restore(settings_for(f"sqlite:///{target}"), older, replace=False)
    assert (report.migrated_from, report.migrated_to) == ("0013", head_revision())
    assert "  schema: migrated 0013 -> " + head_revision() in report.lines()
    assert rows(target, "SELECT version_num FROM alembic_version") == [(head_revision(),)]
    assert rows(target, "PRAGMA journal_mode") == [("delete",)]  # one file, nothing beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["older.db", "restored.db", "restored.db.lock"]


def _at_revision(path: Path, revision: str) -> None:
    """A database as an older release left it."""
    engine = create_engine(f"sqlite:///{path}")
    try:
        with engine.begin() as conn:
            config = Config()
            config.set_main_option("script_location", str(Path(migrate.__file__).with_name("migrations")))
            config.attributes["connection"] = conn
            command.upgrade(config, revision)
    finally:
        engine.dispose()


# --- restore: an erased user stays erased -------------------------------------------------


async def seeded_then_erased(server: RunningServer, backup: Path, sqlite_url: str) -> str:
    """mary and john remembered, a backup taken, then mary erased; the agent's id."""
    async with server.channel() as channel:
        client = Client.of(channel, KEY_A)
        agent = await client.create_agent()
        await remember(client, agent, "mary", "PAPAYA-7741")
        await remember(client, agent, "john", "MANGO-1188")
        taken = await episodic("backup", "--to", str(backup), "--database-url", sqlite_url)
        assert taken.returncode == 0, taken.stderr
        receipt = await erase(client, "mary")
        assert receipt.episodes == 2 and receipt.memories >= 1
    return agent


async def test_a_restore_never_brings_back_a_user_erased_after_the_backup(
    sqlite_url: str, tmp_path: Path
) -> None:
    backup, database = tmp_path / "before-the-erasure.db", file_of(sqlite_url)
    async with running_server(settings_for(sqlite_url)) as server:
        agent = await seeded_then_erased(server, backup, sqlite_url)
    ledger = database.with_name(database.name + ".erasures.jsonl").read_text()
    assert user_hash(TENANT_A, "mary") in ledger and "mary" not in ledger  # a hash, never the id
    done = await episodic("restore", str(backup), "--replace", "--database-url", sqlite_url)
    assert done.returncode == 0, done.stderr
    print(f"\n$ episodic restore {backup} --replace --database-url {sqlite_url}\n{done.stdout}")
    assert "1 not in this backup: re-erased 1 user erased after this database's backup" in done.stdout
    assert len(logged(done.stderr, RE_ERASED_ONE)) == 1
    assert b"PAPAYA-7741" not in database.read_bytes() and b"MANGO-1188" in database.read_bytes()
    async with running_server(settings_for(sqlite_url)) as server, server.channel() as channel:
        client = Client.of(channel, KEY_A)
        assert await holdings(client, agent, "mary") == (0, 0)
        assert await holdings(client, agent, "john") == (2, 1)


async def test_a_server_started_on_an_older_copy_of_its_database_erases_the_user_again_before_serving(
    sqlite_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An operator who put a backup back by hand (`cp`), not with `episodic restore`."""
    backup, database = tmp_path / "before-the-erasure.db", file_of(sqlite_url)
    async with running_server(settings_for(sqlite_url)) as server:
        agent = await seeded_then_erased(server, backup, sqlite_url)
    shutil.copyfile(backup, database)
    remove_side_files(database)
    caplog.set_level(logging.INFO, logger="episodic.server")
    async with running_server(settings_for(sqlite_url)) as server, server.channel() as channel:
        client = Client.of(channel, KEY_A)
        await assert_serving(channel, client.auth)
        assert await holdings(client, agent, "mary") == (0, 0)
        assert await holdings(client, agent, "john") == (2, 1)
    (line,) = [r for r in caplog.records if r.getMessage() == RE_ERASED_ONE]
    fields = {k: getattr(line, k) for k in ("erasures", "users", "nothing_left", "episodes", "memories")}
    assert fields["erasures"] == 1 and fields["users"] == 1 and fields["episodes"] == 2
    print(f"\nlogged at start: {line.getMessage()} {fields}")


async def test_an_erasure_whose_ledger_cannot_be_written_is_unavailable_and_erases_nothing(
    sqlite_url: str, tmp_path: Path
) -> None:
    volume = tmp_path / "ledger"
    volume.mkdir()
    settings = settings_for(sqlite_url, erasure_ledger=str(volume / "erasures.jsonl"))
    async with running_server(settings) as server, server.channel() as channel:
        client = Client.of(channel, KEY_A)
        agent = await client.create_agent()
        await remember(client, agent, "mary", "PAPAYA-7741")
        volume.rmdir()  # the ledger's volume went away
        request = episode_service_pb2.EraseUserRequest(user_id="mary")
        err = await expect_code(
            client.episodes.EraseUser(request, metadata=client.auth), StatusCode.UNAVAILABLE
        )
        assert error_reason(err) == "ERASURE_LEDGER_UNAVAILABLE" and str(volume) not in (err.details() or "")
        assert await holdings(client, agent, "mary") == (2, 1)
        volume.mkdir()  # back: the retry erases
        assert (await erase(client, "mary")).episodes == 2
        assert await holdings(client, agent, "mary") == (0, 0)
