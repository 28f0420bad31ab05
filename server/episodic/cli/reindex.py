"""`episodic reindex`: digests every pending episode and re-embeds every digest whose
vectors were made by another model, without serving, with a progress bar when stderr is a
terminal (episodic.progress). The server does the same in the background after a model
change; this is for doing it up front."""

from __future__ import annotations

from episodic.bootstrap.core import open_core
from episodic.config import Settings
from episodic.domain.digests import indexed_with
from episodic.domain.ports.digests import DigestBacklog
from episodic.progress import Progress


async def reindex(settings: Settings) -> int:
    """The server's own digester (`open_core`, nothing started), run round by round until
    nothing is left: vectors go to SQL, which a server loads its indexes from."""
    async with open_core(settings) as opened:
        backlog: DigestBacklog = opened.adapters.sql_digests
        digester = opened.core.workers.digester
        model = indexed_with(opened.adapters.embedder.model_id)
        total = await backlog.count_outstanding(model)
        with Progress("reindex", total, unit="digests") as bar:
            bar.update(0, note=f"with {model}")
            while batch := await digester.run_once():
                done = bar.done + batch
                bar.update(done, total=max(total, done))  # episodes closed meanwhile join the run
        return bar.done
