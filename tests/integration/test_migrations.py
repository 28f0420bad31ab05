"""The Alembic migrations produce exactly the schema the code declares."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from episodic.store.database import open_database
from episodic.store.migrate import current_revision, head_revision
from episodic.store.schema import FTS_TABLES, metadata


async def test_migrated_database_matches_the_declared_schema(database_url: str) -> None:
    database = open_database(database_url)
    try:
        assert await current_revision(database.engine) == head_revision()
        async with database.engine.connect() as conn:
            diff = await conn.run_sync(
                lambda sync: compare_metadata(
                    MigrationContext.configure(sync, opts={"include_name": _declared_or_fts}), metadata
                )
            )
    finally:
        await database.dispose()
    assert diff == []


def _declared_or_fts(name: str | None, kind: str, parents: object) -> bool:
    """SQLite's FTS5 table (and its shadow tables) and PostgreSQL's generated tsvector
    column live outside the declared metadata on purpose."""
    if kind == "table" and name and name.startswith(FTS_TABLES):
        return False
    return not (kind == "column" and name == "body_tsv")
