"""The server under test, in this process, through the composition root's one door: the app
as `episodic serve` wires it, with a pre-built vector index in place of the one loaded from
SQL and no background work (no digester, idle reaper or retention job: the corpus is all
READY, and nothing else should compete for the cores)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from episodic.bootstrap.containers import App, Replacements
from episodic.bootstrap.lifecycle import open_app, serve_app
from episodic.config import EmbedderKind, Settings
from episodic.domain.model import Caller
from episodic.index import FaissVectorIndex
from episodic.service.services import Services
from episodic.store.database import Database


def bench_settings(database_url: str = "sqlite:///unused.db") -> Settings:
    """The hashing embedder: a query costs it tens of µs, so figures are recall's own,
    "excluding query embedding" (MiniLM's cost is measured on its own)."""
    return Settings(
        address="127.0.0.1:0",
        database_url=database_url,
        insecure_dev=True,
        embedder=EmbedderKind.HASHING,
        access_log=False,
    )


@dataclass(frozen=True, slots=True)
class InProcessServer:
    target: str
    database: Database  # for the bench's own read-only SQL (match counts)
    services: Services  # for timing the steps of a search one by one
    caller: Caller


@asynccontextmanager
async def serving(settings: Settings, index: FaissVectorIndex) -> AsyncIterator[InProcessServer]:
    replace = Replacements(index=index, background=False)
    async with (
        open_app(settings, replace=replace) as app,
        serve_app(app) as grpc_server,
    ):
        target = f"127.0.0.1:{grpc_server.port}"
        yield InProcessServer(target, app.database, app.services, Caller(settings.dev_tenant))


@asynccontextmanager
async def migrated_app(settings: Settings) -> AsyncIterator[App]:
    """The app over a database migrated to head, without serving or background work: for
    writing a corpus through the product's own rules."""
    settings = dataclasses.replace(settings, migrate_on_start=True)
    async with open_app(settings, replace=Replacements(background=False)) as app:
        yield app
