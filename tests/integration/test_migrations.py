"""The Alembic migrations produce exactly the schema the code declares."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from episodic.store.database import open_database
from episodic.store.migrate import current_revision, head_revision
from episodic.store.schema import metadata


async def test_migrated_database_matches_the_declared_schema(database_url: str) -> None:
    database = open_database(database_url)
    try:
        assert await current_revision(database.engine) == head_revision()
        async with database.engine.connect() as conn:
            diff = await conn.run_sync(
                lambda sync: compare_metadata(MigrationContext.configure(sync), metadata)
            )
    finally:
        await database.dispose()
    assert diff == []
