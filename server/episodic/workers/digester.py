"""The background digester: turns closed episodes into digests (summary, key facts,
embeddings), stores them, then indexes them. It runs beside the RPCs, never in them:
summarizing and embedding go to worker threads, writes through the group-commit writer.

Work lives in SQL (digests rows), so a restart resumes where it stopped; a claim is a
lease, so a crashed replica's work comes back. The index is written after SQL commits and
is a cache of SQL (loaded per scope), so a crash in between loses or duplicates nothing.
After an embedding-model change, READY digests with old vectors are re-embedded here too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import timedelta

from episodic.domain import digests as rules
from episodic.domain.changes import EpisodeVectors, ScopeChanged
from episodic.domain.model import Message
from episodic.domain.ports.changes import ChangeOwner
from episodic.domain.ports.clock import Clock
from episodic.domain.ports.digests import DigestStore
from episodic.domain.ports.models import Embedder, Summarizer, TenantEmbeddings
from episodic.domain.recall import Digest, DigestState, DigestText, Vector, vector_key
from episodic.errors import EpisodicError
from episodic.workers.loops import cancel_and_wait, stop_if_cancelled

log = logging.getLogger(__name__)
SETTLED = (DigestState.READY, DigestState.FAILED)


@dataclass(frozen=True, slots=True)
class DigestPace:
    """How fast the digester drains its work: how much it claims at once, how many of a claim
    it makes side by side, how long a claim is its own, how long it rests when idle."""

    batch: int = 16
    # Digests of a claimed batch made at once, each embedding on its own thread. One leaves a
    # core to the RPCs while a backlog drains; more drain it faster on more cores.
    workers: int = 1
    lease: timedelta = timedelta(seconds=60)  # a crashed server's claims come back within a minute
    idle_poll_seconds: float = 1.0


@dataclass(kw_only=True)
class Digester:
    store: DigestStore
    summarizer: Summarizer
    embedder: Embedder
    changes: ChangeOwner  # a ready digest's vectors land in SQL and the index as one change
    clock: Clock
    pace: DigestPace = DigestPace()
    summary_pool: Executor | None = None  # the server's bounded pool for summaries; None: asyncio's default
    embed_pool: Executor | None = None  # the server's one thread for bulk embeddings; None: asyncio's default
    embeddings: TenantEmbeddings | None = None  # over embed_pool, tenants in turn; None: embed_pool directly
    # the episode's pending and extracted memories into long-term storage (idempotent), before
    # its digest is marked ready: a crash in between redoes both
    promote: Callable[[Digest, Sequence[Message]], Awaitable[int]] | None = None
    on_failure: Callable[[str], None] | None = None  # told each failed attempt's error type (metrics)
    _wake: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _settled: asyncio.Condition = field(default_factory=asyncio.Condition, init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="episodic-digester")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)

    def wake(self) -> None:
        """Called after a close, so new work starts now rather than at the next poll."""
        self._wake.set()

    async def wait_settled(self, tenant_id: str, episode_id: str, timeout: float) -> Digest | None:
        """The digest once READY or FAILED, or as it is when `timeout` runs out."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            digest = await self.store.get(tenant_id, episode_id)
            left = deadline - asyncio.get_running_loop().time()
            if digest is None or digest.state in SETTLED or left <= 0:
                return digest
            async with self._settled:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._settled.wait(), timeout=min(left, 0.25))

    async def run_once(self) -> int:
        """Digests what is due (then re-embeds stale vectors); returns how many succeeded,
        so a loop over it rests when everything is failing."""
        work = await self.store.claim_due(self.clock(), self.pace.batch, self.pace.lease)
        if work:
            return await self._digest_all(work)
        stale = await self.store.stale(rules.indexed_with(self.embedder.model_id), self.pace.batch)
        done = await self._digest_all(stale)
        if stale:
            left = await self.store.count_stale(rules.indexed_with(self.embedder.model_id))
            log.info("re-embedding after a model or index change", extra={"done": done, "left": left})
        return done

    async def _run(self) -> None:
        while True:
            try:
                done = await self.run_once()
            except EpisodicError:  # the database is out: its health logged that once
                done = 0
            except Exception:  # keep the loop alive; the next round retries
                log.exception("digest round failed")
                done = 0
            stop_if_cancelled()
            if not done:
                await self._sleep()

    async def _sleep(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=self.pace.idle_poll_seconds)
        self._wake.clear()

    async def _digest_all(self, digests: Sequence[Digest]) -> int:
        """How many of `digests` succeeded, made `pace.workers` at a time."""
        room = asyncio.Semaphore(self.pace.workers)

        async def one(digest: Digest) -> bool:
            async with room:
                return await self._digest(digest)

        return sum(await asyncio.gather(*(one(d) for d in digests)))

    async def _digest(self, digest: Digest) -> bool:
        try:
            await self._make(digest)
            succeeded = True
        except Exception as exc:  # recorded on the digest and retried with back-off
            if not isinstance(exc, EpisodicError):  # an outage is logged once, by the store's health
                log.warning("digest failed", extra={"episode_id": digest.episode_id}, exc_info=True)
            if self.on_failure is not None:
                self.on_failure(exc.reason if isinstance(exc, EpisodicError) else type(exc).__name__)
            failed = rules.failed(digest, _failure(exc), self.clock())
            await self.changes.commit(
                lambda declared: self.store.save_failed(failed, declared),
                # its pending count changed; erased meanwhile: no feed row names the user again
                lambda saved: [ScopeChanged(digest.scope)] if saved else [],
                exclusive=False,
            )
            succeeded = False
        async with self._settled:
            self._settled.notify_all()
        return succeeded

    async def _make(self, digest: Digest) -> None:
        messages = await self.store.transcript(digest)
        if self.promote is not None and digest.state is not DigestState.READY:
            await self.promote(digest, messages)
        text = await self._text(digest, messages)
        loop = asyncio.get_running_loop()
        texts = rules.embedded_texts(text, messages)
        if self.embeddings is not None:
            vectors: Sequence[Vector] = await self.embeddings.bulk(digest.tenant_id, texts)
        else:
            vectors = await loop.run_in_executor(self.embed_pool, self.embedder.embed, texts)
        done = rules.ready(digest, text, rules.indexed_with(self.embedder.model_id), self.clock())
        keys = [vector_key(digest.episode_id, i) for i in range(len(vectors))]
        await self.changes.commit(
            lambda declared: self.store.save_ready(
                done, vectors, rules.lexical_body(text, messages), declared
            ),
            # erased meanwhile: no vectors reach the index (or another replica's)
            lambda saved: [EpisodeVectors(done.scope, done.episode_id, keys, vectors)] if saved else [],
        )

    async def _text(self, digest: Digest, messages: list[Message]) -> DigestText:
        if digest.state is DigestState.READY:  # re-embedding only: keep the summary
            return DigestText(digest.summary, digest.key_facts)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.summary_pool, self.summarizer.summarize, messages)


def _failure(exc: Exception) -> str:
    """What is stored on a failed digest: our own errors' messages, else the type only (a
    driver's or a model endpoint's message may quote user text)."""
    if isinstance(exc, EpisodicError):
        return f"{exc.reason}: {exc.message}"
    return type(exc).__name__
