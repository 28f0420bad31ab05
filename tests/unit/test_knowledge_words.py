"""Each agent's word index as a cache of SQL (state/knowledge_words.py): loaded once, kept in
step by the change owner's changes whatever order they and its reads land in."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from episodic.domain.changes import CachesStale, DocumentsRemoved, KnowledgeVectors
from episodic.domain.knowledge import knowledge_scope
from episodic.index.words import Bm25WordIndex
from episodic.state.knowledge_words import REST_SECONDS, ResidentWords

T, A = "tenant", "agent"


class Texts:
    """SQL's chunk texts, counting reads; `hold` makes the next read wait until released."""

    def __init__(self) -> None:
        self.docs: dict[tuple[str, str, str], list[str]] = {}
        self.reads: list[tuple[str, str, tuple[str, ...] | None]] = []
        self.hold: asyncio.Event | None = None
        self.reading = asyncio.Event()

    def put(self, document_id: str, *chunks: str, tenant: str = T, agent: str = A) -> None:
        self.docs[(tenant, agent, document_id)] = list(chunks)

    async def texts(
        self, tenant_id: str, agent_id: str, document_ids: Sequence[str] | None = None
    ) -> list[tuple[str, str]]:
        self.reads.append((tenant_id, agent_id, None if document_ids is None else tuple(document_ids)))
        found = [
            (f"{d}#{i}", text)
            for (t, a, d), chunks in sorted(self.docs.items())
            if (t, a) == (tenant_id, agent_id) and (document_ids is None or d in document_ids)
            for i, text in enumerate(chunks)
        ]
        if self.hold is not None:
            hold, self.hold = self.hold, None
            self.reading.set()
            await hold.wait()
        return found


def rewritten(document_id: str, tenant: str = T, agent: str = A) -> KnowledgeVectors:
    return KnowledgeVectors(knowledge_scope(tenant, agent), document_id, [], [])


def removed(document_id: str) -> DocumentsRemoved:
    return DocumentsRemoved([(knowledge_scope(T, A), document_id)])


async def keys(words: ResidentWords, query: str, tenant: str = T, agent: str = A) -> list[str]:
    return [h.episode_id for h in await words.search(tenant, agent, query, 10)]


async def test_an_agent_loads_once_however_many_search_at_once() -> None:
    texts = Texts()
    texts.put("d1", "tulips in spring", "roses in june")
    words = ResidentWords(texts, Bm25WordIndex, 1 << 30)
    found = await asyncio.gather(*(keys(words, "roses") for _ in range(5)))
    assert found == [["d1#1"]] * 5
    assert texts.reads == [(T, A, None)] and words.loads == 1


async def test_a_rewritten_document_leaves_at_once_and_only_it_is_read_again() -> None:
    texts = Texts()
    texts.put("d1", "tulips")
    texts.put("d2", "roses")
    words = ResidentWords(texts, Bm25WordIndex, 1 << 30)
    assert await keys(words, "tulips roses") == ["d1#0", "d2#0"]
    texts.put("d1", "orchids", "tulips again")
    words.changed(rewritten("d1"))
    assert await keys(words, "orchids tulips") == ["d1#0", "d1#1"]
    assert texts.reads[-1] == (T, A, ("d1",))
    texts.docs.pop((T, A, "d2"))
    words.changed(removed("d2"))
    assert await keys(words, "roses") == []


async def test_a_change_while_the_agent_loads_is_read_before_the_search_answers() -> None:
    texts = Texts()
    texts.put("d1", "tulips")
    release = texts.hold = asyncio.Event()
    words = ResidentWords(texts, Bm25WordIndex, 1 << 30)
    search = asyncio.create_task(keys(words, "tulips roses"))
    await texts.reading.wait()  # the load has read the old d1
    texts.put("d1", "roses")
    words.changed(rewritten("d1"))
    release.set()
    assert await search == ["d1#0"]
    assert texts.reads == [(T, A, None), (T, A, ("d1",))]
    assert await keys(words, "tulips") == []


async def test_a_read_again_that_raced_another_change_is_not_applied_but_read_later() -> None:
    texts = Texts()
    texts.put("d1", "tulips")
    words = ResidentWords(texts, Bm25WordIndex, 1 << 30)
    assert await keys(words, "tulips") == ["d1#0"]
    texts.put("d1", "roses")
    words.changed(rewritten("d1"))
    release = texts.hold = asyncio.Event()
    search = asyncio.create_task(keys(words, "roses"))
    await texts.reading.wait()  # read "roses"; meanwhile d1 is deleted
    texts.docs.pop((T, A, "d1"))
    words.changed(removed("d1"))
    release.set()
    assert await search == []  # the stale read was not applied
    assert await keys(words, "roses tulips") == []
    assert texts.reads[-1] == (T, A, ("d1",))


async def test_a_tenants_caches_going_stale_drops_only_its_agents() -> None:
    texts = Texts()
    texts.put("d1", "tulips")
    texts.put("d1", "tulips", tenant="other")
    words = ResidentWords(texts, Bm25WordIndex, 1 << 30)
    await keys(words, "tulips")
    await keys(words, "tulips", tenant="other")
    words.changed(CachesStale("other"))
    assert words.loaded()[0] == 1
    await keys(words, "tulips", tenant="other")
    assert words.loads == 3
    words.changed(CachesStale(None))
    assert words.loaded()[0] == 0


async def test_beyond_its_budget_the_least_recently_searched_agent_goes() -> None:
    texts = Texts()
    for agent in ("a1", "a2", "a3"):
        texts.put("d1", *[f"tulips {i}" for i in range(50)], agent=agent)
    probe = Bm25WordIndex()
    probe.add(await texts.texts(T, "a1"))
    words = ResidentWords(texts, Bm25WordIndex, probe.held_bytes * 2 + 1)
    for agent in ("a1", "a2", "a1", "a3"):
        assert await keys(words, "tulips", agent=agent)
    assert words.evictions == 1
    held, chunks, size = words.loaded()
    assert (held, chunks) == (2, 100) and size <= probe.held_bytes * 2 + 1
    await keys(words, "tulips", agent="a1")
    assert words.loads == 3  # a1 stayed (searched after a2): a2 went


async def test_changes_to_agents_not_held_are_not_remembered() -> None:
    words = ResidentWords(Texts(), Bm25WordIndex, 1 << 30)
    words.changed(rewritten("d1", agent="never-searched"))
    assert words._stale == {}


async def test_an_agent_larger_than_the_budget_is_built_once_not_at_every_search_beside_another() -> None:
    texts = Texts()
    texts.put("d1", *[f"tulips {i}" for i in range(200)], agent="large")
    texts.put("d1", "tulips in a small agent", agent="small")
    probe = Bm25WordIndex()
    probe.add(await texts.texts(T, "large"))
    texts.reads.clear()
    words = ResidentWords(texts, Bm25WordIndex, probe.held_bytes - 1)
    assert await keys(words, "tulips", agent="large")  # the search that built it is answered
    found = []
    for _ in range(3):
        found += [await keys(words, "tulips", agent="small"), await keys(words, "tulips", agent="large")]
    assert [agent for _, agent, _ in texts.reads] == ["large", "small"]
    assert all(found[::2]) and not any(found[1::2])  # the large agent by meaning only, from now on
    assert words.loaded()[:2] == (1, 1)  # the small agent's index stays
    words.changed(DocumentsRemoved([(knowledge_scope(T, "large"), "d9")]))  # smaller: worth a try
    await keys(words, "tulips", agent="large")
    assert [agent for _, agent, _ in texts.reads] == ["large", "small", "large"]


async def test_an_agent_over_half_the_budget_evicted_for_another_rests_instead_of_reloading() -> None:
    texts = Texts()
    texts.put("d1", *[f"tulips {i}" for i in range(140)], agent="large")
    texts.put("d1", *[f"tulips {i}" for i in range(80)], agent="small")
    probe = Bm25WordIndex()
    probe.add(await texts.texts(T, "large"))
    texts.reads.clear()
    now = [0.0]
    words = ResidentWords(texts, Bm25WordIndex, int(probe.held_bytes * 1.4), monotonic=lambda: now[0])

    async def alternate(times: int) -> list[list[str]]:
        found = []
        for _ in range(times):
            found += [await keys(words, "tulips", agent="large"), await keys(words, "tulips", agent="small")]
        return found

    found = await alternate(3)
    assert [agent for _, agent, _ in texts.reads] == ["large", "small"]
    assert found[0] and all(found[1::2]) and not any(found[2::2])  # large: by meaning only while it rests
    now[0] += REST_SECONDS
    await alternate(3)
    assert [agent for _, agent, _ in texts.reads] == ["large", "small", "large", "small"]  # once a rest
