"""The server under test, composed like `bootstrap.open_app` but in this process and with
a pre-built vector index injected in place of the one loaded from SQL. No digester and no
idle reaper: the corpus is all READY, and nothing else should compete for the cores."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from episodic.api.access_log import NoAccessLog
from episodic.api.server import Services, build_server
from episodic.bootstrap import Recall, build_recall, build_services
from episodic.config import Settings
from episodic.domain.model import Caller
from episodic.index import FaissVectorIndex
from episodic.keys import KeyRing
from episodic.store.database import Database, open_database
from episodic.store.writer import GroupCommitWriter

STOP_GRACE_SECONDS = 1.0


def bench_settings(database_url: str = "sqlite:///unused.db") -> Settings:
    """The hashing embedder: a query costs it tens of µs, so figures are recall's own,
    "excluding query embedding" (MiniLM's cost is measured on its own)."""
    return Settings(
        address="127.0.0.1:0",
        database_url=database_url,
        insecure_dev=True,
        embedder="hashing",
        access_log=False,
    )


@dataclass(frozen=True, slots=True)
class InProcessServer:
    target: str
    database: Database
    services: Services
    recall: Recall
    caller: Caller


@asynccontextmanager
async def serving(settings: Settings, index: FaissVectorIndex) -> AsyncIterator[InProcessServer]:
    database = open_database(settings.database_url, pool_size=settings.db_pool_size)
    writer = GroupCommitWriter(database, workers=settings.db_writers)
    writer.start()
    try:
        recall = dataclasses.replace(build_recall(settings, database, writer), index=index)
        services = build_services(settings, database, writer, recall)
        grpc_server = await build_server(settings, services, KeyRing({}), NoAccessLog())
        await grpc_server.server.start()
        await grpc_server.set_serving(True)
        try:
            target = f"127.0.0.1:{grpc_server.port}"
            yield InProcessServer(target, database, services, recall, Caller(settings.dev_tenant))
        finally:
            await grpc_server.server.stop(STOP_GRACE_SECONDS)
    finally:
        await writer.stop()
        await database.dispose()
