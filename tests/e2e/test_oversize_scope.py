"""An agent whose knowledge vectors are larger than the knowledge index's whole cache share,
through a live server on both backends: searched by meaning from SQL a page at a time
(state/index_cache.py), exactly and currently (a rewritten document is found by its new
text), and never held, so it evicts no one (issue 43, finding 6); CheckIndex finds it
consistent (its searches read SQL's own vectors)."""

from __future__ import annotations

import logging

import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from episodic.v1 import diagnostics_service_pb2, episode_service_pb2, knowledge_pb2, knowledge_service_pb2
from tests.e2e.context_helpers import create_agent
from tests.e2e.helpers import Client
from tests.server_harness import KEY_A, running_server, settings_for

KS = knowledge_service_pb2
# 15% of it is the knowledge vectors' share: 3,000 bytes, under three vectors of 256 floats.
INDEX_CACHE_BYTES = 20_000
TOPICS = {
    "leave": "Employees get 25 days of paid leave a year; unused days carry over until March.",
    "expenses": "Travel expenses are reimbursed within 30 days when filed with receipts.",
    "parking": "Parking permits come from the facilities desk on the ground floor.",
    "laptops": "Laptops are replaced every three years by the IT service desk.",
}


async def semantic(client: Client, agent_id: str, query: str) -> list[str]:
    request = KS.SearchKnowledgeRequest(
        agent_id=agent_id, mode=episode_service_pb2.SEARCH_MODE_SEMANTIC, query=query, top_k=2
    )
    hits = (await client.knowledge.SearchKnowledge(request, metadata=client.auth)).hits
    return [h.chunk.document_id for h in hits]


async def test_an_agent_over_its_cache_share_is_searched_from_sql_exactly_and_currently(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="episodic.state.index_cache")
    settings = settings_for(database_url, index_cache_bytes=INDEX_CACHE_BYTES)
    async with running_server(settings) as server, server.channel() as channel:
        client = Client.of(channel, KEY_A)
        agent_id = await create_agent(client)
        documents = [KS.DocumentInput(document_id=name, text=text) for name, text in TOPICS.items()]
        await client.knowledge.CreateDocuments(
            KS.CreateDocumentsRequest(agent_id=agent_id, documents=documents), metadata=client.auth
        )
        for _ in range(3):
            for name, text in TOPICS.items():
                assert (await semantic(client, agent_id, text))[0] == name
        changed = knowledge_pb2.Document(
            agent_id=agent_id, document_id="parking", text="Bicycles go in the basement garage by the lifts."
        )
        await client.knowledge.UpdateDocument(
            KS.UpdateDocumentRequest(document=changed, update_mask=FieldMask(paths=["text"])),
            metadata=client.auth,
        )
        found = await semantic(client, agent_id, "Bicycles go in the basement garage by the lifts.")
        assert found[0] == "parking"
        checked = await client.diagnostics.CheckIndex(
            diagnostics_service_pb2.CheckIndexRequest(agent_id=agent_id), metadata=client.auth
        )  # its searches read SQL's own vectors: nothing missing
        assert checked.knowledge_sql_vectors == checked.knowledge_index_vectors == len(TOPICS)
        assert checked.knowledge_missing == checked.knowledge_orphaned == 0
    too_large = [r for r in caplog.records if "larger than its whole index cache budget" in r.getMessage()]
    assert len(too_large) == 1  # loaded once, found too large; every later search read it from SQL
