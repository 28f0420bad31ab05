"""Re-erasing at start what a restored database forgot: the erasure ledger replayed, online (a
starting server) or offline (restore)."""

from __future__ import annotations

import dataclasses
import logging
from concurrent.futures import ThreadPoolExecutor

from episodic.bootstrap.adapters import build_adapters
from episodic.bootstrap.containers import SqlAdapters
from episodic.bootstrap.schema import explained_startup_failures
from episodic.bootstrap.wiring import build_core
from episodic.config import EmbedderKind, ExtractorKind, Settings, SummarizerKind
from episodic.domain.erasure_ledger import Replayed
from episodic.service.erasure import EraseService
from episodic.service.erasure_replay import ErasureReplay
from episodic.store.database import open_database
from episodic.store.writer import GroupCommitWriter

log = logging.getLogger("episodic.server")


async def replay_ledger(adapters: SqlAdapters, erasure: EraseService) -> Replayed:
    """Erases again every user the ledger says was erased and the database does not: the
    database is an older backup, restored (service/erasure_replay.py). Logged in one line,
    counts only."""
    ledger = adapters.erasure_ledger
    if not ledger.where:
        return Replayed()
    report = await ErasureReplay(ledger=ledger, records=adapters.erasure_records, erasure=erasure).run()
    if report.pending:
        replayed = {"erasures": report.pending, "users": report.users, "nothing_left": report.nothing_left}
        erased = {kind: report.counts[kind] for kind in ("episodes", "messages", "memories")}
        log.info(f"restore: {report.summary()}", extra=replayed | erased)
    if report.adopted:
        log.info("erasure ledger: added the erasures only the database held", extra={"added": report.adopted})
    if report.unreadable_lines:
        log.warning(
            "erasure ledger: lines that are no entry skipped", extra={"lines": report.unreadable_lines}
        )
    return report


async def replay_offline(settings: Settings) -> Replayed:
    """The ledger's replay without serving (`episodic restore`, on the restored copy before
    it is put in place): the server's own wiring over SQL, nothing started. No model is
    loaded: erasing embeds and summarizes nothing."""
    quiet = dataclasses.replace(
        settings, embedder=EmbedderKind.HASHING, summarizer=SummarizerKind.EXTRACTIVE,
        extractor=ExtractorKind.EXTRACTIVE,
    )  # fmt: skip
    database = open_database(quiet.database_url)
    writer = GroupCommitWriter(database)
    writer.start()
    try:
        with explained_startup_failures(database), ThreadPoolExecutor(1) as pool:
            adapters = build_adapters(quiet, database, writer, None)
            core = build_core(quiet, adapters, pool=pool)
            return await replay_ledger(adapters, core.services.erasure)
    finally:
        await writer.stop()
        await database.dispose()
