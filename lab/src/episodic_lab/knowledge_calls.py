"""How the lab's knowledge tools reach KnowledgeService: the generated stubs on the channel the
typed `episodic_client` uses for everything else (the typed client has no knowledge calls the
lab depends on), plaintext, as the insecure-dev tenant."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import grpc

from episodic_client import AsyncEpisodicClient
from episodic_client.v1 import episode_service_pb2, knowledge_pb2, knowledge_service_pb2
from episodic_client.v1.knowledge_service_pb2_grpc import KnowledgeServiceStub
from episodic_lab.connect import CALL_TIMEOUT_SECONDS

if TYPE_CHECKING:  # the async stub's type is in the .pyi only
    from episodic_client.v1.knowledge_service_pb2_grpc import KnowledgeServiceAsyncStub

MAX_DOCUMENTS_PER_CALL = 100  # CreateDocuments takes 1-100
MODES = {
    "semantic": episode_service_pb2.SEARCH_MODE_SEMANTIC,
    "hybrid": episode_service_pb2.SEARCH_MODE_HYBRID,
    "recency": episode_service_pb2.SEARCH_MODE_RECENCY,
}


@dataclass(frozen=True, slots=True)
class KnowledgeLab:
    """The typed client (agents, episodes, BuildContext, Echo) and the KnowledgeService stub,
    on one channel."""

    client: AsyncEpisodicClient
    knowledge: KnowledgeServiceAsyncStub

    async def create_documents(
        self, agent_id: str, documents: Sequence[knowledge_service_pb2.DocumentInput]
    ) -> int:
        """Creates the documents in calls of at most 100; returns how many chunks they hold."""
        chunks = 0
        for start in range(0, len(documents), MAX_DOCUMENTS_PER_CALL):
            batch = documents[start : start + MAX_DOCUMENTS_PER_CALL]
            request = knowledge_service_pb2.CreateDocumentsRequest(agent_id=agent_id, documents=batch)
            reply = await self.knowledge.CreateDocuments(request, timeout=CALL_TIMEOUT_SECONDS)
            chunks += sum(r.document.chunk_count for r in reply.results)
        return chunks

    async def search(
        self, agent_id: str, query: str, mode: str, top_k: int
    ) -> knowledge_service_pb2.SearchKnowledgeResponse:
        """`mode` is a search mode's short name (recency, semantic, hybrid)."""
        request = knowledge_service_pb2.SearchKnowledgeRequest(
            agent_id=agent_id, mode=MODES[mode], query=query, top_k=top_k
        )
        return await self.knowledge.SearchKnowledge(request, timeout=CALL_TIMEOUT_SECONDS)


def text_document(document_id: str, text: str, title: str = "") -> knowledge_service_pb2.DocumentInput:
    return knowledge_service_pb2.DocumentInput(
        document_id=document_id, text=text, title=title, format=knowledge_pb2.DOCUMENT_FORMAT_TEXT
    )


def markdown_document(document_id: str, text: str, title: str = "") -> knowledge_service_pb2.DocumentInput:
    return knowledge_service_pb2.DocumentInput(
        document_id=document_id, text=text, title=title, format=knowledge_pb2.DOCUMENT_FORMAT_MARKDOWN
    )


@asynccontextmanager
async def knowledge_lab(target: str) -> AsyncIterator[KnowledgeLab]:
    """Use as `async with knowledge_lab(server.target) as lab:`."""
    async with (
        grpc.aio.insecure_channel(target) as channel,
        AsyncEpisodicClient(target, channel=channel, timeout=CALL_TIMEOUT_SECONDS) as client,
    ):
        yield KnowledgeLab(client, KnowledgeServiceStub(channel))
