"""A throwaway PostgreSQL database per test, for tests that run several replicas on one
database (advisory locks and rows shared by them must not meet another test's)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from tests.conftest import POSTGRES_ADMIN_URL, _admin, _create_migrated


@asynccontextmanager
async def throwaway_postgres(migrated: bool = True) -> AsyncIterator[str]:
    """The URL of a new database (at the current schema unless `migrated` is False),
    dropped afterwards, connections and all."""
    name = f"episodic_tmp_{os.getpid()}_{uuid.uuid4().hex[:10]}"
    await _admin(f'CREATE DATABASE "{name}"')
    url = POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    try:
        if migrated:
            await _create_migrated(url)
        yield url
    finally:
        await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
