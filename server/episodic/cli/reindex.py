"""`episodic reindex`: digests every pending episode and re-embeds every digest whose
vectors were made by another model, without serving, with a progress bar when stderr is a
terminal (episodic.progress). The server does the same in the background after a model
change; this is for doing it up front."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import func, select

from episodic.bootstrap.adapters import build_adapters
from episodic.bootstrap.schema import ensure_schema, hold_database
from episodic.bootstrap.wiring import build_digester, build_memory_service, build_state
from episodic.config import Settings
from episodic.domain.digests import indexed_with
from episodic.domain.recall import DigestState
from episodic.progress import Progress
from episodic.store import schema
from episodic.store.database import Database, open_database
from episodic.store.writer import GroupCommitWriter


async def reindex(settings: Settings) -> int:
    database = open_database(settings.database_url)
    lease = hold_database(database)  # as a server does: no restore swaps the file meanwhile
    writer = GroupCommitWriter(database)
    writer.start()
    try:
        await ensure_schema(database, settings.migrate_on_start)
        return await _run(settings, database, writer)
    finally:
        await writer.stop()
        await database.dispose()
        if lease is not None:
            lease.release()


async def _run(settings: Settings, database: Database, writer: GroupCommitWriter) -> int:
    """The server's own digester over an empty index: vectors go to SQL, which the server
    loads its index from at start."""
    adapters = build_adapters(settings, database, writer, None)
    model = indexed_with(adapters.embedder.model_id)
    total = await _outstanding(database, model)
    with ThreadPoolExecutor(1) as pool, Progress("reindex", total, unit="digests") as bar:
        state = build_state(settings, adapters)
        memories = build_memory_service(settings, adapters, state, pool)
        digester = build_digester(settings, adapters, state, pool, memories)
        bar.update(0, note=f"with {model}")
        while batch := await digester.run_once():
            done = bar.done + batch
            bar.update(done, total=max(total, done))  # episodes closed meanwhile join the run
    return bar.done


async def _outstanding(database: Database, model: str) -> int:
    d = schema.digests
    stale = (d.c.state == DigestState.READY.value) & (d.c.embedding_model != model)
    stmt = select(func.count()).where((d.c.state != DigestState.READY.value) | stale)
    async with database.engine.connect() as conn:
        return int(await conn.scalar(stmt) or 0)
