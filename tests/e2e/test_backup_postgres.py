"""PostgreSQL's documented backup procedure (docs/operations.md, "Backups") with the erasure
ledger: a pg_dump taken before a user is erased, pg_restore'd into a fresh database, and a
server started on it with the same ledger: the user is erased again before anything is
served, in one log line, and everyone else is as the dump left them. Each database is a
throwaway one of this test's own on the shared cluster."""

from __future__ import annotations

import glob
import logging
import shutil
from pathlib import Path

import pytest

from tests.e2e.backup_helpers import RE_ERASED_ONE, erase, holdings, remember
from tests.e2e.helpers import Client, assert_serving, run_process
from tests.server_harness import KEY_A, running_server, settings_for
from tests.throwaway_postgres import throwaway_postgres

pytestmark = pytest.mark.postgres


def postgres_tool(name: str) -> str | None:
    """On PATH, else in a PostgreSQL installation's bin directory (Debian keeps them there)."""
    return shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))), None)


async def test_a_pg_restore_of_a_dump_taken_before_an_erasure_does_not_bring_the_user_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pg_dump, pg_restore = postgres_tool("pg_dump"), postgres_tool("pg_restore")
    if pg_dump is None or pg_restore is None:
        pytest.skip("pg_dump / pg_restore not found on PATH nor in /usr/lib/postgresql/*/bin")
    ledger, dump = tmp_path / "erasures.jsonl", tmp_path / "episodic.dump"
    async with throwaway_postgres() as original, throwaway_postgres(migrated=False) as fresh:
        first = settings_for(original, erasure_ledger=str(ledger))
        async with running_server(first) as server, server.channel() as channel:
            client = Client.of(channel, KEY_A)
            agent = await client.create_agent()
            await remember(client, agent, "mary", "PAPAYA-7741")
            await remember(client, agent, "john", "MANGO-1188")
            dumped = await run_process(pg_dump, "--format=custom", f"--file={dump}", original, timeout=120)
            assert dumped.returncode == 0, dumped.stderr
            await erase(client, "mary")
        restored = await run_process(
            pg_restore, "--no-owner", "--exit-on-error", f"--dbname={fresh}", str(dump), timeout=120
        )
        assert restored.returncode == 0, restored.stderr
        caplog.set_level(logging.INFO, logger="episodic.server")
        second = settings_for(fresh, erasure_ledger=str(ledger))
        async with running_server(second) as server, server.channel() as channel:
            client = Client.of(channel, KEY_A)
            await assert_serving(channel, client.auth)
            assert await holdings(client, agent, "mary") == (0, 0)
            assert await holdings(client, agent, "john") == (2, 1)
    (line,) = [r for r in caplog.records if r.getMessage() == RE_ERASED_ONE]
    assert (vars(line)["users"], vars(line)["episodes"]) == (1, 2)
