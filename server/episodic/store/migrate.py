"""Schema migrations with Alembic, run over the async engine's connection."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from episodic.store.database import Database

_SCRIPTS = Path(__file__).with_name("migrations")


def _config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(_SCRIPTS))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None
    return head


async def upgrade_to_head(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.run_sync(lambda sync: command.upgrade(_config(sync), "head"))


async def current_revision(engine: AsyncEngine) -> str | None:
    async with engine.connect() as conn:
        return await conn.run_sync(lambda sync: MigrationContext.configure(sync).get_current_revision())


async def is_new_sqlite(database: Database) -> bool:
    """A SQLite database with no tables at all: a file that did not exist, or an empty one."""
    if not database.is_sqlite:
        return False
    async with database.engine.connect() as conn:
        found = await conn.exec_driver_sql("SELECT count(*) FROM sqlite_master")
        return int(found.scalar_one()) == 0
