"""KnowledgeService through a live server on both backends: documents created (idempotent,
conflicts refused whole), read, listed, searched, updated and deleted; writing only with a
key allowed to; other tenants see nothing; and BuildContext renders the agent's chunks beside
the caller's items, all in the stored model call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from episodic.v1 import context_pb2, episode_service_pb2, knowledge_pb2, knowledge_service_pb2
from tests.e2e.context_helpers import build, create_agent, get_call
from tests.e2e.helpers import Client, bad_request, expect_code, expect_invalid, rpc_error
from tests.server_harness import KEY_A, KEY_A_READER, KEY_B, RunningServer

K, KS, S = knowledge_pb2, knowledge_service_pb2, context_pb2
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


@pytest.fixture
async def clients(server: RunningServer) -> AsyncIterator[tuple[Client, Client, Client]]:
    async with server.channel() as channel:
        yield Client.of(channel, KEY_A), Client.of(channel, KEY_A_READER), Client.of(channel, KEY_B)


def document(document_id: str, text: str, **fields: object) -> KS.DocumentInput:
    return KS.DocumentInput(document_id=document_id, text=text, **fields)  # type: ignore[arg-type]


async def create(client: Client, agent_id: str, *docs: KS.DocumentInput) -> KS.CreateDocumentsResponse:
    request = KS.CreateDocumentsRequest(agent_id=agent_id, documents=docs)
    return await client.knowledge.CreateDocuments(request, metadata=client.auth)


async def search(client: Client, agent_id: str, query: str, **fields: object) -> list[KS.KnowledgeHit]:
    request = KS.SearchKnowledgeRequest(
        agent_id=agent_id,
        mode=episode_service_pb2.SEARCH_MODE_HYBRID,
        query=query,
        **fields,  # type: ignore[arg-type]
    )
    return list((await client.knowledge.SearchKnowledge(request, metadata=client.auth)).hits)


async def test_documents_round_trip_and_are_searched_by_words_and_meaning(
    clients: tuple[Client, Client, Client],
) -> None:
    writer, reader, _ = clients
    agent_id = await create_agent(writer)
    made = await create(
        writer, agent_id,
        document("handbook", HANDBOOK, title="Handbook", uri="https://hr.example", metadata={"team": "hr"}),
        document("parking", "Parking permits come from the facilities desk.", format=K.DOCUMENT_FORMAT_TEXT),
    )  # fmt: skip
    assert [(r.document.document_id, r.created) for r in made.results] == [
        ("handbook", True),
        ("parking", True),
    ]
    again = await create(writer, agent_id, document("handbook", HANDBOOK, title="Handbook"))
    assert not again.results[0].created
    await expect_code(
        create(writer, agent_id, document("handbook", HANDBOOK + "!")), grpc.StatusCode.ALREADY_EXISTS
    )

    got = await writer.knowledge.GetDocument(
        KS.GetDocumentRequest(agent_id=agent_id, document_id="handbook", include_chunks=True),
        metadata=writer.auth,
    )
    assert got.document.text == HANDBOOK and got.document.chunk_count == len(got.chunks) == 2
    assert [c.heading_path for c in got.chunks][-1] == ["Employee handbook", "Expenses"]
    assert all(HANDBOOK[c.start_char : c.end_char] == c.text for c in got.chunks)

    hits = await search(reader, agent_id, "how many days of paid leave")  # a read-only key searches
    assert hits[0].chunk.document_id == "handbook" and "25 days" in hits[0].chunk.text
    assert hits[0].document.title == "Handbook" and not hits[0].document.text
    only_hr = await search(reader, agent_id, "parking permits leave", metadata={"team": "hr"}, top_k=10)
    assert {h.chunk.document_id for h in only_hr} == {"handbook"}

    listed = await writer.knowledge.ListDocuments(
        KS.ListDocumentsRequest(agent_id=agent_id, page_size=1), metadata=writer.auth
    )
    assert [d.document_id for d in listed.documents] == ["handbook"] and listed.next_page_token

    changed = K.Document(agent_id=agent_id, document_id="parking", text="Bicycles go in the basement garage.")
    await writer.knowledge.UpdateDocument(
        KS.UpdateDocumentRequest(document=changed, update_mask=FieldMask(paths=["text"])),
        metadata=writer.auth,
    )
    assert (await search(writer, agent_id, "bicycles basement"))[0].chunk.document_id == "parking"
    await writer.knowledge.DeleteDocument(
        KS.DeleteDocumentRequest(agent_id=agent_id, document_id="parking"), metadata=writer.auth
    )
    assert all(h.chunk.document_id != "parking" for h in await search(writer, agent_id, "bicycles basement"))


async def test_only_a_writer_key_writes_and_another_tenant_sees_nothing(
    clients: tuple[Client, Client, Client],
) -> None:
    writer, reader, stranger = clients
    agent_id = await create_agent(writer)
    await expect_code(create(reader, agent_id, document("d", "text")), grpc.StatusCode.PERMISSION_DENIED)
    await create(writer, agent_id, document("d", "Secret plans of the agent."))
    get = KS.GetDocumentRequest(agent_id=agent_id, document_id="d")
    await expect_code(stranger.knowledge.GetDocument(get, metadata=stranger.auth), grpc.StatusCode.NOT_FOUND)
    await expect_code(search(stranger, agent_id, "secret plans"), grpc.StatusCode.NOT_FOUND)
    delete = KS.DeleteDocumentRequest(agent_id=agent_id, document_id="d")
    await expect_code(
        stranger.knowledge.DeleteDocument(delete, metadata=stranger.auth), grpc.StatusCode.NOT_FOUND
    )
    await expect_invalid(create(writer, agent_id, document("blank", "  \n ")), "documents[0].text")
    await expect_invalid(
        create(writer, agent_id, document("big", "x" * (2 * 1024 * 1024 + 1))), "documents[0].text"
    )
    # past the largest request the server takes, the transport refuses it, with its limit
    huge = await rpc_error(create(writer, agent_id, document("huge", "x" * (10 * 1024 * 1024))))
    assert huge.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in (huge.details() or "")


async def test_a_context_holds_the_agents_chunks_and_the_callers_items_as_stored(
    clients: tuple[Client, Client, Client],
) -> None:
    writer, _, _ = clients
    agent_id = await create_agent(writer, system_prompt="You are the HR assistant.")
    await create(writer, agent_id, document("handbook", HANDBOOK, title="Handbook"))
    episode_id = await writer.open_episode(agent_id)
    mine = K.KnowledgeItem(
        text="Contractors follow their agency's leave rules.", source_id="crm/42", score=0.7
    )
    built = await build(
        writer, episode_id, user_message="How many days of paid leave do I get?", append_user_message=True,
        knowledge=[mine],
    )  # fmt: skip
    assert [m.section for m in built.messages][:2] == [S.CONTEXT_SECTION_SYSTEM, S.CONTEXT_SECTION_KNOWLEDGE]
    section = built.messages[1].content
    origins = [(k.origin, k.source_id, k.fate) for k in built.report.knowledge]
    assert origins[0] == (K.KNOWLEDGE_ORIGIN_REQUEST, "crm/42", K.KNOWLEDGE_FATE_WHOLE)
    stored = [k for k in built.report.knowledge if k.origin == K.KNOWLEDGE_ORIGIN_STORED]
    assert (
        stored[0].document_id == "handbook"
        and "25 days" in section[stored[0].start_char : stored[0].end_char]
    )
    call = await get_call(writer, built.report.model_call_id)
    assert list(call.messages) == built.messages and call.report == built.report


async def test_a_delete_racing_turns_never_fails_them_and_the_next_turn_no_longer_renders_it(
    clients: tuple[Client, Client, Client],
) -> None:
    writer, _, _ = clients
    agent_id = await create_agent(writer)
    await create(writer, agent_id, document("handbook", HANDBOOK))
    episode_id = await writer.open_episode(agent_id)
    delete = writer.knowledge.DeleteDocument(
        KS.DeleteDocumentRequest(agent_id=agent_id, document_id="handbook"), metadata=writer.auth
    )
    turns = [build(writer, episode_id, user_message=f"paid leave days? ({i})") for i in range(6)]
    await asyncio.gather(delete, *turns)  # none raises: no INTERNAL, no partial context
    after = await build(writer, episode_id, user_message="paid leave days?")
    assert all(k.document_id != "handbook" for k in after.report.knowledge)


async def test_updates_racing_searches_answer_one_whole_version_and_then_only_the_newest(
    clients: tuple[Client, Client, Client],
) -> None:
    """Each search sees a chunk's words and text of one version (never a key of the old text
    with the new text's words, nor an error); once the updates are done, the newest alone."""
    writer, reader, _ = clients
    agent_id = await create_agent(writer)
    versions = [f"The office plant this week is the {name}. Water it on Fridays." for name in
                ("fern", "cactus", "orchid", "ficus", "monstera", "bonsai")]  # fmt: skip
    await create(writer, agent_id, document("plant", versions[0]))

    async def update(text: str) -> None:
        changed = K.Document(agent_id=agent_id, document_id="plant", text=text)
        request = KS.UpdateDocumentRequest(document=changed, update_mask=FieldMask(paths=["text"]))
        await writer.knowledge.UpdateDocument(request, metadata=writer.auth)

    async def updates() -> None:
        for text in versions[1:]:
            await update(text)

    async def searches() -> list[list[KS.KnowledgeHit]]:
        return [await search(reader, agent_id, "which office plant to water") for _ in range(30)]

    _, found = await asyncio.gather(updates(), searches())
    for hits in found:
        assert [h.chunk.text for h in hits if h.chunk.text not in versions] == []
    newest = await search(reader, agent_id, "monstera bonsai plant")
    assert [h.chunk.text for h in newest] == [versions[-1]]
    old_words = await search(reader, agent_id, "fern cactus orchid ficus monstera")
    assert [h.chunk.text for h in old_words] == [versions[-1]]  # found by meaning alone:
    assert [list(h.signals) for h in old_words] == [
        [episode_service_pb2.MATCH_SIGNAL_SEMANTIC]
    ]  # no old word


@pytest.mark.parametrize("path", ["nope", "é" * 1000], ids=["short", "long-and-beyond-ascii"])
async def test_a_thousand_bad_mask_paths_are_invalid_argument_listing_some_and_counting_the_rest(
    clients: tuple[Client, Client, Client], path: str
) -> None:
    writer, _, _ = clients
    changed = knowledge_pb2.Document(agent_id="helper", document_id="doc", text="new text")
    mask = FieldMask(paths=[f"{path}{i}" for i in range(1000)])
    err = await expect_code(
        writer.knowledge.UpdateDocument(
            KS.UpdateDocumentRequest(document=changed, update_mask=mask), metadata=writer.auth
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    listed = bad_request(err).field_violations
    assert 1 <= len(listed) - 1 <= 100 and all(v.field == "update_mask" for v in listed[:-1])
    assert listed[-1].description == f"and {1000 - (len(listed) - 1)} more violations, not listed"
