"""KnowledgeService over the fakes, wired by bootstrap: documents are agent-scoped, created
idempotently, chunked, embedded and indexed through the change owner; searched by meaning
and words; written only with a key allowed to; found per turn by BuildContext and rendered
in "[Knowledge]" beside the caller's items."""

from __future__ import annotations

import asyncio
import threading

import pytest

from episodic.domain import knowledge as knowledge_rules
from episodic.domain.agents import MemoryDraft
from episodic.domain.chunking import DocumentFormat
from episodic.domain.context import ModelCall, Section
from episodic.domain.knowledge import (
    MAX_CALL_CHUNKS,
    MAX_DOCUMENT_CHUNKS,
    DocumentDraft,
    KnowledgeFate,
    KnowledgeFilter,
    KnowledgeItem,
    KnowledgeOrigin,
    knowledge_scope,
)
from episodic.domain.model import Caller, RecallMode
from episodic.domain.recall import SearchMode
from episodic.errors import AlreadyExists, InvalidArgument, NotFound, PermissionDenied
from episodic.service.context import ContextRequest
from episodic.service.knowledge import KnowledgeQuery
from tests.unit.use_cases import CALLER, TENANT, UseCases, use_cases

HANDBOOK = """# Employee handbook

## Leave

Employees get 25 days of paid leave a year. Unused days carry over until March. Leave is
requested in the HR portal at least two weeks ahead; a manager approves it within three
working days. Part-time staff get leave in proportion to their hours.

## Expenses

Travel expenses are reimbursed within 30 days when filed with receipts. Meals on travel days
are covered up to 40 euros a day; hotels up to 150 euros a night unless a manager agrees to
more before the trip. Receipts are photographed and attached in the expenses app.
"""
PARKING = "Parking permits are issued by the facilities desk on the ground floor."


@pytest.fixture
async def app() -> UseCases:
    built = use_cases()
    await built.new_agent(memory=MemoryDraft(recall_mode=RecallMode.NONE, known_facts=False))
    return built


async def add(app: UseCases, *drafts: DocumentDraft, caller: Caller = CALLER) -> list[tuple[str, bool]]:
    made = await app.knowledge.create(caller, "helper", drafts)
    return [(d.document_id, created) for d, created in made]


def handbook(text: str = HANDBOOK) -> DocumentDraft:
    return DocumentDraft(
        "handbook", text, DocumentFormat.MARKDOWN, title="Handbook", metadata=(("team", "hr"),)
    )


async def search(
    app: UseCases, query: str, mode: SearchMode = SearchMode.HYBRID, **fields: object
) -> list[str]:
    hits = await app.knowledge.search(CALLER, KnowledgeQuery("helper", mode, query, **fields))  # type: ignore[arg-type]
    return [h.chunk.key for h in hits]


async def test_a_document_is_chunked_by_its_headings_and_indexed_for_the_agent(app: UseCases) -> None:
    assert await add(app, handbook(), DocumentDraft("parking", PARKING, DocumentFormat.TEXT)) == [
        ("handbook", True),
        ("parking", True),
    ]
    document, chunks = await app.knowledge.get(CALLER, "helper", "handbook", with_chunks=True)
    assert document.chunk_count == len(chunks) >= 2 and document.metadata == (("team", "hr"),)
    assert all(HANDBOOK[c.start : c.end] == c.text for c in chunks)
    assert [c.heading_path for c in chunks][-1] == ("Employee handbook", "Expenses")
    keys = app.knowledge.resident.index.keys(knowledge_scope(TENANT, "helper"))
    assert keys == {c.key for c in chunks} | {"parking#0"}


async def test_creating_the_same_id_again_is_a_retry_and_other_content_a_conflict(app: UseCases) -> None:
    await add(app, handbook())
    assert await add(app, handbook()) == [("handbook", False)]
    with pytest.raises(AlreadyExists):
        await add(app, DocumentDraft("fresh", PARKING), handbook(HANDBOOK + "\nNew rule."))
    with pytest.raises(NotFound):  # nothing of the refused call was written
        await app.knowledge.get(CALLER, "helper", "fresh", with_chunks=False)


async def test_search_finds_chunks_by_words_and_by_meaning_and_filters_by_metadata(app: UseCases) -> None:
    await add(app, handbook(), DocumentDraft("parking", PARKING, DocumentFormat.TEXT))
    assert (await search(app, "paid leave days"))[0].startswith("handbook#")
    assert (await search(app, "permits facilities", SearchMode.SEMANTIC))[0] == "parking#0"
    where_hr = await app.knowledge.search(
        CALLER, KnowledgeQuery("helper", SearchMode.HYBRID, "permits leave", 10)
    )
    assert {h.document.document_id for h in where_hr} == {"handbook", "parking"}

    only_hr = KnowledgeQuery(
        "helper", SearchMode.HYBRID, "permits leave", 10, where=KnowledgeFilter((("team", "hr"),))
    )
    assert {h.document.document_id for h in await app.knowledge.search(CALLER, only_hr)} == {"handbook"}


async def test_a_deleted_document_leaves_no_chunk_vector_or_match_behind(app: UseCases) -> None:
    await add(app, handbook(), DocumentDraft("parking", PARKING))
    await app.knowledge.delete(CALLER, "helper", "parking")
    assert not any(
        k.startswith("parking#") for k in app.knowledge.resident.index.keys(knowledge_scope(TENANT, "helper"))
    )
    assert not any(k.startswith("parking#") for k in await search(app, "parking permits facilities"))
    with pytest.raises(NotFound):
        await app.knowledge.delete(CALLER, "helper", "parking")


async def test_an_update_of_the_text_re_chunks_and_re_embeds(app: UseCases) -> None:
    await add(app, DocumentDraft("parking", PARKING))
    draft = DocumentDraft("parking", "Bicycles are parked in the basement garage.")
    before = (await app.knowledge.get(CALLER, "helper", "parking", with_chunks=False))[0]
    changed = await app.knowledge.update(CALLER, "helper", draft, ["text"])
    assert changed.content_hash != before.content_hash and changed.created_at == before.created_at
    _, chunks = await app.knowledge.get(CALLER, "helper", "parking", with_chunks=True)
    assert [c.text for c in chunks] == [draft.text]
    assert (await search(app, "bicycles basement"))[0] == "parking#0"
    assert app.embedder.embedded[-2:] == [draft.text, "bicycles basement"]  # re-embedded, then the query
    with pytest.raises(InvalidArgument):
        await app.knowledge.update(CALLER, "helper", draft, ["owner"])


async def test_writing_needs_a_key_allowed_to_and_other_tenants_see_nothing(app: UseCases) -> None:
    reader = Caller(TENANT, writes_knowledge=False)
    with pytest.raises(PermissionDenied):
        await add(app, handbook(), caller=reader)
    await add(app, handbook())
    assert await app.knowledge.search(reader, KnowledgeQuery("helper", SearchMode.HYBRID, "leave"))
    stranger = Caller("another-tenant")
    with pytest.raises(NotFound):
        await app.knowledge.get(stranger, "helper", "handbook", with_chunks=False)
    with pytest.raises(NotFound):
        await add(app, handbook(), caller=stranger)
    other_agent_key = Caller(TENANT, frozenset({"someone-else"}))
    with pytest.raises(PermissionDenied):
        await app.knowledge.get(other_agent_key, "helper", "handbook", with_chunks=False)


async def test_bad_documents_are_refused_naming_the_field(app: UseCases) -> None:
    cases = [
        (DocumentDraft("blank", "   \n "), "documents[0].text"),
        (DocumentDraft("bad id!", "text"), "documents[0].document_id"),
        (DocumentDraft("huge", "x" * (2 * 1024 * 1024 + 1)), "documents[0].text"),
        (DocumentDraft("meta", "text", metadata=(("", "v"),)), "documents[0].metadata['']"),
    ]
    for draft, field in cases:
        with pytest.raises(InvalidArgument) as refused:
            await add(app, draft)
        assert field in [v.field for v in refused.value.violations]


TINY_SECTIONS = "a\n=\n"  # a setext heading and its underline: one chunk each, 4 bytes


class CountedQuota:
    def __init__(self) -> None:
        self.chunks = 0

    def write_memories(self, tenant_id: str, count: int) -> None:
        return None

    def write_chunks(self, tenant_id: str, count: int) -> None:
        self.chunks += count


async def test_a_document_of_too_many_chunks_is_refused_naming_its_text_before_the_quota(
    app: UseCases,
) -> None:
    app.knowledge.quota = quota = CountedQuota()
    hostile = DocumentDraft("hostile", TINY_SECTIONS * 524_287)  # 2 MiB: 524,287 chunks uncapped
    with pytest.raises(InvalidArgument) as refused:
        await add(app, handbook(), hostile)
    assert [v.field for v in refused.value.violations] == ["documents[1].text"]
    assert str(MAX_DOCUMENT_CHUNKS) in refused.value.violations[0].description
    assert quota.chunks == 0
    with pytest.raises(NotFound):
        await app.knowledge.get(CALLER, "helper", "handbook", with_chunks=False)
    await add(app, handbook())
    with pytest.raises(InvalidArgument) as refused:
        await app.knowledge.update(CALLER, "helper", DocumentDraft("handbook", hostile.text), ["text"])
    assert [v.field for v in refused.value.violations] == ["document.text"]


async def test_a_call_cutting_into_too_many_chunks_in_all_is_refused_naming_documents(app: UseCases) -> None:
    per_document = MAX_DOCUMENT_CHUNKS - 1
    calls_worth = MAX_CALL_CHUNKS // per_document + 1
    drafts = [DocumentDraft(f"d{i}", TINY_SECTIONS * per_document) for i in range(calls_worth)]
    with pytest.raises(InvalidArgument) as refused:
        await add(app, *drafts)
    assert [v.field for v in refused.value.violations] == ["documents"]


async def test_documents_are_cut_off_the_event_loop(app: UseCases, monkeypatch: pytest.MonkeyPatch) -> None:
    cut_on: list[int] = []
    cut = knowledge_rules.chunk_documents

    def recorded(documents: list[tuple[str, str, DocumentFormat]]) -> list[list[object]]:
        cut_on.append(threading.get_ident())
        return cut(documents)  # type: ignore[return-value]

    monkeypatch.setattr("episodic.service.knowledge.chunk_documents", recorded)
    await add(app, handbook())
    await app.knowledge.update(CALLER, "helper", DocumentDraft("handbook", PARKING), ["text"])
    assert len(cut_on) == 2 and threading.get_ident() not in cut_on


async def turn(app: UseCases, episode_id: str, text: str, *items: KnowledgeItem) -> ModelCall:
    call, _ = await app.context.build(CALLER, ContextRequest(episode_id, text, knowledge=items))
    return call


async def test_a_turn_renders_the_agents_matching_chunks_beside_the_callers_items(app: UseCases) -> None:
    await add(app, handbook(), DocumentDraft("parking", PARKING))
    episode_id = await app.open()
    caller_item = KnowledgeItem("Contractors follow the agency's leave rules.", source_id="crm#7", score=0.8)
    call = await turn(app, episode_id, "How many days of paid leave do I get?", caller_item)
    (section,) = [m.content for m in call.messages if m.section is Section.KNOWLEDGE]
    assert "25 days of paid leave" in section and "Contractors follow" in section
    report = call.report.knowledge
    assert report[0].origin is KnowledgeOrigin.REQUEST and report[0].source_id == "crm#7"
    stored = [k for k in report if k.origin is KnowledgeOrigin.STORED]
    assert stored and stored[0].document_id == "handbook" and stored[0].fate is KnowledgeFate.WHOLE
    assert all(section[k.start : k.end] in HANDBOOK + PARKING for k in stored if k.end)


async def test_a_deleted_document_is_not_rendered_at_the_next_turn(app: UseCases) -> None:
    await add(app, handbook())
    episode_id = await app.open()
    first = await turn(app, episode_id, "paid leave days?")
    assert any(k.document_id == "handbook" for k in first.report.knowledge)
    await app.knowledge.delete(CALLER, "helper", "handbook")
    after = await turn(app, episode_id, "paid leave days?")
    assert after.report.knowledge == () and Section.KNOWLEDGE not in [m.section for m in after.messages]


async def test_knowledge_off_for_the_agent_or_the_request_searches_nothing(app: UseCases) -> None:
    await add(app, handbook())
    episode_id = await app.open()
    call, _ = await app.context.build(
        CALLER, ContextRequest(episode_id, "paid leave days?", memory=MemoryDraft(knowledge=False))
    )
    assert call.report.knowledge == ()
    call, _ = await app.context.build(
        CALLER, ContextRequest(episode_id, "paid leave days?", memory=MemoryDraft(knowledge_top_k=1))
    )
    assert len([k for k in call.report.knowledge if k.origin is KnowledgeOrigin.STORED]) == 1


class CountingChunkReads:
    def __init__(self, app: UseCases) -> None:
        self.reads = 0
        store = app.adapters.knowledge
        original = store.chunks

        async def counted(*args: object) -> object:
            self.reads += 1
            return await original(*args)  # type: ignore[arg-type]

        store.chunks = counted  # type: ignore[method-assign,assignment]


async def test_a_warm_turn_takes_the_chunks_it_renders_from_ram_not_sql(app: UseCases) -> None:
    await add(app, handbook())
    episode_id = await app.open()
    await turn(app, episode_id, "paid leave days?")
    reads = CountingChunkReads(app)
    second = await turn(app, episode_id, "how many paid leave days carry over?")
    assert reads.reads == 0
    assert any(k.document_id == "handbook" for k in second.report.knowledge)


async def test_a_search_that_missed_reads_the_agent_in_and_later_searches_read_no_sql(app: UseCases) -> None:
    await add(app, handbook(), DocumentDraft("parking", PARKING))
    assert await search(app, "paid leave days", top_k=1) == ["handbook#0"]  # read from SQL: the agent read in
    await asyncio.sleep(0)  # the fill runs beside the searches (at once over the fakes)
    reads = CountingChunkReads(app)
    assert (await search(app, "parking permits"))[0] == "parking#0"
    assert await search(app, "travel expenses receipts", SearchMode.SEMANTIC)
    assert reads.reads == 0


async def test_an_updated_document_is_rendered_new_at_the_next_turn(app: UseCases) -> None:
    await add(app, DocumentDraft("parking", PARKING))
    episode_id = await app.open()
    await turn(app, episode_id, "where are parking permits issued?")
    renewed = DocumentDraft("parking", "Parking permits are issued online since May.")
    await app.knowledge.update(CALLER, "helper", renewed, ["text"])
    after = await turn(app, episode_id, "where are parking permits issued?")
    (section,) = [m.content for m in after.messages if m.section is Section.KNOWLEDGE]
    assert "issued online since May" in section and "facilities desk" not in section
