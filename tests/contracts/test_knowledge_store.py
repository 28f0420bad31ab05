"""The `KnowledgeStore` port (and the `ScopeVectorSource` of knowledge's vectors): an agent's
documents created all-or-nothing (a retry of the same content is no conflict), replaced
whole, deleted with everything of them (chunks, vectors, full text); the reads of one
tenant's one agent (by id, pages, chunks by key, full text, the newest); per tenant and per
agent.

The expiry sweep and the counts serve the whole cluster, so those tests run over a database
of their own (`own_database`) and state exactly what they see.

The filter: `domain/knowledge.passes` is the rule. Each implementation's `page`, `chunks`
and `newest` must return exactly the documents it passes, over a grid of documents and
filters: this is what holds the SQL WHERE clause (store/knowledge.py `_passing`) to the rule."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, text

from episodic.domain.changes import NO_CHANGES
from episodic.domain.chunking import DocumentFormat
from episodic.domain.knowledge import (
    Document,
    DocumentChunk,
    KnowledgeFilter,
    chunk_key,
    embedded_text,
    knowledge_scope,
    metadata_of,
    passes,
)
from episodic.domain.ports.indexes import ScopeVectorPages
from episodic.domain.ports.knowledge import DocumentWrite
from episodic.domain.recall import Hit, Scope, Vector
from episodic.errors import AlreadyExists, NotFound
from episodic.index.words import Bm25WordIndex
from tests.conftest import unique
from tests.contracts.conftest import World, own_database

HOUR = timedelta(hours=1)
NOTHING = KnowledgeFilter()
# A heading and three paragraphs: three chunks at 60 characters a chunk (the heading and the
# first paragraph share one).
GUIDE = (
    "# Care guide\n\n"
    "Water the fern every morning with rain water.\n\n"
    "Repot the cactus each spring in sandy soil.\n\n"
    "Feed the orchid monthly; never let it stand wet."
)


def new_agent() -> str:
    return unique("agent")


def split(world: World, agent_id: str, body: str = GUIDE, **changes: Any) -> DocumentWrite:
    """A write of `body` cut into small chunks (60 characters at most)."""
    return world.document(agent_id, body, max_chars=60, **changes)


def keys(chunks: Sequence[DocumentChunk]) -> list[str]:
    return [c.key for c in chunks]


def found(hits: Sequence[Hit]) -> list[str]:
    return [h.episode_id for h in hits]


async def matched(world: World, tenant_id: str, agent_id: str, query: str, limit: int) -> list[Hit]:
    """The agent's chunks by their words, as its word index built from `texts` finds them."""
    index = Bm25WordIndex()
    index.add(await world.knowledge.texts(tenant_id, agent_id))
    return index.search(query, limit)


def floats(vectors: Sequence[Vector]) -> list[list[float]]:
    return [[float(x) for x in v] for v in vectors]


def bare(d: Document) -> Document:
    """A document as chunks() and newest() return it: its fields, not its text."""
    return dataclasses.replace(d, text="")


async def held_chunks(world: World, d: Document, where: KnowledgeFilter = NOTHING) -> list[DocumentChunk]:
    """Every chunk the store holds of `d` (asked for by key, up to 50)."""
    named = [chunk_key(d.document_id, i) for i in range(50)]
    held = await world.knowledge.chunks(d.tenant_id, d.agent_id, named, where, world.clock())
    assert all(doc == bare(d) for doc, _ in held.values())
    return [c for _, c in held.values()]


async def scope_vectors(world: World, tenant_id: str, agent_id: str) -> tuple[list[str], list[list[float]]]:
    names, vectors = await world.knowledge_vectors.scope_vectors(knowledge_scope(tenant_id, agent_id))
    return names, floats(vectors)


# --- create --------------------------------------------------------------------------------


async def test_a_document_round_trips_whole_with_its_chunks_and_vectors(world: World) -> None:
    agent_id = new_agent()
    write = split(
        world, agent_id, title="Plants", uri="https://example.com/plants",
        metadata=metadata_of({"lang": "en", "team": "garden"}), expires_at=world.clock() + HOUR,
    )  # fmt: skip
    created = await world.knowledge.create([write], NO_CHANGES)
    d = write.document
    assert created.result == [(d, True)] and d.chunk_count == 3
    assert await world.knowledge.get(world.tenant, agent_id, d.document_id, world.clock()) == d
    assert await held_chunks(world, d) == list(write.chunks)
    assert [c.heading_path for c in write.chunks] == [("Care guide",)] * 3
    assert all(c.text == d.text[c.start : c.end] for c in await held_chunks(world, d))
    assert await scope_vectors(world, world.tenant, agent_id) == (
        keys(write.chunks),
        [[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]],
    )


async def test_a_document_without_vectors_is_held_with_none(world: World) -> None:
    agent_id = new_agent()
    write = split(world, agent_id, embedded=False)
    [d] = await world.learn(write)
    assert await held_chunks(world, d) == list(write.chunks)
    assert await scope_vectors(world, world.tenant, agent_id) == ([], [])


async def test_a_create_again_with_the_same_content_is_a_retry_that_writes_nothing(world: World) -> None:
    agent_id = new_agent()
    first = split(world, agent_id, metadata=metadata_of({"v": "1"}))
    [d] = await world.learn(first)
    world.later()
    again = split(
        world, agent_id, document_id=d.document_id, metadata=metadata_of({"v": "2"}), embedded=False
    )
    assert again.document.content_hash == d.content_hash
    retried = await world.knowledge.create([again], NO_CHANGES)
    assert retried.result == [(d, False)]
    assert await world.knowledge.get(world.tenant, agent_id, d.document_id, world.clock()) == d
    assert await held_chunks(world, d) == list(first.chunks)
    assert len((await scope_vectors(world, world.tenant, agent_id))[0]) == d.chunk_count


async def test_a_create_of_a_held_id_with_other_content_conflicts_and_changes_nothing(world: World) -> None:
    agent_id = new_agent()
    first = split(world, agent_id)
    [d] = await world.learn(first)
    for changed in (
        {"title": "Another title"},
        {"fmt": DocumentFormat.TEXT},
        {"body": GUIDE + " More."},
    ):
        other = split(world, agent_id, document_id=d.document_id, **changed)
        with pytest.raises(AlreadyExists) as raised:
            await world.knowledge.create([other], NO_CHANGES)
        assert raised.value.reason == "DOCUMENT_EXISTS"
    assert await world.knowledge.get(world.tenant, agent_id, d.document_id, world.clock()) == d
    assert await held_chunks(world, d) == list(first.chunks)


async def test_a_conflict_anywhere_in_a_batch_writes_none_of_it(world: World) -> None:
    agent_id = new_agent()
    [held] = await world.learn(split(world, agent_id, "Basil likes sun."))
    batch = [
        split(world, agent_id, "Tulips bloom in April."),
        split(world, agent_id, "Roses want pruning."),
        split(world, agent_id, "Basil hates frost.", document_id=held.document_id),  # the conflict
        split(world, agent_id, "Lilies smell strong."),
    ]
    with pytest.raises(AlreadyExists):
        await world.knowledge.create(batch, NO_CHANGES)
    for w in batch:
        if w.document.document_id != held.document_id:
            with pytest.raises(NotFound):
                await world.knowledge.get(world.tenant, agent_id, w.document.document_id, world.clock())
            assert await held_chunks(world, w.document) == []
    for word in ("tulips", "roses", "lilies", "frost"):
        assert await matched(world, world.tenant, agent_id, word, 10) == []
    assert (await scope_vectors(world, world.tenant, agent_id))[0] == [chunk_key(held.document_id, 0)]
    page = await world.knowledge.page(world.tenant, agent_id, NOTHING, world.clock(), None, 10)
    assert page == [held]


async def test_a_batch_creates_the_new_and_retries_the_held(world: World) -> None:
    agent_id = new_agent()
    [held] = await world.learn(split(world, agent_id, "Basil likes sun."))
    new = split(world, agent_id, "Tulips bloom in April.")
    retry = split(world, agent_id, "Basil likes sun.", document_id=held.document_id)
    twice = split(world, agent_id, "Tulips bloom in April.", document_id=new.document.document_id)
    created = await world.knowledge.create([new, retry, twice], NO_CHANGES)
    assert created.result == [(new.document, True), (held, False), (new.document, False)]
    assert await held_chunks(world, new.document) == list(new.chunks)
    clash = split(world, agent_id, "Tulips bloom in May.", document_id=new.document.document_id)
    fresh = split(world, agent_id, "Roses want pruning.")
    with pytest.raises(AlreadyExists):  # after a new one: the new one is not written either
        await world.knowledge.create([fresh, clash], NO_CHANGES)
    twins = [split(world, agent_id, body, document_id="twin") for body in ("A.", "B.")]
    with pytest.raises(AlreadyExists):  # one id twice in one batch, with other content
        await world.knowledge.create([fresh, *twins], NO_CHANGES)
    for missing in (fresh.document.document_id, "twin"):
        with pytest.raises(NotFound):
            await world.knowledge.get(world.tenant, agent_id, missing, world.clock())


async def test_one_document_id_is_apart_in_each_agent_and_tenant(world: World) -> None:
    agent_id, other_agent, other_tenant = new_agent(), new_agent(), unique("tenant")
    mine = split(world, agent_id, "Basil likes sun.", document_id="doc-1")
    theirs = [
        split(world, other_agent, "Basil hates frost.", document_id="doc-1"),
        split(world, agent_id, "Mint spreads fast.", document_id="doc-1", tenant_id=other_tenant),
    ]
    await world.learn(mine, *theirs)
    for w in (mine, *theirs):
        d = w.document
        assert await world.knowledge.get(d.tenant_id, d.agent_id, "doc-1", world.clock()) == d
        assert await held_chunks(world, d) == list(w.chunks)


# --- isolation -------------------------------------------------------------------------------


async def test_every_read_and_write_is_of_one_tenants_one_agent(world: World) -> None:
    agent_id = new_agent()
    write = split(world, agent_id, "Zinnias love heat.\n\nZinnias need sun.")
    [d] = await world.learn(write)
    now, named = world.clock(), keys(write.chunks)
    for tenant_id, agent in ((world.tenant, new_agent()), (unique("tenant"), agent_id)):
        with pytest.raises(NotFound):
            await world.knowledge.get(tenant_id, agent, d.document_id, now)
        assert await world.knowledge.page(tenant_id, agent, NOTHING, now, None, 10) == []
        assert await world.knowledge.chunks(tenant_id, agent, named, NOTHING, now) == {}
        assert await matched(world, tenant_id, agent, "zinnias", 10) == []
        assert await world.knowledge.newest(tenant_id, agent, NOTHING, now, 10) == []
        assert await scope_vectors(world, tenant_id, agent) == ([], [])
        elsewhere = dataclasses.replace(d, tenant_id=tenant_id, agent_id=agent)
        with pytest.raises(NotFound):
            await world.knowledge.replace(dataclasses.replace(write, document=elsewhere), NO_CHANGES)
        with pytest.raises(NotFound):
            await world.knowledge.delete(tenant_id, agent, d.document_id, NO_CHANGES)
    # a user's scope of the same agent is not the agent's knowledge scope
    user_scope = Scope(world.tenant, agent_id, "u1")
    assert await world.knowledge_vectors.scope_vectors(user_scope) == ([], [])
    assert await world.knowledge_vectors.item_vectors(user_scope, [d.document_id]) == ([], [])
    assert await world.knowledge.get(world.tenant, agent_id, d.document_id, now) == d  # all untouched
    assert await held_chunks(world, d) == list(write.chunks)


# --- get, page, chunks, newest and the filter ------------------------------------------------


async def test_an_expired_document_is_not_found_and_never_listed(world: World) -> None:
    agent_id = new_agent()
    lasting = split(world, agent_id, "Ferns like shade.", document_id="a")
    ending = split(world, agent_id, "Ferns like shade too.", document_id="b", expires_at=world.clock() + HOUR)
    [kept, ends] = await world.learn(lasting, ending)
    now = world.clock()
    assert await world.knowledge.get(world.tenant, agent_id, "b", now) == ends
    world.later(HOUR)  # expires_at == now: expired
    now = world.clock()
    with pytest.raises(NotFound):
        await world.knowledge.get(world.tenant, agent_id, "b", now)
    assert await world.knowledge.page(world.tenant, agent_id, NOTHING, now, None, 10) == [kept]
    assert await held_chunks(world, ends) == []
    assert [d for d, _ in await world.knowledge.newest(world.tenant, agent_id, NOTHING, now, 10)] == [
        bare(kept)
    ]


async def test_pages_go_by_document_id_after_the_last_one(world: World) -> None:
    agent_id = new_agent()
    written = [split(world, agent_id, f"Plant number {n}.", document_id=f"doc-{n}") for n in (3, 1, 4, 2, 5)]
    await world.learn(*written)
    in_order = sorted((w.document for w in written), key=lambda d: d.document_id)
    now = world.clock()
    assert await world.knowledge.page(world.tenant, agent_id, NOTHING, now, None, 2) == in_order[:2]
    assert await world.knowledge.page(world.tenant, agent_id, NOTHING, now, "doc-2", 2) == in_order[2:4]
    assert await world.knowledge.page(world.tenant, agent_id, NOTHING, now, "doc-4", 2) == in_order[4:]
    assert await world.knowledge.page(world.tenant, agent_id, NOTHING, now, "doc-5", 2) == []
    assert await world.knowledge.page(world.tenant, agent_id, NOTHING, now, "doc-0", 10) == in_order


async def test_an_agents_vectors_read_in_pages_are_its_whole_scope_in_key_order(world: World) -> None:
    """How a scope too large for the index cache is searched (state/index_cache.py): page
    after page, resuming after the last key read, chunk numbers in numeric order."""
    source = world.knowledge_vectors
    if not isinstance(source, ScopeVectorPages):
        pytest.skip("this source reads no pages")
    agent_id = new_agent()
    long = " ".join(f"Plant number {n} wants water." for n in range(20))  # over ten chunks
    await world.learn(
        split(world, agent_id, long, document_id="doc-a"), split(world, agent_id, document_id="doc-b")
    )
    scope = knowledge_scope(world.tenant, agent_id)
    whole = await source.scope_vectors(scope)
    paged: list[str] = []
    vectors: list[Vector] = []
    after = ""
    while True:
        page_keys, page_vectors = await source.scope_vector_page(scope, after, 3)
        paged += page_keys
        vectors += page_vectors
        if len(page_keys) < 3:
            break
        after = page_keys[-1]
    assert len(whole[0]) > 12 and (paged, floats(vectors)) == (whole[0], floats(whole[1]))
    assert await source.scope_vector_page(knowledge_scope(world.tenant, new_agent()), "", 3) == ([], [])
    upto = await source.scope_vectors_upto(scope, 5)
    assert len(upto[0]) == 5 and set(upto[0]) <= set(whole[0])
    every = await source.scope_vectors_upto(scope, 1000)
    assert (every[0], floats(every[1])) == (whole[0], floats(whole[1]))


async def test_chunks_are_found_by_key_whole_documents_filtered(world: World) -> None:
    agent_id = new_agent()
    tagged = split(world, agent_id, metadata=metadata_of({"team": "garden"}))
    plain = split(world, agent_id)
    await world.learn(tagged, plain)
    now = world.clock()
    wanted = [tagged.chunks[2].key, plain.chunks[0].key, tagged.chunks[0].key]
    odd = [chunk_key(tagged.document.document_id, 9), chunk_key("no-such-doc", 0), "no key", "x#y", ""]
    held = await world.knowledge.chunks(world.tenant, agent_id, [*wanted, *odd, wanted[0]], NOTHING, now)
    assert list(held) == wanted  # in the order asked, once each; keys naming no chunk left out
    assert held[wanted[0]] == (bare(tagged.document), tagged.chunks[2])
    assert held[wanted[1]] == (bare(plain.document), plain.chunks[0])
    garden = KnowledgeFilter(metadata=metadata_of({"team": "garden"}))
    assert list(await world.knowledge.chunks(world.tenant, agent_id, wanted, garden, now)) == [
        wanted[0],
        wanted[2],
    ]
    assert await world.knowledge.chunks(world.tenant, agent_id, [], NOTHING, now) == {}


async def test_newest_gives_the_latest_documents_chunks_in_order_up_to_the_limit(world: World) -> None:
    agent_id = new_agent()
    old = split(world, agent_id, "Old note.", document_id="d-old")
    world.later()
    tied = [split(world, agent_id, GUIDE, document_id=i) for i in ("d-tied-b", "d-tied-a")]  # one instant
    world.later()
    new = split(world, agent_id, "Newest note.\n\nSecond paragraph of it.", document_id="d-new")
    await world.learn(old, *tied, new)
    now = world.clock()
    every = await world.knowledge.newest(world.tenant, agent_id, NOTHING, now, 100)
    by_recency = [new, tied[1], tied[0], old]
    assert every == [(bare(w.document), c) for w in by_recency for c in w.chunks]
    assert await world.knowledge.newest(world.tenant, agent_id, NOTHING, now, 4) == every[:4]
    assert await world.knowledge.newest(world.tenant, agent_id, NOTHING, now, 0) == []
    before = KnowledgeFilter(updated_before=new.document.updated_at)
    assert await world.knowledge.newest(world.tenant, agent_id, before, now, 1) == [
        (bare(tied[1].document), tied[1].chunks[0])
    ]


def grid(world: World, agent_id: str) -> list[Document]:
    """Documents that differ in every way the filter looks at."""
    now = world.clock()
    tags = [
        {},
        {"team": "garden"},
        {"team": "garden", "lang": "en"},
        {"team": "kitchen", "lang": "en"},
        {"lang": "en"},
        {"team": ""},
        {'a"b': "1", "a.b": "2", "$x": "ü"},  # keys no JSON path could spell plainly
        {"a": "1"},
    ]
    found: list[Document] = []
    for n, tag in enumerate(tags):
        for updated, expires in ((now - 2 * HOUR, None), (now - HOUR, now + HOUR), (now, now)):
            write = split(
                world, agent_id, f"Note {n}.", document_id=f"g{n}-{len(found)}", metadata=metadata_of(tag),
                updated_at=updated, created_at=updated - HOUR, expires_at=expires,
            )  # fmt: skip
            found.append(write.document)
    return found


FILTERS = [
    NOTHING,
    KnowledgeFilter(metadata_of({"team": "garden"})),
    KnowledgeFilter(metadata_of({"team": "garden", "lang": "en"})),
    KnowledgeFilter(metadata_of({"lang": "en"})),
    KnowledgeFilter(metadata_of({"team": ""})),
    KnowledgeFilter(metadata_of({"team": "Garden"})),
    KnowledgeFilter(metadata_of({'a"b': "1"})),
    KnowledgeFilter(metadata_of({"a.b": "2", "$x": "ü"})),
    KnowledgeFilter(metadata_of({"a": "1", "a.b": "2"})),
    KnowledgeFilter(metadata_of({"missing": "1"})),
]


def filters(world: World) -> list[KnowledgeFilter]:
    now = world.clock()
    return [
        *FILTERS,
        KnowledgeFilter(updated_after=now - HOUR),
        KnowledgeFilter(updated_before=now - HOUR),
        KnowledgeFilter(updated_after=now - 2 * HOUR, updated_before=now),
        KnowledgeFilter(metadata_of({"lang": "en"}), updated_after=now - HOUR, updated_before=now + HOUR),
        KnowledgeFilter(updated_after=now, updated_before=now),
    ]


async def test_every_read_returns_exactly_the_documents_the_rule_passes(world: World) -> None:
    agent_id = new_agent()
    documents = grid(world, agent_id)
    writes = [split(world, agent_id, d.text, **_fields(d)) for d in documents]
    await world.learn(*writes)
    chunk_keys = [c.key for w in writes for c in w.chunks]
    now = world.clock()
    for where in filters(world):
        passing = sorted((d for d in documents if passes(d, where, now)), key=lambda d: d.document_id)
        assert await world.knowledge.page(world.tenant, agent_id, where, now, None, 100) == passing, where
        if len(passing) > 1:  # a page's limit is exact, after a filter that thins the agent out
            assert await world.knowledge.page(world.tenant, agent_id, where, now, None, 1) == passing[:1]
        held = await world.knowledge.chunks(world.tenant, agent_id, chunk_keys, where, now)
        assert sorted({d.document_id for d, _ in held.values()}) == [d.document_id for d in passing], where
        newest = await world.knowledge.newest(world.tenant, agent_id, where, now, 100)
        recent_first = sorted(passing, key=lambda d: d.updated_at, reverse=True)
        assert list(dict.fromkeys(d.document_id for d, _ in newest)) == [d.document_id for d in recent_first]


def _fields(d: Document) -> dict[str, Any]:
    return {
        "document_id": d.document_id,
        "metadata": d.metadata,
        "updated_at": d.updated_at,
        "created_at": d.created_at,
        "expires_at": d.expires_at,
    }


# --- replace and delete -----------------------------------------------------------------------


async def test_a_replace_swaps_text_chunks_vectors_and_full_text_keeping_created_at(world: World) -> None:
    agent_id = new_agent()
    [d] = await world.learn(split(world, agent_id))
    world.later(HOUR)
    body = "Cacti need little water in the winter.\n\nKeep them bright and warm all year."
    new = split(
        world, agent_id, body, document_id=d.document_id, title="Cacti", metadata=metadata_of({"v": "2"}),
        created_at=world.clock(),
    )  # fmt: skip
    new = dataclasses.replace(new, vectors=[[0.0, 5.0], [0.0, 6.0]])
    replaced = await world.knowledge.replace(new, NO_CHANGES)
    expected = dataclasses.replace(new.document, created_at=d.created_at)
    assert replaced.result == expected and expected.updated_at == d.updated_at + HOUR
    now = world.clock()
    assert await world.knowledge.get(world.tenant, agent_id, d.document_id, now) == expected
    assert await held_chunks(world, expected) == list(new.chunks) and len(new.chunks) == 2
    assert await scope_vectors(world, world.tenant, agent_id) == (keys(new.chunks), [[0.0, 5.0], [0.0, 6.0]])
    # the title is matched with every chunk; the one also saying it comes first
    assert found(await matched(world, world.tenant, agent_id, "cacti", 10)) == keys(new.chunks)
    assert await matched(world, world.tenant, agent_id, "fern orchid", 10) == []
    unembedded = dataclasses.replace(new, vectors=None)
    await world.knowledge.replace(unembedded, NO_CHANGES)
    assert await scope_vectors(world, world.tenant, agent_id) == ([], [])


async def test_a_replace_of_a_document_not_held_is_not_found_and_writes_nothing(world: World) -> None:
    agent_id = new_agent()
    write = split(world, agent_id, "Sage tolerates drought.")
    with pytest.raises(NotFound):
        await world.knowledge.replace(write, NO_CHANGES)
    with pytest.raises(NotFound):
        await world.knowledge.get(world.tenant, agent_id, write.document.document_id, world.clock())
    assert await matched(world, world.tenant, agent_id, "sage", 10) == []


async def test_a_delete_leaves_nothing_of_the_document(world: World) -> None:
    agent_id = new_agent()
    gone = split(world, agent_id, "Quinces ripen late.\n\nQuince jelly sets well.")
    kept = split(world, agent_id, "Apples ripen early.")
    await world.learn(gone, kept)
    d = gone.document
    deleted = await world.knowledge.delete(world.tenant, agent_id, d.document_id, NO_CHANGES)
    assert deleted.result == d
    now = world.clock()
    with pytest.raises(NotFound):
        await world.knowledge.get(world.tenant, agent_id, d.document_id, now)
    assert await world.knowledge.page(world.tenant, agent_id, NOTHING, now, None, 10) == [kept.document]
    assert await world.knowledge.chunks(world.tenant, agent_id, keys(gone.chunks), NOTHING, now) == {}
    assert await matched(world, world.tenant, agent_id, "quinces quince jelly", 10) == []
    assert found(await matched(world, world.tenant, agent_id, "ripen", 10)) == [kept.chunks[0].key]
    assert (await scope_vectors(world, world.tenant, agent_id))[0] == keys(kept.chunks)
    scope = knowledge_scope(world.tenant, agent_id)
    assert await world.knowledge_vectors.item_vectors(scope, [d.document_id]) == ([], [])
    with pytest.raises(NotFound):
        await world.knowledge.delete(world.tenant, agent_id, d.document_id, NO_CHANGES)


@own_database
async def test_a_deleted_documents_text_is_gone_from_the_database(world: World) -> None:
    """SQLite: from the file's bytes, once the WAL is checkpointed (secure_delete zeroes
    freed pages); PostgreSQL: from every live row. (No full-text index holds chunks: their
    words are indexed in RAM.)"""
    if world.database is None:
        pytest.skip("SQL only")
    marker = "xylograph" + unique("m").replace("-", "")
    agent_id = new_agent()
    write = split(world, agent_id, f"The {marker} is here.\n\nAnd the {marker} is there.")
    [d] = await world.learn(write)
    assert await stored(world, marker)  # the check sees what is there
    await world.knowledge.delete(world.tenant, agent_id, d.document_id, NO_CHANGES)
    assert not await stored(world, marker)


async def stored(world: World, marker: str) -> bool:
    assert world.database is not None
    if world.database.is_sqlite:
        path = Path(world.database.url.database or "")
        conn = sqlite3.connect(path, timeout=10.0, isolation_level=None)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        # as tests/e2e/test_erasure.py `sqlite_bytes`: the database, its -wal and -shm
        return marker.encode() in b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))

    def rows(conn: Connection) -> int:
        tables = conn.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).scalars()
        like = {"m": f"%{marker}%"}
        return sum(
            int(conn.execute(text(f'SELECT count(*) FROM "{t}" x WHERE x::text LIKE :m'), like).scalar_one())
            for t in tables
        )

    return bool(await world.database.read(rows))


# --- texts, and the words found in them ---------------------------------------------------


async def test_lexical_finds_an_agents_chunks_by_their_words_most_matches_first(world: World) -> None:
    agent_id = new_agent()
    once = split(world, agent_id, "Miso sleeps on the sofa all afternoon long")
    often = split(world, agent_id, "Miso chased Miso's shadow; Miso, Miso everywhere")
    other = split(world, agent_id, "a walk in the forest")
    await world.learn(once, often, other)
    await world.learn(split(world, new_agent(), "Miso again, Miso"))  # another agent
    await world.learn(split(world, agent_id, "Miso Miso", tenant_id=unique("tenant")))  # another tenant
    tenant, once_key, often_key = world.tenant, once.chunks[0].key, often.chunks[0].key
    assert found(await matched(world, tenant, agent_id, "miso?", 10)) == [often_key, once_key]
    assert found(await matched(world, tenant, agent_id, "Where is Miso", 1)) == [often_key]
    assert found(await matched(world, tenant, agent_id, "sofa", 10)) == [once_key]
    both = found(await matched(world, tenant, agent_id, "forest sofa", 10))
    assert sorted(both) == sorted([once_key, other.chunks[0].key])  # their order is the engine's
    assert await matched(world, tenant, agent_id, "giraffe", 10) == []
    assert await matched(world, tenant, agent_id, "the and of", 10) == []  # stop words only
    assert await matched(world, tenant, agent_id, "", 10) == []


async def test_texts_are_each_chunk_as_matched_with_title_and_headings_in_key_order(world: World) -> None:
    agent_id = new_agent()
    guide = split(world, agent_id, title="Plant care")
    other = split(world, agent_id, "Just one line.", document_id="a-first")
    await world.learn(guide, other)
    await world.learn(split(world, new_agent(), "elsewhere"))
    texts = await world.knowledge.texts(world.tenant, agent_id)
    d = guide.document
    expected = [(other.chunks[0].key, embedded_text(other.document, other.chunks[0]))]
    expected += [(c.key, embedded_text(d, c)) for c in guide.chunks]
    assert texts == expected
    assert texts[1][1].startswith("Plant care")
    assert await world.knowledge.texts(world.tenant, agent_id, ["a-first"]) == expected[:1]
    assert await world.knowledge.texts(world.tenant, agent_id, ["missing"]) == []
    assert await world.knowledge.texts(unique("tenant"), agent_id) == []


async def test_chunk_pages_give_each_of_an_agents_chunks_once_expired_ones_too(world: World) -> None:
    agent_id = new_agent()
    guide = split(world, agent_id, title="Plant care", document_id="guide")
    other = split(world, agent_id, "Just one line.", document_id="a-first")
    ending = split(world, agent_id, "Shade.", document_id="ending", expires_at=world.clock() + HOUR)
    await world.learn(guide, other, ending)
    await world.learn(split(world, new_agent(), "elsewhere"))
    world.later(HOUR)
    pages: list[list[tuple[Document, DocumentChunk]]] = []
    after: tuple[str, int] | None = None
    while not pages or len(pages[-1]) == 2:
        pages.append(await world.knowledge.chunk_page(world.tenant, agent_id, after, 2))
        after = (pages[-1][-1][1].document_id, pages[-1][-1][1].index) if pages[-1] else None
    rows = [row for page in pages for row in page]
    writes = {w.document.document_id: w for w in (guide, other, ending)}
    assert sorted(c.key for _, c in rows) == sorted(c.key for w in writes.values() for c in w.chunks)
    for d, c in rows:
        assert d == bare(writes[c.document_id].document) and c in writes[c.document_id].chunks
    assert [c.index for _, c in rows if c.document_id == "guide"] == [0, 1, 2]  # in order, together
    assert len(pages) == 3 and len(rows) == 5
    assert await world.knowledge.chunk_page(unique("tenant"), agent_id, None, 10) == []


async def test_lexical_keys_name_the_chunk_that_matched(world: World) -> None:
    agent_id = new_agent()
    write = split(world, agent_id)
    await world.learn(write)
    assert found(await matched(world, world.tenant, agent_id, "cactus", 10)) == [write.chunks[1].key]
    assert found(await matched(world, world.tenant, agent_id, "orchid", 10)) == [write.chunks[2].key]


# --- the vector source ------------------------------------------------------------------------


async def test_the_vector_source_gives_a_scopes_chunks_of_its_model_per_document(world: World) -> None:
    agent_id = new_agent()
    first = split(world, agent_id, document_id="doc-a")
    second = split(world, agent_id, "One paragraph.", document_id="doc-b")
    bare = split(world, agent_id, "Not embedded.", document_id="doc-c", embedded=False)
    foreign = split(world, agent_id, "Another model.", document_id="doc-d")
    foreign = dataclasses.replace(foreign, model="other-model")
    await world.learn(first, second, bare, foreign)
    scope = knowledge_scope(world.tenant, agent_id)
    names, vectors = await world.knowledge_vectors.scope_vectors(scope)
    assert names == keys(first.chunks) + keys(second.chunks)
    assert floats(vectors) == [[1.0, 0.0], [1.0, 1.0], [1.0, 2.0], [1.0, 0.0]]
    names, vectors = await world.knowledge_vectors.item_vectors(scope, ["doc-b", "doc-c", "doc-d", "none"])
    assert (names, floats(vectors)) == (keys(second.chunks), [[1.0, 0.0]])
    assert await world.knowledge_vectors.item_vectors(scope, []) == ([], [])


# --- cluster-wide: the expiry sweep and the counts ----------------------------------------------


@own_database
async def test_the_expiry_sweep_takes_every_tenants_expired_documents_oldest_expiry_first(
    world: World,
) -> None:
    now, agent_id, other = world.clock(), new_agent(), unique("tenant")
    latest = split(world, agent_id, "A.", expires_at=now - HOUR)
    earliest = split(world, agent_id, "B.", expires_at=now - 3 * HOUR, tenant_id=other)
    middle = split(world, agent_id, "C.", expires_at=now - 2 * HOUR, document_id="same")
    namesake = split(world, agent_id, "C.", expires_at=now - 2 * HOUR, document_id="same", tenant_id=other)
    right_now = split(world, agent_id, "D.", expires_at=now)
    await world.learn(latest, earliest, middle, namesake, right_now)
    await world.learn(split(world, agent_id, "E.", expires_at=now + HOUR), split(world, agent_id, "F."))
    in_order = [earliest, middle, namesake, latest, right_now]
    if middle.document.tenant_id > namesake.document.tenant_id:  # one expiry: by tenant, agent, id
        in_order[1:3] = [namesake, middle]
    assert await world.knowledge.expired(now, 10) == [w.document for w in in_order]
    assert await world.knowledge.expired(now, 2) == [w.document for w in in_order[:2]]
    assert await world.knowledge.expired(now - 3 * HOUR - timedelta(seconds=1), 10) == []


@own_database
async def test_counts_are_of_every_tenants_documents_and_chunks(world: World) -> None:
    assert await world.knowledge.counts() == (0, 0)
    agent_id = new_agent()
    first = split(world, agent_id)
    second = split(world, agent_id, "Short.", tenant_id=unique("tenant"))
    await world.learn(first, second)
    assert await world.knowledge.counts() == (2, len(first.chunks) + 1)
    await world.knowledge.delete(world.tenant, agent_id, first.document.document_id, NO_CHANGES)
    assert await world.knowledge.counts() == (1, 1)
