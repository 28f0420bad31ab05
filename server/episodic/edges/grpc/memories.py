"""MemoryService servicer: proto -> domain call -> proto. No decisions here."""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc

from episodic.edges.grpc import convert as c
from episodic.edges.grpc import memory_convert as mc
from episodic.edges.grpc.interceptors import current_caller
from episodic.service.memories import MemoryService
from episodic.service.memory_search import MemorySearch
from episodic.service.memory_tools import TOOLS, MemoryTools
from episodic.service.session_data import SessionDataService
from episodic.v1 import memory_service_pb2 as pb
from episodic.v1 import memory_service_pb2_grpc as pb_grpc

Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"


class MemoryServicer(pb_grpc.MemoryServiceServicer):
    def __init__(
        self, memories: MemoryService, search: MemorySearch, sessions: SessionDataService, tools: MemoryTools
    ) -> None:
        self._memories = memories
        self._search = search
        self._sessions = sessions
        self._tools = tools

    async def CreateMemories(
        self, request: pb.CreateMemoriesRequest, context: Context
    ) -> pb.CreateMemoriesResponse:
        made = await self._memories.create(current_caller(), mc.create_in(request))
        return pb.CreateMemoriesResponse(results=[mc.result_out(m) for m in made])

    async def GetMemory(self, request: pb.GetMemoryRequest, context: Context) -> pb.GetMemoryResponse:
        found = await self._memories.get(current_caller(), request.memory_id)
        return pb.GetMemoryResponse(memory=mc.memory_out(found))

    async def ListMemories(
        self, request: pb.ListMemoriesRequest, context: Context
    ) -> pb.ListMemoriesResponse:
        page = await self._memories.list_memories(
            current_caller(),
            (request.agent_id, request.user_id),
            mc.list_filter_in(request),
            request.page_size,
            request.page_token,
        )
        return pb.ListMemoriesResponse(
            memories=[mc.memory_out(m) for m in page.items], next_page_token=page.next_token
        )

    async def UpdateMemory(
        self, request: pb.UpdateMemoryRequest, context: Context
    ) -> pb.UpdateMemoryResponse:
        updated = await self._memories.update(
            current_caller(), mc.update_in(request.memory), list(request.update_mask.paths)
        )
        return pb.UpdateMemoryResponse(memory=mc.memory_out(updated))

    async def DeleteMemory(
        self, request: pb.DeleteMemoryRequest, context: Context
    ) -> pb.DeleteMemoryResponse:
        gone = await self._memories.delete(current_caller(), request.memory_id)
        return pb.DeleteMemoryResponse(memory=mc.memory_out(gone))

    async def SearchMemories(
        self, request: pb.SearchMemoriesRequest, context: Context
    ) -> pb.SearchMemoriesResponse:
        hits = await self._search.search(current_caller(), mc.query_in(request))
        return pb.SearchMemoriesResponse(hits=[mc.hit_out(h) for h in hits])

    async def GetSessionData(
        self, request: pb.GetSessionDataRequest, context: Context
    ) -> pb.GetSessionDataResponse:
        found = await self._sessions.get(current_caller(), request.episode_id)
        return pb.GetSessionDataResponse(session_data=mc.session_out(found))

    async def UpdateSessionData(
        self, request: pb.UpdateSessionDataRequest, context: Context
    ) -> pb.UpdateSessionDataResponse:
        updated = await self._sessions.update(current_caller(), mc.session_update_in(request))
        return pb.UpdateSessionDataResponse(session_data=mc.session_out(updated))

    async def GetMemoryTools(
        self, request: pb.GetMemoryToolsRequest, context: Context
    ) -> pb.GetMemoryToolsResponse:
        tools = [pb.MemoryTool(name=name, definition=c.struct_out(tool)) for name, tool in TOOLS.items()]
        return pb.GetMemoryToolsResponse(tools=tools)

    async def CallMemoryTool(
        self, request: pb.CallMemoryToolRequest, context: Context
    ) -> pb.CallMemoryToolResponse:
        result = await self._tools.call(current_caller(), request.episode_id, request.name, request.arguments)
        return pb.CallMemoryToolResponse(result=result)
