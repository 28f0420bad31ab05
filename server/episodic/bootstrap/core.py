"""The one door to the core over SQL: `open_core(settings)` opens the database, checks the
schema, builds the concrete adapters (`adapters.build_adapters`, called nowhere else) and wires
the core over them, starting nothing. The server opens it through `lifecycle.open_app`; the
operator's commands that do not serve (reindex, model-call, restore's replay of the erasure
ledger) use it alone."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from episodic.bootstrap.adapters import build_adapters
from episodic.bootstrap.containers import OpenCore
from episodic.bootstrap.schema import (
    ensure_schema,
    explained_startup_failures,
    hold_database,
    require_current_schema,
    require_existing,
)
from episodic.bootstrap.wiring import build_core, new_embed_pool, new_query_pool, new_summary_pool
from episodic.config import EmbedderKind, ExtractorKind, Settings, SummarizerKind
from episodic.domain.ports.indexes import VectorIndex
from episodic.store.database import Timeouts, open_database
from episodic.store.lease import SqliteLease
from episodic.store.ledger import NoErasureLedger
from episodic.store.writer import GroupCommitWriter
from episodic.telemetry.metrics import Metrics
from episodic.telemetry.tracing import Tracing


@asynccontextmanager
async def open_core(
    settings: Settings,
    *,
    reads_only: bool = False,
    models: bool = True,
    held: bool = True,
    tracing: Tracing | None = None,
    metrics: Metrics | None = None,
    index: VectorIndex | None = None,
) -> AsyncIterator[OpenCore]:
    """The database opened and held (no restore swaps a SQLite file under it), its schema
    checked (created or migrated as the settings say), the group-commit writer started, the
    concrete adapters built and the core wired over them (`build_core`); no loop is started
    and nothing is served. Nothing is loaded into the indexes: each scope loads on first use.

    `reads_only` (a tool that only reads): an existing database at this release's schema,
    never created or migrated nor held, no writer started, no erasure ledger. `models=False`:
    no model is loaded (hashing embedder, extractive summarizer and extractor), for a tool
    that embeds and summarizes nothing. `held=False`: the file is not leased (restore's private
    copy, beside the database it holds alone). `index`: a pre-built whole index (the lab)."""
    if not models:
        settings = without_models(settings)
    if reads_only:
        require_existing(settings.database_url)
    timeouts = Timeouts(settings.db_statement_timeout_seconds, settings.db_connect_timeout_seconds)
    pool_size = 1 if reads_only else settings.db_pool_size
    database = open_database(settings.database_url, pool_size=pool_size, timeouts=timeouts)
    lease: SqliteLease | None = None
    try:
        if reads_only:
            with explained_startup_failures(database):
                await require_current_schema(database)
        else:
            if held:  # before the schema is read: no restore swaps the file under us
                lease = hold_database(database)
            await ensure_schema(database, settings.migrate_on_start)
        on_batch = metrics.writer_batch if metrics is not None and metrics.enabled else None
        writer = GroupCommitWriter(database, workers=settings.db_writers, on_batch=on_batch)
        if not reads_only:  # a reader's stores are never written through
            writer.start()
        pool, embed_pool = new_summary_pool(), new_embed_pool(settings.bulk_embed_threads)
        query_pool = new_query_pool()
        try:
            ledger = NoErasureLedger() if reads_only else None
            adapters = build_adapters(settings, database, writer, index, ledger=ledger)
            core = build_core(
                settings, adapters, pool=pool, embed_pool=embed_pool, query_pool=query_pool,
                tracing=tracing, metrics=metrics,
            )  # fmt: skip
            database.health.listen(core.state.health.part("database"))
            yield OpenCore(settings, database, adapters, core)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            embed_pool.shutdown(wait=False, cancel_futures=True)
            query_pool.shutdown(wait=False, cancel_futures=True)
            if not reads_only:
                await writer.stop()
    finally:
        await database.dispose()
        if lease is not None:
            lease.release()


def without_models(settings: Settings) -> Settings:
    """The settings with no model to load: erasing or reading embeds and summarizes nothing."""
    return dataclasses.replace(
        settings, embedder=EmbedderKind.HASHING, summarizer=SummarizerKind.EXTRACTIVE,
        extractor=ExtractorKind.EXTRACTIVE,
    )  # fmt: skip
