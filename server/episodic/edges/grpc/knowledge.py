"""KnowledgeService servicer: proto -> domain call -> proto. No decisions here."""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc

from episodic.domain.knowledge import KnowledgeFilter, metadata_of
from episodic.edges.grpc import knowledge_convert as kc
from episodic.edges.grpc.fitting import require_fits
from episodic.edges.grpc.interceptors import current_caller
from episodic.service.knowledge import KnowledgeService
from episodic.v1 import knowledge_service_pb2 as pb
from episodic.v1 import knowledge_service_pb2_grpc as pb_grpc

Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"


class KnowledgeServicer(pb_grpc.KnowledgeServiceServicer):
    def __init__(self, knowledge: KnowledgeService, max_frame_bytes: int) -> None:
        self._knowledge = knowledge
        self._max_frame_bytes = max_frame_bytes

    async def CreateDocuments(
        self, request: pb.CreateDocumentsRequest, context: Context
    ) -> pb.CreateDocumentsResponse:
        drafts = [kc.draft_in(d, f"documents[{i}]") for i, d in enumerate(request.documents)]
        made = await self._knowledge.create(current_caller(), request.agent_id, drafts)
        results = [pb.DocumentResult(document=kc.document_out(d), created=created) for d, created in made]
        return pb.CreateDocumentsResponse(results=results)

    async def GetDocument(self, request: pb.GetDocumentRequest, context: Context) -> pb.GetDocumentResponse:
        document, chunks = await self._knowledge.get(
            current_caller(), request.agent_id, request.document_id, request.include_chunks
        )
        response = pb.GetDocumentResponse(
            document=kc.document_out(document, with_text=True), chunks=[kc.chunk_out(c) for c in chunks]
        )
        return require_fits(response, self._max_frame_bytes, "ask without include_chunks, or raise the limit")

    async def ListDocuments(
        self, request: pb.ListDocumentsRequest, context: Context
    ) -> pb.ListDocumentsResponse:
        page = await self._knowledge.list_documents(
            current_caller(),
            request.agent_id,
            KnowledgeFilter(metadata=metadata_of(request.metadata)),
            request.page_size,
            request.page_token,
        )
        response = pb.ListDocumentsResponse(
            documents=[kc.document_out(d) for d in page.items], next_page_token=page.next_token
        )
        return require_fits(
            response, self._max_frame_bytes, "list with a smaller page_size, or raise the limit"
        )

    async def UpdateDocument(
        self, request: pb.UpdateDocumentRequest, context: Context
    ) -> pb.UpdateDocumentResponse:
        changed = await self._knowledge.update(
            current_caller(),
            request.document.agent_id,
            kc.update_in(request.document),
            list(request.update_mask.paths),
        )
        return pb.UpdateDocumentResponse(document=kc.document_out(changed))

    async def DeleteDocument(
        self, request: pb.DeleteDocumentRequest, context: Context
    ) -> pb.DeleteDocumentResponse:
        await self._knowledge.delete(current_caller(), request.agent_id, request.document_id)
        return pb.DeleteDocumentResponse()

    async def SearchKnowledge(
        self, request: pb.SearchKnowledgeRequest, context: Context
    ) -> pb.SearchKnowledgeResponse:
        hits = await self._knowledge.search(current_caller(), kc.query_in(request))
        return pb.SearchKnowledgeResponse(hits=[kc.hit_out(h) for h in hits])
