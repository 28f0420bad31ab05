"""Tenants take the server's embedding threads in turn: a quiet tenant's job runs next, not
after a busy tenant's line; bulk never sits in front of a query; a big batch holds the
bulk thread one chunk at a time; memories, digests and documents all take those turns.
Order is shown with an executor the test runs by hand."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from episodic.domain.chunking import DocumentFormat
from episodic.domain.knowledge import DocumentDraft
from episodic.domain.memories import MemoryKind
from episodic.domain.memory_rules import CreateRequest, MemoryDraft
from episodic.domain.ports.models import TenantEmbeddings
from episodic.domain.recall import Vector
from episodic.state.embed_turns import FairEmbeddings, FairSlots
from tests.fakes_embedding_threads import ByHand, Embedder, settle
from tests.unit.use_cases import CALLER, TENANT, use_cases


async def test_a_freed_slot_goes_to_the_tenant_served_least_recently_not_to_the_first_in_line() -> None:
    slots, order = FairSlots(1), []

    async def job(tenant_id: str, name: str, done: asyncio.Event) -> None:
        await slots.acquire(tenant_id)
        order.append(name)
        await done.wait()
        slots.release(tenant_id)

    ends = {name: asyncio.Event() for name in ("a0", "a1", "a2", "b0")}
    tasks = []
    for tenant_id, name in (("a", "a0"), ("a", "a1"), ("a", "a2"), ("b", "b0")):
        tasks.append(asyncio.create_task(job(tenant_id, name, ends[name])))
        await settle()
    for name in ("a0", "b0", "a1", "a2"):
        ends[name].set()
        await settle()
    await asyncio.gather(*tasks)
    assert order == ["a0", "b0", "a1", "a2"]


async def test_a_quiet_tenants_bulk_job_waits_for_one_chunk_of_a_busy_tenants_batch_not_all_of_it() -> None:
    bulk = ByHand()
    embeddings = FairEmbeddings(Embedder(), bulk, chunk=2)
    big = asyncio.create_task(embeddings.bulk("a", ["a1", "a2", "a3", "a4", "a5", "a6"]))
    await settle()
    small = asyncio.create_task(embeddings.bulk("b", ["b1"]))
    await settle()
    while bulk.running:
        assert bulk.running == 1  # one bulk thread, as before
        await bulk.finish_next()
    assert bulk.submitted == [["a1", "a2"], ["b1"], ["a3", "a4"], ["a5", "a6"]]
    assert await big == [[2.0]] * 6
    assert await small == [[2.0]]


async def test_a_query_never_waits_behind_bulk_embeddings() -> None:
    bulk, queries = ByHand(), ByHand()
    embeddings = FairEmbeddings(Embedder(), bulk, query_pool=queries)
    batch = asyncio.create_task(embeddings.bulk("a", [f"memory {i}" for i in range(40)]))
    await settle()
    query = asyncio.create_task(embeddings.query("b", ["where?"]))
    await settle()
    assert queries.submitted == [["where?"]]  # at once, the bulk thread still busy
    await queries.finish_next()
    assert await query == [[6.0]]
    batch.cancel()


async def test_queries_past_the_slots_wait_and_a_quiet_tenants_goes_first() -> None:
    queries = ByHand()
    embeddings = FairEmbeddings(Embedder(), None, query_pool=queries, query_slots=2)
    busy = [asyncio.create_task(embeddings.query("a", [f"a{i}"])) for i in range(4)]
    await settle()
    quiet = asyncio.create_task(embeddings.query("b", ["b0"]))
    await settle()
    assert queries.submitted == [["a0"], ["a1"]]
    await queries.finish_next()
    assert queries.submitted[-1] == ["b0"]  # before a2 and a3, who asked first
    while queries.running:
        await queries.finish_next()
    await asyncio.gather(quiet, *busy)
    assert queries.submitted[2:] == [["b0"], ["a2"], ["a3"]]


async def test_a_cancelled_caller_holds_its_slot_until_the_model_is_done_with_it() -> None:
    queries = ByHand()
    embeddings = FairEmbeddings(Embedder(), None, query_pool=queries, query_slots=1)
    leaving = asyncio.create_task(embeddings.query("a", ["a0"]))
    await settle()
    leaving.cancel()
    waiting = asyncio.create_task(embeddings.query("b", ["b0"]))
    await settle()
    with pytest.raises(asyncio.CancelledError):
        await leaving
    assert queries.submitted == [["a0"]]  # the thread still runs a0: b0 waits
    await queries.finish_next()
    assert queries.submitted == [["a0"], ["b0"]]
    await queries.finish_next()
    assert await waiting == [[2.0]]


async def test_a_cancelled_wait_leaves_the_line_and_the_slots_stay_whole() -> None:
    slots = FairSlots(1)
    await slots.acquire("a")
    waiting = asyncio.create_task(slots.acquire("b"))
    await settle()
    waiting.cancel()
    slots.release("a")  # hands on before the cancelled waiter runs again
    with pytest.raises(asyncio.CancelledError):
        await waiting
    async with asyncio.timeout(1):
        await slots.acquire("c")  # the slot is free
    slots.release("c")


class Recorded:
    """The server's TenantEmbeddings, recording whose turn each job takes."""

    def __init__(self, inner: TenantEmbeddings) -> None:
        self.inner = inner
        self.jobs: list[tuple[str, str]] = []

    async def query(self, tenant_id: str, texts: Sequence[str]) -> list[Vector]:
        self.jobs.append(("query", tenant_id))
        return await self.inner.query(tenant_id, texts)

    async def bulk(self, tenant_id: str, texts: Sequence[str]) -> list[Vector]:
        self.jobs.append(("bulk", tenant_id))
        return await self.inner.bulk(tenant_id, texts)


async def test_memories_and_digests_are_embedded_on_their_tenants_bulk_turns() -> None:
    uc = use_cases()
    await uc.new_agent()
    assert uc.memories.embeddings is not None  # the composition root gives every service the one scheduler
    recorded = Recorded(uc.memories.embeddings)
    uc.memories.embeddings = uc.digester.embeddings = recorded
    episode = await uc.open()
    note = MemoryDraft(text="Mary wants a quiet room", kind=MemoryKind.FACT)
    await uc.memories.create(CALLER, CreateRequest([note], "helper", "mary"))
    assert recorded.jobs == [("bulk", TENANT)]
    await uc.say(episode, "I live in Lisbon and I love surfing.", "Nice!")
    await uc.close(episode)
    assert await uc.digester.run_once() == 1
    assert set(recorded.jobs) == {("bulk", TENANT)} and len(recorded.jobs) >= 2


async def test_documents_chunks_are_embedded_on_their_tenants_bulk_turns() -> None:
    uc = use_cases()
    await uc.new_agent()
    assert uc.knowledge.embeddings is uc.memories.embeddings  # the one scheduler, not the pool directly
    assert uc.knowledge.embeddings is not None
    recorded = Recorded(uc.knowledge.embeddings)
    uc.knowledge.embeddings = recorded
    draft = DocumentDraft("parking", "Parking permits come from the facilities desk.", DocumentFormat.TEXT)
    await uc.knowledge.create(CALLER, "helper", [draft])
    assert recorded.jobs == [("bulk", TENANT)]
    changed = DocumentDraft("parking", "Permits: ask at the desk.")
    await uc.knowledge.update(CALLER, "helper", changed, ["text"])
    assert recorded.jobs == [("bulk", TENANT)] * 2
