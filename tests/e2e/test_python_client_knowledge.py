"""The Python client's KnowledgeService methods, and BuildContext's knowledge items, against a
live server: both clients create, read, list (every page), search, update and delete
documents, hand knowledge to a turn and find it in the stored model call, and get typed
errors (a read-only key, conflicts, a request past the server's limit)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import grpc
import pytest

from episodic_client import (
    AlreadyExistsError,
    AsyncEpisodicClient,
    BuiltContext,
    EpisodicClient,
    InvalidArgumentError,
    MemoryConfig,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    document_input,
    knowledge_item,
)
from episodic_client.v1 import context_pb2, episode_service_pb2, knowledge_pb2
from tests.conftest import unique
from tests.server_harness import KEY_A, KEY_A_READER, KEY_B, RunningServer

K, S = knowledge_pb2, context_pb2
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
PARKING = "Parking permits come from the facilities desk on the ground floor."
POLICY = "Contractors follow their agency's leave rules, not the handbook."


@pytest.fixture
def database_url(sqlite_url: str) -> str:
    """One backend: what these tests check is the same over either store (the stores are
    held to one behaviour on both by tests/contracts and tests/integration)."""
    return sqlite_url


def async_client(server: RunningServer, api_key: str = KEY_A) -> AsyncEpisodicClient:
    return AsyncEpisodicClient(server.address, api_key=api_key, timeout=10.0)


def sync_client(address: str, api_key: str = KEY_A) -> EpisodicClient:
    return EpisodicClient(address, api_key=api_key, timeout=10.0)


async def new_agent(client: AsyncEpisodicClient) -> str:
    created = await client.create_agent(unique("agent"), system_prompt="You are the HR assistant.")
    return created.agent.agent_id


async def test_async_client_round_trips_documents(server: RunningServer) -> None:
    async with async_client(server) as client:
        agent_id = await new_agent(client)
        made = await client.create_documents(
            agent_id,
            [
                document_input(
                    "handbook", HANDBOOK, title="Handbook", uri="https://hr.example", metadata={"team": "hr"}
                ),
                document_input("parking", PARKING, format="text", metadata={"team": "facilities"}),
                document_input("badges", "Badges are renewed every year at reception.", format="text"),
            ],
        )
        retried = await client.create_documents(
            agent_id, [document_input("handbook", HANDBOOK, title="Handbook")]
        )
        with pytest.raises(AlreadyExistsError):
            await client.create_documents(agent_id, [document_input("handbook", HANDBOOK + "!")])

        got = await client.get_document(agent_id, "handbook", include_chunks=True)
        bare = await client.get_document(agent_id, "parking")

        first = await client.list_documents(agent_id, page_size=2)
        second = await client.list_documents(agent_id, page_size=2, page_token=first.next_page_token)
        walked = [d.document_id async for d in client.iter_documents(agent_id, page_size=1)]
        only_hr = [d.document_id async for d in client.iter_documents(agent_id, metadata={"team": "hr"})]

        found = await client.search_knowledge(agent_id, "how many days of paid leave", mode="hybrid", top_k=3)
        filtered = await client.search_knowledge(
            agent_id, "parking permits leave", top_k=10, metadata={"team": "facilities"}
        )
        later = datetime.now(UTC) + timedelta(days=1)
        none_later = await client.search_knowledge(agent_id, mode="recency", updated_after=later)
        recent = await client.search_knowledge(
            agent_id, mode=episode_service_pb2.SEARCH_MODE_RECENCY, updated_before=later, top_k=100
        )
    assert [(r.document.document_id, r.created) for r in made.results] == [
        ("handbook", True),
        ("parking", True),
        ("badges", True),
    ]
    assert made.results[1].document.format == K.DOCUMENT_FORMAT_TEXT and not made.results[0].document.text
    assert not retried.results[0].created
    assert retried.results[0].document.content_hash == made.results[0].document.content_hash

    assert got.document.text == HANDBOOK and got.document.title == "Handbook"
    assert dict(got.document.metadata) == {"team": "hr"} and got.document.uri == "https://hr.example"
    assert got.document.chunk_count == len(got.chunks) == 2
    assert got.chunks[-1].heading_path == ["Employee handbook", "Expenses"]
    assert all(HANDBOOK[c.start_char : c.end_char] == c.text for c in got.chunks)
    assert bare.document.text == PARKING and not bare.chunks

    assert [d.document_id for d in first.documents] == ["badges", "handbook"] and first.next_page_token
    assert [d.document_id for d in second.documents] == ["parking"] and not second.next_page_token
    assert walked == ["badges", "handbook", "parking"]
    assert only_hr == ["handbook"]

    top = found.hits[0]
    assert top.chunk.document_id == "handbook" and "25 days" in top.chunk.text
    assert top.document.title == "Handbook" and not top.document.text and top.score > 0
    assert {h.chunk.document_id for h in filtered.hits} == {"parking"}
    assert not none_later.hits
    assert {h.chunk.document_id for h in recent.hits} == {"handbook", "parking", "badges"}


async def test_async_client_updates_and_deletes_documents(server: RunningServer) -> None:
    expires = datetime.now(UTC).replace(microsecond=0) + timedelta(days=30)
    async with async_client(server) as client:
        agent_id = await new_agent(client)
        await client.create_documents(agent_id, [document_input("parking", PARKING, expire_time=expires)])
        created = (await client.get_document(agent_id, "parking")).document

        retitled = (
            await client.update_document(agent_id, "parking", title="Parking", uri="https://fm")
        ).document
        rewritten = (
            await client.update_document(
                agent_id,
                "parking",
                text="Bicycles go in the basement garage.",
                format="text",
                metadata={"team": "facilities"},
                expire_time=None,  # never expires
            )
        ).document
        got = (await client.get_document(agent_id, "parking")).document
        hits = (await client.search_knowledge(agent_id, "bicycles basement garage")).hits

        await client.delete_document(agent_id, "parking")
        with pytest.raises(NotFoundError) as missing:
            await client.get_document(agent_id, "parking")
        with pytest.raises(NotFoundError):
            await client.delete_document(agent_id, "parking")
        after = (await client.search_knowledge(agent_id, "bicycles basement garage")).hits
    assert created.expire_time.ToDatetime(tzinfo=UTC) == expires
    assert (retitled.title, retitled.uri) == ("Parking", "https://fm")
    assert retitled.content_hash != created.content_hash  # the title is part of the content
    assert rewritten.format == K.DOCUMENT_FORMAT_TEXT and not rewritten.HasField("expire_time")
    assert dict(rewritten.metadata) == {"team": "facilities"} and rewritten.title == "Parking"
    assert got.text == "Bicycles go in the basement garage."
    assert hits[0].chunk.document_id == "parking" and "Bicycles" in hits[0].chunk.text
    assert missing.value.code == grpc.StatusCode.NOT_FOUND and missing.value.reason
    assert not after


async def test_knowledge_errors_are_typed(server: RunningServer) -> None:
    async with async_client(server) as writer, async_client(server, KEY_A_READER) as reader:
        agent_id = await new_agent(writer)
        with pytest.raises(PermissionDeniedError):
            await reader.create_documents(agent_id, [document_input("d", "text")])
        await writer.create_documents(agent_id, [document_input("d", "Secret plans of the agent.")])
        assert (await reader.search_knowledge(agent_id, "secret plans")).hits  # readers read
        with pytest.raises(PermissionDeniedError):
            await reader.update_document(agent_id, "d", title="mine")
        with pytest.raises(PermissionDeniedError):
            await reader.delete_document(agent_id, "d")
        with pytest.raises(InvalidArgumentError) as blank:
            await writer.create_documents(agent_id, [document_input("blank", "  \n ")])
        with pytest.raises(InvalidArgumentError):
            await writer.search_knowledge(agent_id, mode="semantic")  # no query
        # past the largest request the server takes, the transport refuses it
        with pytest.raises(ResourceExhaustedError):
            await writer.create_documents(agent_id, [document_input("huge", "x" * (10 * 1024 * 1024))])
    async with async_client(server, KEY_B) as stranger:
        with pytest.raises(NotFoundError):
            await stranger.get_document(agent_id, "d")
        with pytest.raises(NotFoundError):
            await stranger.search_knowledge(agent_id, "secret plans")
    assert [f for f, _ in blank.value.field_violations] == ["documents[0].text"]


def test_bad_client_side_values_are_refused_before_sending() -> None:
    with EpisodicClient("127.0.0.1:1") as client:
        with pytest.raises(ValueError, match="needs a field"):
            client.update_document("agent", "doc")
        with pytest.raises(ValueError, match="html"):
            client.create_documents("agent", [document_input("d", "text", format="html")])


async def test_async_build_context_renders_caller_and_stored_knowledge_as_the_model_call_stores(
    server: RunningServer,
) -> None:
    async with async_client(server) as client:
        agent_id = await new_agent(client)
        await client.create_documents(agent_id, [document_input("handbook", HANDBOOK, title="Handbook")])
        episode_id = (await client.open_episode(agent_id, unique("user"))).episode.episode_id
        items = [
            knowledge_item(POLICY, source_id="crm/42", score=0.7),
            knowledge_item(
                "Sick leave needs a doctor's note after three days.",
                source_id="hr/sick.md",
                title="Sick leave",
                uri="https://hr.example/sick",
                score=0.9,
                metadata={"team": "hr"},
            ),
            K.KnowledgeItem(text="Unscored items come after the scored ones.", source_id="plain"),
        ]
        built = await client.build_context(
            episode_id,
            user_message="How many days of paid leave do I get?",
            append_user_message=True,
            knowledge=items,
        )
        stored = (await client.get_model_call(built.report.model_call_id)).model_call
        without_stored = await client.build_context(
            episode_id,
            user_message="Paid leave?",
            knowledge=items[:1],
            memory_config=MemoryConfig(knowledge=False),
        )
    assert [m.section for m in built.messages] == [
        S.CONTEXT_SECTION_SYSTEM,
        S.CONTEXT_SECTION_KNOWLEDGE,
        S.CONTEXT_SECTION_USER_MESSAGE,
    ]
    section = built.messages[1].content
    assert "Source: Sick leave <https://hr.example/sick>" in section
    report = built.report
    mine = [(k.source_id, k.fate) for k in report.knowledge if k.origin == K.KNOWLEDGE_ORIGIN_REQUEST]
    assert mine == [
        ("hr/sick.md", K.KNOWLEDGE_FATE_WHOLE),
        ("crm/42", K.KNOWLEDGE_FATE_WHOLE),
        ("plain", K.KNOWLEDGE_FATE_WHOLE),
    ]
    spans = {k.source_id: section[k.start_char : k.end_char] for k in report.knowledge}
    assert spans["crm/42"] == POLICY
    from_documents = [k for k in report.knowledge if k.origin == K.KNOWLEDGE_ORIGIN_STORED]
    assert from_documents and from_documents[0].document_id == "handbook"
    assert "25 days" in section[from_documents[0].start_char : from_documents[0].end_char]
    assert report.section_tokens.knowledge == built.messages[1].token_count > 0
    assert list(stored.messages) == built.messages and stored.report == report
    assert [k.origin for k in without_stored.report.knowledge] == [K.KNOWLEDGE_ORIGIN_REQUEST]


def sync_knowledge_round_trip(address: str, agent_id: str, episode_id: str) -> tuple[list[str], BuiltContext]:
    with sync_client(address) as client:
        client.create_documents(agent_id, [document_input("a", PARKING), document_input("b", HANDBOOK)])
        listed = [d.document_id for d in client.iter_documents(agent_id, page_size=1)]
        assert client.get_document(agent_id, "b", include_chunks=True).document.chunk_count == 2
        assert client.search_knowledge(agent_id, "parking permits", top_k=1).hits[0].chunk.document_id == "a"
        assert client.update_document(agent_id, "a", title="Parking").document.title == "Parking"
        client.delete_document(agent_id, "b")
        assert [d.document_id for d in client.list_documents(agent_id).documents] == ["a"]
        with pytest.raises(NotFoundError):
            client.get_document(agent_id, "b")
        built = client.build_context(
            episode_id,
            user_message="Where do I get a permit?",
            knowledge=[knowledge_item(POLICY, source_id="x")],
        )
        return listed, built


async def test_sync_client_round_trips_documents_and_knowledge_items(server: RunningServer) -> None:
    async with async_client(server) as client:
        agent_id = await new_agent(client)
        episode_id = (await client.open_episode(agent_id, unique("user"))).episode.episode_id
        listed, built = await asyncio.to_thread(
            sync_knowledge_round_trip, server.address, agent_id, episode_id
        )
        stored = (await client.get_model_call(built.report.model_call_id)).model_call
    assert listed == ["a", "b"]
    assert next((k.source_id, k.origin) for k in built.report.knowledge) == ("x", K.KNOWLEDGE_ORIGIN_REQUEST)
    assert stored.report == built.report
