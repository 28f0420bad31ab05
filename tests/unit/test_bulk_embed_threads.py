"""More than one bulk embedding thread (settings.bulk_embed_threads): a job's chunks run on
as many at once, never more, and come back in order; a query still never waits behind bulk;
tenants still take the threads in turn; one CreateDocuments is one bulk job over all its
documents' chunks; the setting reaches the bulk lane. Order is shown with an executor the
test runs by hand."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from episodic import config
from episodic.bootstrap.wiring import build_core, new_embed_pool
from episodic.domain.chunking import DocumentFormat
from episodic.domain.knowledge import DocumentDraft, embedded_text
from episodic.domain.ports.knowledge import DocumentWrite
from episodic.domain.recall import Vector
from episodic.state.embed_turns import FairEmbeddings
from tests.fakes import FixedClock, FrozenMonotonic, InlineExecutor, Tables
from tests.fakes_embedding_threads import ByHand, Embedder, settle
from tests.unit.use_cases import CALLER, fake_adapters, use_cases


async def test_with_two_bulk_threads_a_jobs_chunks_run_two_at_once_and_come_back_in_order() -> None:
    bulk = ByHand()
    embeddings = FairEmbeddings(Embedder(), bulk, bulk_slots=2, chunk=2)
    texts = ["a", "bb", "ccc", "dddd", "eeeee", "ffffff", "g"]
    job = asyncio.create_task(embeddings.bulk("t", texts))
    await settle()
    assert bulk.submitted == [["a", "bb"], ["ccc", "dddd"]]
    while bulk.running:
        assert bulk.running == 2 or bulk.submitted[-1] == ["g"]
        await bulk.finish(at=bulk.running - 1)  # the later chunk first
    assert bulk.most_running == 2
    assert await job == [[float(len(t))] for t in texts]


async def test_with_two_bulk_threads_a_query_still_never_waits_behind_bulk() -> None:
    bulk, queries = ByHand(), ByHand()
    embeddings = FairEmbeddings(Embedder(), bulk, query_pool=queries, bulk_slots=2)
    batch = asyncio.create_task(embeddings.bulk("a", [f"memory {i}" for i in range(64)]))
    other = asyncio.create_task(embeddings.bulk("b", [f"note {i}" for i in range(64)]))
    await settle()
    assert bulk.running == 2  # both bulk threads busy
    query = asyncio.create_task(embeddings.query("c", ["where?"]))
    await settle()
    assert queries.submitted == [["where?"]]  # at once, the bulk threads still busy
    await queries.finish()
    assert await query == [[6.0]]
    assert bulk.running == 2
    batch.cancel()
    other.cancel()


async def test_two_tenants_share_two_bulk_threads_in_turn_never_holding_more() -> None:
    bulk = ByHand()
    embeddings = FairEmbeddings(Embedder(), bulk, bulk_slots=2, chunk=1)
    big = asyncio.create_task(embeddings.bulk("a", [f"a{i}" for i in range(6)]))
    await settle()
    small = asyncio.create_task(embeddings.bulk("b", ["b0"]))
    await settle()
    assert bulk.submitted == [["a0"], ["a1"]]
    await bulk.finish()
    assert bulk.submitted[-1] == ["b0"]  # the freed thread goes to the quiet tenant, not a2
    while bulk.running:
        await bulk.finish()
    assert bulk.most_running == 2
    assert await small == [[2.0]]
    assert await big == [[2.0]] * 6


async def test_a_failing_chunk_fails_its_job_with_the_models_error_and_its_other_turns_stop() -> None:
    bulk = ByHand()
    embeddings = FairEmbeddings(Embedder(), bulk, bulk_slots=2, chunk=1)
    job = asyncio.create_task(embeddings.bulk("t", ["ok", "bad", "x", "y", "z"]))
    await settle()
    await bulk.finish(at=1)  # "bad"
    with pytest.raises(RuntimeError, match="the model failed"):
        await job
    await bulk.finish()  # "ok", still on its thread when the job failed
    assert bulk.running == 0
    assert bulk.submitted == [["ok"], ["bad"]]  # x, y and z never started


def test_the_bulk_embed_threads_setting_reaches_the_pool_and_the_bulk_lane() -> None:
    pool = new_embed_pool(2)
    try:
        assert pool._max_workers == 2
    finally:
        pool.shutdown()

    async def lane() -> int:
        settings = config.Settings(bulk_embed_threads=2)
        adapters = fake_adapters(settings, Tables(), FixedClock(), FrozenMonotonic())
        bulk = ByHand()
        core = build_core(settings, adapters, pool=InlineExecutor(), embed_pool=bulk)
        embeddings = core.services.knowledge.embeddings
        job = asyncio.create_task(embeddings.bulk("t", [f"text {i}" for i in range(64)]))
        await settle()
        running = bulk.running
        while bulk.running:
            await bulk.finish()
        await job
        return running

    assert asyncio.run(lane()) == 2


async def test_one_create_documents_is_one_bulk_job_over_all_its_documents_chunks() -> None:
    uc = use_cases()
    await uc.new_agent()
    embeddings, store = uc.knowledge.embeddings, uc.knowledge.store
    jobs: list[list[str]] = []
    writes: list[DocumentWrite] = []

    class Recorded:
        async def query(self, tenant_id: str, texts: Sequence[str]) -> list[Vector]:
            return await embeddings.query(tenant_id, texts)

        async def bulk(self, tenant_id: str, texts: Sequence[str]) -> list[Vector]:
            jobs.append(list(texts))
            return await embeddings.bulk(tenant_id, texts)

    def create(written: Sequence[DocumentWrite], declared: Any) -> Any:
        writes.extend(written)
        return store.create(written, declared)

    uc.knowledge.embeddings = Recorded()
    uc.knowledge.store = SimpleNamespace(create=create)
    drafts = [
        DocumentDraft(
            f"doc-{i}", f"## Part one\n\nFirst {i}.\n\n## Part {i}\n\nSecond {i}.", DocumentFormat.MARKDOWN
        )
        for i in range(3)
    ]
    await uc.knowledge.create(CALLER, "helper", drafts)
    assert len(jobs) == 1
    assert len(jobs[0]) == sum(len(w.chunks) for w in writes) == 6
    for w in writes:  # each document's vectors are its own chunks'
        assert w.document.chunk_count == len(w.chunks) == 2
        texts = [embedded_text(w.document, c) for c in w.chunks]
        assert w.vectors == uc.adapters.embedder.embed(texts)
