"""Re-erasing at start what a restored database forgot: the erasure ledger replayed, online (a
starting server) or offline (restore)."""

from __future__ import annotations

import logging

from episodic.bootstrap.containers import SqlAdapters
from episodic.bootstrap.core import open_core
from episodic.config import Settings
from episodic.domain.erasure_ledger import Replayed
from episodic.service.erasure import EraseService
from episodic.service.erasure_replay import ErasureReplay

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
    it is put in place, which restore holds alone): the server's own core over SQL
    (`open_core`), nothing started. No model is loaded: erasing embeds and summarizes nothing."""
    async with open_core(settings, models=False, held=False) as opened:
        return await replay_ledger(opened.adapters, opened.core.services.erasure)
