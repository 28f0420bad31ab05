"""DiagnosticsService.CheckIndex: the vector index compared with SQL, key by key, within the
caller's tenant only."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from google.protobuf import json_format
from sqlalchemy import delete, insert, select

from episodic.edges.keys import config_line
from episodic.store import schema
from episodic.store.database import Database, open_database
from episodic.v1 import diagnostics_service_pb2, episode_pb2, knowledge_service_pb2
from tests.conftest import unique
from tests.e2e.helpers import Client, expect_code, expect_invalid, user_message
from tests.server_harness import KEY_A, KEY_B, TENANT_A, RunningServer, running_server, settings_for

V = schema.digest_vectors
KEY_OF_ALPHA = "epk_test_tenant_a_checks_alpha_0123456789"


@pytest.fixture
async def tenant_a(server: RunningServer) -> AsyncIterator[Client]:
    async with server.channel() as channel:
        yield Client.of(channel, KEY_A)


@pytest.fixture
async def tenant_b(server: RunningServer) -> AsyncIterator[Client]:
    async with server.channel() as channel:
        yield Client.of(channel, KEY_B)


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    """The server's database, opened beside it, to make SQL and the index drift apart."""
    db = open_database(database_url)
    try:
        yield db
    finally:
        await db.dispose()


async def check_index(client: Client, agent_id: str = "") -> diagnostics_service_pb2.CheckIndexResponse:
    request = diagnostics_service_pb2.CheckIndexRequest(agent_id=agent_id)
    return await client.diagnostics.CheckIndex(request, metadata=client.auth)


async def digested_episode(client: Client, agent_id: str, *lines: str) -> str:
    """An episode of `agent_id` with `lines`, closed and digested (READY)."""
    episode_id = await client.open_episode(agent_id)
    await client.add(episode_id, *[user_message(line) for line in lines])
    closed = await client.close_digested(episode_id)
    assert closed.digest.state == episode_pb2.DIGEST_STATE_READY, closed.digest
    return episode_id


async def test_a_consistent_index_reports_every_vector_and_no_drift(tenant_a: Client) -> None:
    agent_id = await tenant_a.create_agent()
    await digested_episode(tenant_a, agent_id, "I booked a flight to Lisbon", "The hotel is near the sea")
    await digested_episode(tenant_a, agent_id, "My cat Miso needs the vet", "Saturday morning works")

    report = await check_index(tenant_a, agent_id)

    assert report.sql_vectors == report.index_vectors >= 2
    assert (report.missing, report.orphaned) == (0, 0)
    assert not report.missing_keys and not report.orphaned_keys
    assert report.status == diagnostics_service_pb2.CHECK_INDEX_STATUS_CONSISTENT
    # in JSON, as grpcurl prints it, zeros are left out but the status is not
    assert json_format.MessageToDict(report)["status"] == "CHECK_INDEX_STATUS_CONSISTENT"
    whole_tenant = await check_index(tenant_a)
    assert whole_tenant.sql_vectors >= report.sql_vectors
    assert (whole_tenant.missing, whole_tenant.orphaned) == (0, 0)


async def test_a_tenant_counts_only_its_own_vectors_even_under_the_same_agent_id(
    tenant_a: Client, tenant_b: Client
) -> None:
    agent_id = await tenant_a.create_agent()
    await tenant_b.create_agent(agent_id)  # agent ids are per tenant: the same id in both
    await digested_episode(tenant_a, agent_id, "Only tenant A said this", "And this")
    a_alone = await check_index(tenant_a, agent_id)
    b_before = await check_index(tenant_b)

    assert a_alone.sql_vectors == a_alone.index_vectors > 0
    b_sees = await check_index(tenant_b, agent_id)
    assert (b_sees.sql_vectors, b_sees.index_vectors) == (0, 0)

    await digested_episode(tenant_b, agent_id, "Tenant B talks here")
    b_own = await check_index(tenant_b, agent_id)
    assert b_own.sql_vectors == b_own.index_vectors > 0
    assert (await check_index(tenant_a, agent_id)) == a_alone
    b_after = await check_index(tenant_b)
    assert b_after.index_vectors - b_before.index_vectors == b_own.index_vectors


async def test_a_vector_missing_from_sql_or_from_the_index_is_reported_with_its_key(
    tenant_a: Client, database: Database
) -> None:
    agent_id = await tenant_a.create_agent()
    episode_id = await digested_episode(tenant_a, agent_id, "Drift between SQL and the index")
    consistent = await check_index(tenant_a, agent_id)
    row = await first_vector_row(database, episode_id)

    await delete_vector_row(database, episode_id, chunk=0)  # the index still holds it: orphaned
    await insert_vector_row(database, {**row, "chunk": 999})  # only SQL holds it: missing

    report = await check_index(tenant_a, agent_id)
    assert report.sql_vectors == report.index_vectors == consistent.sql_vectors
    assert (report.missing, report.orphaned) == (1, 1)
    assert report.status == diagnostics_service_pb2.CHECK_INDEX_STATUS_DRIFTED
    assert list(report.missing_keys) == [f"{agent_id}/mary/{episode_id}#999"]
    assert list(report.orphaned_keys) == [f"{agent_id}/mary/{episode_id}#0"]


async def test_a_key_restricted_to_some_agents_checks_only_those(database_url: str) -> None:
    alpha, beta = unique("alpha"), unique("beta")
    settings = settings_for(database_url)
    restricted = config_line(TENANT_A, KEY_OF_ALPHA, [alpha])
    settings = settings_for(database_url, api_keys=f"{settings.api_keys},{restricted}")
    async with running_server(settings) as server, server.channel() as channel:
        tenant_key, alpha_key = Client.of(channel, KEY_A), Client.of(channel, KEY_OF_ALPHA)
        for agent_id in (alpha, beta):
            await tenant_key.create_agent(agent_id)
            await digested_episode(tenant_key, agent_id, f"A conversation with {agent_id}")

        own = await check_index(alpha_key, alpha)
        assert own == await check_index(tenant_key, alpha)
        assert own.sql_vectors == own.index_vectors > 0
        await expect_code(check_index(alpha_key, beta), grpc.StatusCode.PERMISSION_DENIED)
        await expect_code(check_index(alpha_key), grpc.StatusCode.PERMISSION_DENIED)


async def test_a_malformed_agent_id_is_invalid_argument(tenant_a: Client) -> None:
    await expect_invalid(check_index(tenant_a, "not an id!"), "agent_id")


async def first_vector_row(database: Database, episode_id: str) -> dict[str, object]:
    stmt = select(V).where(V.c.episode_id == episode_id, V.c.chunk == 0)
    async with database.engine.connect() as conn:
        row = (await conn.execute(stmt)).mappings().one()
    return dict(row)


async def delete_vector_row(database: Database, episode_id: str, chunk: int) -> None:
    async with database.engine.begin() as conn:
        await conn.execute(delete(V).where(V.c.episode_id == episode_id, V.c.chunk == chunk))


async def insert_vector_row(database: Database, row: dict[str, object]) -> None:
    async with database.engine.begin() as conn:
        await conn.execute(insert(V).values(row))


async def test_the_agents_knowledge_is_checked_too_and_its_drift_reported(
    tenant_a: Client, database: Database
) -> None:
    agent_id = await tenant_a.create_agent()
    doc = knowledge_service_pb2.DocumentInput(document_id="faq", text="Refunds take five working days.")
    create = knowledge_service_pb2.CreateDocumentsRequest(agent_id=agent_id, documents=[doc])
    await tenant_a.knowledge.CreateDocuments(create, metadata=tenant_a.auth)
    consistent = await check_index(tenant_a, agent_id)
    assert (consistent.knowledge_sql_vectors, consistent.knowledge_index_vectors) == (1, 1)
    assert (consistent.knowledge_missing, consistent.knowledge_orphaned) == (0, 0)

    chunks = schema.knowledge_chunks
    gone = delete(chunks).where(chunks.c.tenant_id == TENANT_A, chunks.c.agent_id == agent_id)
    async with database.engine.begin() as conn:
        await conn.execute(gone)  # the index still holds the chunk's vector: orphaned
    report = await check_index(tenant_a, agent_id)
    assert (report.knowledge_sql_vectors, report.knowledge_orphaned) == (0, 1)
    assert list(report.knowledge_orphaned_keys) == [f"{agent_id}//faq#0"]
