"""e2e fixtures: a live server on each backend and authenticated stubs for tenant A."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.server_harness import RunningServer, running_server, settings_for


@pytest.fixture
async def server(database_url: str) -> AsyncIterator[RunningServer]:
    async with running_server(settings_for(database_url)) as running:
        yield running


@pytest.fixture
async def sqlite_server(sqlite_url: str) -> AsyncIterator[RunningServer]:
    """One backend only: for what the backend cannot change (an example run as a program)."""
    async with running_server(settings_for(sqlite_url)) as running:
        yield running
