"""The MCP tools: each one's name, description (written for the model that picks it),
argument model and the use case it calls. They translate and nothing more: the service
layer validates, authorizes (the caller's tenant, agents and knowledge permission) and
decides, exactly as for gRPC. A tool that writes knowledge is only listed to a caller whose
key may write it (`ToolSpec.offered_to`); called anyway, the service refuses it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from mcp.types import Tool, ToolAnnotations

from episodic.domain.agents import AgentDraft
from episodic.domain.chunking import DocumentFormat
from episodic.domain.knowledge import DocumentDraft, KnowledgeFilter, metadata_of
from episodic.domain.memories import MemoryKind, Placement
from episodic.domain.memory_rules import CreateRequest, MemoryDraft
from episodic.domain.model import Caller, CloseReason, NewMessage, Role
from episodic.domain.ports.memories import MemoryFilter
from episodic.domain.recall import SearchMode
from episodic.edges.mcp import arguments as args
from episodic.edges.mcp import present
from episodic.service.context import ContextRequest
from episodic.service.knowledge import KnowledgeQuery
from episodic.service.memory_search import MemoryQuery
from episodic.service.recall import SearchRequest
from episodic.service.services import Services

A = TypeVar("A", bound=args.Arguments)


@dataclass(frozen=True, slots=True)
class Reply:
    """`data` is the structured content; `text` what a model reads (None: `data` as JSON)."""

    data: present.Json
    text: str | None = None


@dataclass(frozen=True, slots=True)
class ToolSpec(Generic[A]):
    name: str
    title: str
    description: str
    arguments: type[A]
    run: Callable[[Services, Caller, A], Awaitable[Reply]]
    hints: ToolAnnotations
    # The service's field names (proto paths) -> this tool's argument names, by prefix.
    renames: Mapping[str, str] = field(default_factory=dict)
    writes_knowledge: bool = False  # listed only to callers whose key may write knowledge

    def offered_to(self, caller: Caller | None) -> bool:
        return not self.writes_knowledge or (caller is not None and caller.writes_knowledge)

    def listing(self) -> Tool:
        return Tool(
            name=self.name,
            title=self.title,
            description=self.description,
            input_schema=self.arguments.model_json_schema(),
            annotations=self.hints,
        )


READS = ToolAnnotations(read_only_hint=True, open_world_hint=False)
ADDS = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
DELETES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)


async def create_agent(s: Services, caller: Caller, a: args.CreateAgentArguments) -> Reply:
    draft = AgentDraft(
        agent_id=a.agent_id, display_name=a.display_name, system_prompt=a.system_prompt, model=a.model
    )
    return Reply(present.agent(await s.agents.create_agent(caller, draft)))


async def start_episode(s: Services, caller: Caller, a: args.StartEpisodeArguments) -> Reply:
    opened, created = await s.episodes.open_episode(
        caller, agent_id=a.agent_id, user_id=a.user_id, episode_id=a.episode_id
    )
    return Reply({**present.episode(opened), "created": created})


async def add_message(s: Services, caller: Caller, a: args.AddMessageArguments) -> Reply:
    new = NewMessage(Role(a.role), a.content, client_message_id=a.client_message_id or None)
    stored, replayed = await s.episodes.add_message(caller, a.episode_id, new)
    return Reply(present.message(stored, replayed))


async def get_context(s: Services, caller: Caller, a: args.GetContextArguments) -> Reply:
    request = ContextRequest(
        episode_id=a.episode_id,
        user_message=a.message,
        append_user_message=a.append_message,
        recall_query=a.recall_query,
    )
    call, _ = await s.context.build(caller, request)
    return Reply(present.model_call(call), present.rendered(call))


async def close_episode(s: Services, caller: Caller, a: args.CloseEpisodeArguments) -> Reply:
    closed = await s.episodes.close_episode(caller, a.episode_id, reason=CloseReason(a.reason), note=a.note)
    return Reply(present.episode(closed))


async def search_episodes(s: Services, caller: Caller, a: args.SearchEpisodesArguments) -> Reply:
    request = SearchRequest(a.agent_id, a.user_id, SearchMode(a.mode), a.query, top_k=a.limit)
    return Reply(present.search_result(await s.recall.search(caller, request)))


async def search_memories(s: Services, caller: Caller, a: args.SearchMemoriesArguments) -> Reply:
    where = MemoryFilter(kinds=frozenset(MemoryKind(k) for k in a.kinds))
    query = MemoryQuery(a.agent_id, a.user_id, SearchMode(a.mode), a.query, top_k=a.limit, where=where)
    return Reply(present.memory_hits(await s.memory_search.search(caller, query)))


async def remember(s: Services, caller: Caller, a: args.RememberArguments) -> Reply:
    draft = MemoryDraft(
        text=a.text,
        kind=MemoryKind(a.kind),
        topics=tuple(a.topics),
        entities=tuple(a.entities),
        event_time=_utc(a.event_time),
    )
    request = CreateRequest(
        [draft], agent_id=a.agent_id, user_id=a.user_id, episode_id=a.episode_id, placement=Placement.EAGER
    )
    (made,) = await s.memories.create(caller, request)
    return Reply(present.created(made))


async def forget(s: Services, caller: Caller, a: args.ForgetArguments) -> Reply:
    gone = await s.memories.delete(caller, a.memory_id)
    return Reply({"memory_id": gone.memory_id, "forgotten": True})


async def search_knowledge(s: Services, caller: Caller, a: args.SearchKnowledgeArguments) -> Reply:
    where = KnowledgeFilter(metadata=metadata_of(a.metadata))
    query = KnowledgeQuery(a.agent_id, SearchMode(a.mode), a.query, top_k=a.limit, where=where)
    return Reply(present.knowledge_hits(await s.knowledge.search(caller, query)))


async def add_document(s: Services, caller: Caller, a: args.AddDocumentArguments) -> Reply:
    draft = DocumentDraft(
        document_id=a.document_id,
        text=a.text,
        format=DocumentFormat(a.format),
        title=a.title,
        uri=a.uri,
        metadata=metadata_of(a.metadata),
    )
    ((made, created),) = await s.knowledge.create(caller, a.agent_id, [draft])
    return Reply(present.document(made, created))


async def delete_document(s: Services, caller: Caller, a: args.DeleteDocumentArguments) -> Reply:
    gone = await s.knowledge.delete(caller, a.agent_id, a.document_id)
    return Reply({"agent_id": gone.agent_id, "document_id": gone.document_id, "deleted": True})


async def list_users(s: Services, caller: Caller, a: args.ListUsersArguments) -> Reply:
    return Reply(present.users(await s.users.list_users(caller, a.agent_id, a.limit, a.page_token)))


def _utc(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


_FLOW = (
    "A conversation is an episode: start_episode, then add_message for each turn (get_context "
    "before answering), close_episode at the end; closed conversations become searchable."
)
TOOLS: tuple[ToolSpec[Any], ...] = (
    ToolSpec(
        "search_episodes",
        "Search past conversations",
        "Find earlier conversations between an agent and a user: each with its summary, key facts "
        "and when it happened. Use it when the user refers to something discussed before. Only "
        "closed conversations are searchable (pending_digests counts those still being indexed).",
        args.SearchEpisodesArguments,
        search_episodes,
        READS,
        {"top_k": "limit"},
    ),
    ToolSpec(
        "get_context",
        "Get the context for a message",
        "Render exactly what the model should see before answering a user message in a "
        "conversation: system prompt, known facts about the user, relevant past conversations, a "
        "summary of older turns and the recent turns, within the agent's token budget. The render "
        "is recorded as a model call (its id is returned). " + _FLOW,
        args.GetContextArguments,
        get_context,
        ADDS,
        {"user_message": "message", "append_user_message": "append_message"},
    ),
    ToolSpec(
        "start_episode",
        "Start a conversation",
        "Open a new conversation (episode) between an agent and a user and return its episode_id. " + _FLOW,
        args.StartEpisodeArguments,
        start_episode,
        ADDS,
    ),
    ToolSpec(
        "add_message",
        "Add a message",
        "Append one message (the user's or the assistant's) to an open conversation, verbatim. " + _FLOW,
        args.AddMessageArguments,
        add_message,
        ADDS,
        {"message": ""},
    ),
    ToolSpec(
        "close_episode",
        "Close a conversation",
        "End a conversation. It is then summarized and indexed in the background, so "
        "search_episodes finds it shortly after, and durable facts are extracted from it.",
        args.CloseEpisodeArguments,
        close_episode,
        ADDS,
    ),
    ToolSpec(
        "list_users",
        "List an agent's users",
        "List the users an agent has conversations or long-term memories of, by user id, each "
        "with how many conversations (and how many still open) and memories it has and when it "
        "was last active. Use it to find a user_id for search_episodes or search_memories; pass "
        "next_page_token back as page_token for more.",
        args.ListUsersArguments,
        list_users,
        READS,
        {"page_size": "limit"},
    ),
    ToolSpec(
        "search_memories",
        "Search long-term memories",
        "Search what is remembered about a user (facts, preferences, events), best match first. "
        "Use it before answering questions about the user's situation or tastes.",
        args.SearchMemoriesArguments,
        search_memories,
        READS,
        {"top_k": "limit"},
    ),
    ToolSpec(
        "remember",
        "Remember a fact",
        "Store one durable statement about the user in long-term memory now (deduplicated against "
        "what is already known; a newer statement can supersede an older one). One statement per call.",
        args.RememberArguments,
        remember,
        ADDS,
        {"memories[0]": ""},
    ),
    ToolSpec(
        "forget",
        "Forget a memory",
        "Delete one long-term memory for good, by its memory_id (find it with search_memories). "
        "Use it when the user asks to forget something or a memory is wrong.",
        args.ForgetArguments,
        forget,
        DELETES,
    ),
    ToolSpec(
        "search_knowledge",
        "Search the agent's knowledge",
        "Search an agent's documents (its knowledge base: handbooks, FAQs, product docs, shared by "
        "all of its users) for the passages that answer a question, best match first. Each passage "
        "comes with its document's id, title and uri, and its place in the document (chunk_index, "
        "start_char..end_char). Use it to ground an answer in the agent's documents and cite them.",
        args.SearchKnowledgeArguments,
        search_knowledge,
        READS,
        {"top_k": "limit"},
    ),
    ToolSpec(
        "add_document",
        "Add a document to the agent's knowledge",
        "Store one document in an agent's knowledge base, where search_knowledge (and get_context) "
        "find its passages. Adding the same document_id again with the same title and text changes "
        "nothing (created: false); other content under an existing id fails with ALREADY_EXISTS: "
        "delete_document it first to replace it.",
        args.AddDocumentArguments,
        add_document,
        ADDS,
        {"documents[0]": ""},
        writes_knowledge=True,
    ),
    ToolSpec(
        "delete_document",
        "Delete a document from the agent's knowledge",
        "Delete one document and all of its passages from an agent's knowledge base for good, by "
        "its document_id. Use it when a document is outdated or wrong.",
        args.DeleteDocumentArguments,
        delete_document,
        DELETES,
        writes_knowledge=True,
    ),
    ToolSpec(
        "create_agent",
        "Create an agent",
        "Define an agent (its id, system prompt and model) before its first conversation. Needed "
        "once per agent; fails with ALREADY_EXISTS if it exists.",
        args.CreateAgentArguments,
        create_agent,
        ADDS,
        {"agent": ""},
    ),
)
TOOLS_BY_NAME: Mapping[str, ToolSpec[Any]] = {t.name: t for t in TOOLS}
