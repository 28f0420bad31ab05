"""AgentService servicer: proto -> domain call -> proto. No decisions here."""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc

from episodic.edges.grpc import convert as c
from episodic.edges.grpc.interceptors import current_caller
from episodic.service.agent_deletion import AgentDeletion
from episodic.service.agents import AgentService
from episodic.v1 import agent_service_pb2 as pb
from episodic.v1 import agent_service_pb2_grpc as pb_grpc

Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"


class AgentServicer(pb_grpc.AgentServiceServicer):
    def __init__(self, service: AgentService, deletion: AgentDeletion) -> None:
        self._service = service
        self._deletion = deletion

    async def CreateAgent(self, request: pb.CreateAgentRequest, context: Context) -> pb.CreateAgentResponse:
        agent = await self._service.create_agent(current_caller(), c.agent_draft_in(request.agent, "agent"))
        return pb.CreateAgentResponse(agent=c.agent_out(agent))

    async def GetAgent(self, request: pb.GetAgentRequest, context: Context) -> pb.GetAgentResponse:
        agent = await self._service.get_agent(current_caller(), request.agent_id)
        return pb.GetAgentResponse(agent=c.agent_out(agent))

    async def UpdateAgent(self, request: pb.UpdateAgentRequest, context: Context) -> pb.UpdateAgentResponse:
        draft = c.agent_draft_in(request.agent, "agent")
        mask = list(request.update_mask.paths) or c.populated_agent_paths(request.agent)
        agent = await self._service.update_agent(current_caller(), draft, mask)
        return pb.UpdateAgentResponse(agent=c.agent_out(agent))

    async def ListAgents(self, request: pb.ListAgentsRequest, context: Context) -> pb.ListAgentsResponse:
        page = await self._service.list_agents(current_caller(), request.page_size, request.page_token)
        return pb.ListAgentsResponse(
            agents=[c.agent_out(a) for a in page.items], next_page_token=page.next_token
        )

    async def DeleteAgent(self, request: pb.DeleteAgentRequest, context: Context) -> pb.DeleteAgentResponse:
        deleted = await self._deletion.delete_agent(current_caller(), request.agent_id, request.erase_data)
        return pb.DeleteAgentResponse(receipt=c.agent_deletion_out(deleted))
