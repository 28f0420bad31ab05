"""QueryVectors: a turn's query text is embedded once, even when the embedding was started
early or several callers ask for it at once."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence

import pytest

from episodic.embed.hashing import HashingEmbedder
from episodic.state.query_vectors import QueryVectors
from tests.polling import eventually


class CountingEmbedder:
    """HashingEmbedder that counts texts and can hold every call until released."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.texts: list[str] = []
        self.release = threading.Event()
        self.release.set()
        self.fail = False

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        self.release.wait(5)
        if self.fail:
            raise RuntimeError("embedder down")
        return self.inner.embed(texts)


def prefetch_ended(queries: QueryVectors) -> Callable[[], Awaitable[bool]]:
    """True once no embedding is under way (the prefetch's future is done and handled)."""

    async def ended() -> bool:
        return not queries._running

    return ended


async def test_a_prefetched_text_is_embedded_once() -> None:
    embedder = CountingEmbedder()
    queries = QueryVectors(embedder)
    queries.prefetch("where did we go in May?")
    first = await queries.of("where did we go in May?")
    second = await queries.of("where did we go in May?")
    assert first == second == embedder.inner.embed(["where did we go in May?"])[0]
    assert embedder.texts == ["where did we go in May?"]


async def test_a_text_is_under_way_from_its_prefetch_until_its_vector_is_held() -> None:
    embedder = CountingEmbedder()
    embedder.release.clear()
    queries = QueryVectors(embedder)
    assert not queries.under_way("where did we go in May?")
    queries.prefetch("where did we go in May?")
    assert queries.under_way("where did we go in May?") and not queries.under_way("another text")
    embedder.release.set()
    await queries.of("where did we go in May?")
    assert not queries.under_way("where did we go in May?")


async def test_callers_asking_while_it_runs_share_one_embedding() -> None:
    embedder = CountingEmbedder()
    embedder.release.clear()
    queries = QueryVectors(embedder)
    waiting = [asyncio.create_task(queries.of("same text")) for _ in range(5)]
    await asyncio.sleep(0.05)
    embedder.release.set()
    vectors = await asyncio.gather(*waiting)
    assert all(v == vectors[0] for v in vectors)
    assert embedder.texts == ["same text"]


async def test_a_cancelled_caller_does_not_cancel_the_embedding_others_wait_for() -> None:
    embedder = CountingEmbedder()
    embedder.release.clear()
    queries = QueryVectors(embedder)
    leaving = asyncio.create_task(queries.of("q"))
    staying = asyncio.create_task(queries.of("q"))
    await asyncio.sleep(0.05)
    leaving.cancel()
    embedder.release.set()
    assert len(await staying) == embedder.dimension
    with pytest.raises(asyncio.CancelledError):
        await leaving


async def test_a_failed_prefetch_is_retried_by_the_next_caller() -> None:
    embedder = CountingEmbedder()
    embedder.fail = True
    queries = QueryVectors(embedder)
    queries.prefetch("q")
    # it fails with nobody waiting (nothing is held, nothing is logged): waited on, not slept
    assert await eventually(prefetch_ended(queries)), "the prefetch did not end"
    embedder.fail = False
    assert len(await queries.of("q")) == embedder.dimension
    assert embedder.texts == ["q", "q"]


async def test_blank_texts_are_not_prefetched() -> None:
    embedder = CountingEmbedder()
    QueryVectors(embedder).prefetch("   ")
    await asyncio.sleep(0.01)
    assert embedder.texts == []


async def test_a_long_text_is_held_under_its_hash_and_embedded_once() -> None:
    embedder = CountingEmbedder()
    queries = QueryVectors(embedder)
    long_text = "the plan for Lisbon " * 1000
    queries.prefetch(long_text)
    await asyncio.sleep(0.05)  # finished before anyone asked
    first = await queries.of(long_text)
    assert first == embedder.inner.embed([long_text])[0]
    assert await queries.of(long_text) == first
    assert embedder.texts == [long_text]
    # the key is the whole text's hash: a text differing past the first 4096 characters
    # is another entry, embedded on its own, never the first one's vector
    longer = long_text + "and Porto"
    other = await queries.of(longer)
    assert other == embedder.inner.embed([longer])[0] != first
    assert embedder.texts == [long_text, longer]


class InlineEmbedder(CountingEmbedder):
    """Cheap enough to embed short texts on the calling thread."""

    inline_chars = 16

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.threads.append(threading.current_thread().name)
        return super().embed(texts)


async def test_a_cheap_embedder_embeds_a_short_query_on_the_calling_thread_and_a_long_one_off_it() -> None:
    embedder = InlineEmbedder()
    queries = QueryVectors(embedder)
    queries.prefetch("short")  # nothing to start: `of` embeds it at once
    assert embedder.texts == []
    assert await queries.of("short") == embedder.inner.embed(["short"])[0]
    await queries.of("short")  # held
    await queries.of("a text longer than sixteen characters")
    here = threading.current_thread().name
    assert embedder.texts == ["short", "a text longer than sixteen characters"]
    assert embedder.threads[0] == here and embedder.threads[1] != here


class RecordedTurns:
    """TenantEmbeddings that records whose turn each job takes."""

    def __init__(self, embedder: CountingEmbedder) -> None:
        self.embedder = embedder
        self.jobs: list[tuple[str, str, list[str]]] = []

    async def query(self, tenant_id: str, texts: Sequence[str]) -> list[Sequence[float]]:
        self.jobs.append(("query", tenant_id, list(texts)))
        return list(self.embedder.embed(texts))

    async def bulk(self, tenant_id: str, texts: Sequence[str]) -> list[Sequence[float]]:
        self.jobs.append(("bulk", tenant_id, list(texts)))
        return list(self.embedder.embed(texts))


async def test_a_query_embedding_takes_a_query_turn_of_the_tenant_that_asked_first() -> None:
    embedder = CountingEmbedder()
    turns = RecordedTurns(embedder)
    queries = QueryVectors(embedder, embeddings=turns)
    queries.prefetch("where did we go in May?", "tenant-b")
    assert (
        await queries.of("where did we go in May?", "tenant-a")
        == embedder.inner.embed(["where did we go in May?"])[0]
    )
    await queries.of("and in June?", "tenant-a")
    assert turns.jobs == [
        ("query", "tenant-b", ["where did we go in May?"]),
        ("query", "tenant-a", ["and in June?"]),
    ]
