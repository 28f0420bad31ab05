"""Every use case of one process, as the composition root hands them to the edges (gRPC, the
inspector, MCP): built by `bootstrap.wiring.build_services`, taken by each edge without one edge
importing another."""

from __future__ import annotations

from dataclasses import dataclass

from episodic.service.agent_deletion import AgentDeletion
from episodic.service.agents import AgentService
from episodic.service.context import ContextService
from episodic.service.episodes import EpisodeService
from episodic.service.erasure import EraseService
from episodic.service.index_check import IndexChecker
from episodic.service.inspection import InspectionService
from episodic.service.knowledge import KnowledgeService
from episodic.service.memories import MemoryService
from episodic.service.memory_search import MemorySearch
from episodic.service.memory_tools import MemoryTools
from episodic.service.model_calls import ModelCallService
from episodic.service.recall import RecallService
from episodic.service.session_data import SessionDataService
from episodic.service.transfer import TransferService
from episodic.service.users import UserService
from episodic.service.watch import WatchService


@dataclass(frozen=True, slots=True)
class Services:
    episodes: EpisodeService
    agents: AgentService
    recall: RecallService
    context: ContextService
    model_calls: ModelCallService
    knowledge: KnowledgeService
    erasure: EraseService
    index_checker: IndexChecker
    knowledge_checker: IndexChecker  # the agents' knowledge index against SQL
    memories: MemoryService
    memory_search: MemorySearch
    sessions: SessionDataService
    memory_tools: MemoryTools
    watch: WatchService
    inspection: InspectionService
    users: UserService  # ListUsers
    agent_deletion: AgentDeletion  # DeleteAgent
    transfer: TransferService | None = None  # over SQL only
