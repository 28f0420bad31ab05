"""AsyncEpisodicClient: the asyncio client over a `grpc.aio.Channel`.

Every method builds its request with `episodic_client.requests`, sends it with the client's
deadline and API key, and returns the generated response message. Failed calls raise
`episodic_client.errors.EpisodicClientError` subclasses."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from functools import partial
from types import TracebackType
from typing import Any, Self, TypeVar

import grpc
from google.protobuf.message import Message as ProtoMessage

from episodic_client import knowledge_requests as kq
from episodic_client import memory_requests as mq
from episodic_client import requests as rq
from episodic_client.context import BuiltContext, join_frames
from episodic_client.errors import from_rpc_error
from episodic_client.metadata import auth_metadata
from episodic_client.paging import apages
from episodic_client.service_config import SERVICE_CONFIG_JSON, channel_options
from episodic_client.v1 import (
    agent_pb2,
    agent_service_pb2,
    context_pb2,
    context_service_pb2,
    diagnostics_service_pb2,
    episode_pb2,
    episode_service_pb2,
    knowledge_pb2,
    knowledge_service_pb2,
    memory_pb2,
    memory_service_pb2,
)
from episodic_client.v1.agent_service_pb2_grpc import AgentServiceStub
from episodic_client.v1.context_service_pb2_grpc import ContextServiceStub
from episodic_client.v1.diagnostics_service_pb2_grpc import DiagnosticsServiceStub
from episodic_client.v1.episode_service_pb2_grpc import EpisodeServiceStub
from episodic_client.v1.knowledge_service_pb2_grpc import KnowledgeServiceStub
from episodic_client.v1.memory_service_pb2_grpc import MemoryServiceStub
from episodic_client.values import (
    CloseReasonLike,
    JsonObject,
    MemoryStateLike,
    RoleLike,
    SearchModeLike,
    StateLike,
)

Req = TypeVar("Req", bound=ProtoMessage)
Resp = TypeVar("Resp", bound=ProtoMessage)
# How long `close` lets streams already answered end on their own (their status is one
# message away) before the channel closes on them.
FINISH_SECONDS = 1.0


ImportRequest = episode_service_pb2.ImportUserRequest


class AsyncEpisodicClient:
    """Use as `async with AsyncEpisodicClient("host:port", api_key=...) as client:`.

    Without `channel` the client opens (and closes) its own channel to `target`: plaintext,
    or TLS when `credentials` are given. A passed-in channel is left open on close.
    `target` may name several replicas (`ipv4:10.0.0.1:50051,10.0.0.2:50051`, or
    `dns:///name:50051` resolving to each): the channel spreads calls over them and retries
    idempotent ones on UNAVAILABLE, as `service_config` says (default:
    `episodic_client.service_config.SERVICE_CONFIG_JSON`; None: gRPC's defaults)."""

    def __init__(
        self,
        target: str,
        *,
        api_key: str | None = None,
        timeout: float = 10.0,
        channel: grpc.aio.Channel | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        service_config: str | None = SERVICE_CONFIG_JSON,
    ) -> None:
        self._owns_channel = channel is None
        options = channel_options(service_config)
        self._channel = _open_channel(target, credentials, options) if channel is None else channel
        self._timeout = timeout
        self._metadata = auth_metadata(api_key)
        self._finishing: set[grpc.aio.Call] = set()  # streams answered whose status is on its way
        self._agents = AgentServiceStub(self._channel)
        self._episodes = EpisodeServiceStub(self._channel)
        self._context = ContextServiceStub(self._channel)
        self._diagnostics = DiagnosticsServiceStub(self._channel)
        self._memories = MemoryServiceStub(self._channel)
        self._knowledge = KnowledgeServiceStub(self._channel)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._finishing:  # answered streams whose status is still on its way: let them end
            ending = [asyncio.ensure_future(call.code()) for call in self._finishing]
            await asyncio.wait(ending, timeout=FINISH_SECONDS)
        if self._owns_channel:
            await self._channel.close(None)

    async def _call(self, rpc: grpc.aio.UnaryUnaryMultiCallable[Req, Resp], request: Req) -> Resp:
        try:
            return await rpc(request, timeout=self._timeout, metadata=self._metadata)
        except grpc.RpcError as error:
            raise from_rpc_error(error) from error

    async def _stream(
        self,
        rpc: grpc.aio.UnaryStreamMultiCallable[Req, Resp],
        request: Req,
        timeout: float | None,
        *,
        last: Callable[[Resp], bool],
    ) -> list[Resp]:
        """A server stream's responses up to the one `last` says ends it (the stream has
        nothing after it, by contract): the call is not waited on past that one, only kept
        until its status arrives. The timeout (default: the client's) covers them all."""
        call = rpc(request, timeout=self._timeout if timeout is None else timeout, metadata=self._metadata)
        responses: list[Resp] = []
        try:
            async for response in call:
                responses.append(response)
                if last(response):
                    self._finishing.add(call)
                    call.add_done_callback(self._finishing.discard)
                    break
        except grpc.RpcError as error:
            raise from_rpc_error(error) from error
        except BaseException:
            call.cancel()  # interrupted: stop the stream
            raise
        return responses

    # --- agents -------------------------------------------------------------------------

    async def create_agent(
        self,
        agent_id: str,
        *,
        system_prompt: str = "",
        model: str = "",
        token_encoding: str = "",
        memory_config: agent_pb2.MemoryConfig | None = None,
        display_name: str = "",
    ) -> agent_service_pb2.CreateAgentResponse:
        request = rq.create_agent(
            agent_id,
            system_prompt=system_prompt,
            model=model,
            token_encoding=token_encoding,
            memory_config=memory_config,
            display_name=display_name,
        )
        return await self._call(self._agents.CreateAgent, request)

    async def get_agent(self, agent_id: str) -> agent_service_pb2.GetAgentResponse:
        return await self._call(self._agents.GetAgent, rq.get_agent(agent_id))

    async def update_agent(
        self, agent: agent_pb2.Agent, update_mask: Sequence[str] = ()
    ) -> agent_service_pb2.UpdateAgentResponse:
        return await self._call(self._agents.UpdateAgent, rq.update_agent(agent, update_mask))

    async def list_agents(
        self, *, page_size: int = 0, page_token: str = ""
    ) -> agent_service_pb2.ListAgentsResponse:
        request = rq.list_agents(page_size=page_size, page_token=page_token)
        return await self._call(self._agents.ListAgents, request)

    async def iter_agents(self, *, page_size: int = 0) -> AsyncIterator[agent_pb2.Agent]:
        """Every agent of the tenant, by agent_id, fetching pages as needed."""
        fetch = partial(self._call, self._agents.ListAgents)
        async for page in apages(fetch, rq.list_agents(page_size=page_size)):
            for agent in page.agents:
                yield agent

    async def delete_agent(
        self, agent_id: str, *, erase_data: bool = False
    ) -> agent_service_pb2.DeleteAgentResponse:
        """Deletes the agent. One that holds data (its users' episodes or memories, its
        documents) is refused (FailedPrecondition, reason AGENT_HOLDS_DATA) unless
        `erase_data`: then each user's data is erased as `erase_user(agent_id=...)` does, and
        the receipt says what was removed."""
        return await self._call(self._agents.DeleteAgent, rq.delete_agent(agent_id, erase_data=erase_data))

    # --- episodes -----------------------------------------------------------------------

    async def open_episode(
        self,
        agent_id: str,
        user_id: str,
        *,
        episode_id: str = "",
        metadata: JsonObject | None = None,
        start_time: datetime | None = None,
    ) -> episode_service_pb2.OpenEpisodeResponse:
        request = rq.open_episode(
            agent_id, user_id, episode_id=episode_id, metadata=metadata, start_time=start_time
        )
        return await self._call(self._episodes.OpenEpisode, request)

    async def close_episode(
        self,
        episode_id: str,
        *,
        reason: CloseReasonLike = episode_pb2.CLOSE_REASON_USER_ENDED,
        note: str = "",
        end_time: datetime | None = None,
        wait_for_digest: bool = False,
    ) -> episode_service_pb2.CloseEpisodeResponse:
        """With `wait_for_digest` the server answers once the digest is READY or FAILED (at
        most until the call's deadline, or 30 s), so the episode can be recalled at once."""
        request = rq.close_episode(
            episode_id, reason=reason, note=note, end_time=end_time, wait_for_digest=wait_for_digest
        )
        return await self._call(self._episodes.CloseEpisode, request)

    async def get_episode(self, episode_id: str) -> episode_service_pb2.GetEpisodeResponse:
        return await self._call(self._episodes.GetEpisode, rq.get_episode(episode_id))

    async def list_episodes(
        self,
        *,
        agent_id: str = "",
        user_id: str = "",
        state: StateLike = episode_pb2.Episode.STATE_UNSPECIFIED,
        page_size: int = 0,
        page_token: str = "",
    ) -> episode_service_pb2.ListEpisodesResponse:
        request = rq.list_episodes(
            agent_id=agent_id, user_id=user_id, state=state, page_size=page_size, page_token=page_token
        )
        return await self._call(self._episodes.ListEpisodes, request)

    async def iter_episodes(
        self,
        *,
        agent_id: str = "",
        user_id: str = "",
        state: StateLike = episode_pb2.Episode.STATE_UNSPECIFIED,
        page_size: int = 0,
    ) -> AsyncIterator[episode_pb2.Episode]:
        """Every matching episode, newest first, fetching pages as needed."""
        request = rq.list_episodes(agent_id=agent_id, user_id=user_id, state=state, page_size=page_size)
        async for page in apages(partial(self._call, self._episodes.ListEpisodes), request):
            for episode in page.episodes:
                yield episode

    async def list_users(
        self, agent_id: str, *, page_size: int = 0, page_token: str = ""
    ) -> episode_service_pb2.ListUsersResponse:
        request = rq.list_users(agent_id, page_size=page_size, page_token=page_token)
        return await self._call(self._episodes.ListUsers, request)

    async def iter_users(
        self, agent_id: str, *, page_size: int = 0
    ) -> AsyncIterator[episode_service_pb2.UserSummary]:
        """Every user of the agent (with episodes or memories), by user_id, with their
        episode and memory counts and last activity, fetching pages as needed."""
        request = rq.list_users(agent_id, page_size=page_size)
        async for page in apages(partial(self._call, self._episodes.ListUsers), request):
            for user in page.users:
                yield user

    async def erase_user(self, user_id: str, *, agent_id: str = "") -> episode_service_pb2.EraseUserResponse:
        """Erases the user's episodes, messages, digests, memories and model calls (every agent's,
        or one agent's); the receipt says what was removed."""
        request = episode_service_pb2.EraseUserRequest(user_id=user_id, agent_id=agent_id)
        return await self._call(self._episodes.EraseUser, request)

    async def export_user(
        self, user_id: str, *, agent_id: str = "", timeout: float | None = None
    ) -> AsyncIterator[episode_service_pb2.ExportUserResponse]:
        """Everything held about the user, streamed: each part's records, then the manifest
        (parts, counts, sha256). `episodic export` writes the same stream to a file."""
        request = episode_service_pb2.ExportUserRequest(user_id=user_id, agent_id=agent_id)
        call = self._episodes.ExportUser(
            request, timeout=self._timeout if timeout is None else timeout, metadata=self._metadata
        )
        try:
            async for response in call:
                yield response
        except grpc.RpcError as error:
            raise from_rpc_error(error) from error
        finally:
            call.cancel()

    async def import_user(
        self,
        requests: AsyncIterator[ImportRequest] | Iterator[ImportRequest],
        *,
        timeout: float | None = None,
    ) -> episode_service_pb2.ImportUserResponse:
        """Loads an export: the manifest first, then each part's records, as ExportUser sent
        them (`episodic import` reads them from a file)."""
        try:
            return await self._episodes.ImportUser(
                requests, timeout=self._timeout if timeout is None else timeout, metadata=self._metadata
            )
        except grpc.RpcError as error:
            raise from_rpc_error(error) from error

    async def search_episodes(
        self,
        agent_id: str,
        user_id: str,
        query: str = "",
        *,
        mode: SearchModeLike = episode_service_pb2.SEARCH_MODE_HYBRID,
        top_k: int = 0,
        min_score: float | None = None,
        ended_after: datetime | None = None,
        ended_before: datetime | None = None,
    ) -> episode_service_pb2.SearchEpisodesResponse:
        request = rq.search_episodes(
            agent_id,
            user_id,
            query,
            mode=mode,
            top_k=top_k,
            min_score=min_score,
            ended_after=ended_after,
            ended_before=ended_before,
        )
        return await self._call(self._episodes.SearchEpisodes, request)

    # --- messages -----------------------------------------------------------------------

    async def add_message(
        self,
        episode_id: str,
        role: RoleLike,
        content: str = "",
        *,
        client_message_id: str = "",
        create_time: datetime | None = None,
        metadata: JsonObject | None = None,
        tool_calls: Sequence[episode_pb2.ToolCall] | None = None,
        tool_result: episode_pb2.ToolResult | None = None,
    ) -> episode_service_pb2.AddMessageResponse:
        request = rq.add_message(
            episode_id,
            role,
            content,
            client_message_id=client_message_id,
            create_time=create_time,
            metadata=metadata,
            tool_calls=tool_calls,
            tool_result=tool_result,
        )
        return await self._call(self._episodes.AddMessage, request)

    async def add_messages(
        self, episode_id: str, messages: Sequence[episode_pb2.MessageInput]
    ) -> episode_service_pb2.AddMessagesResponse:
        return await self._call(self._episodes.AddMessages, rq.add_messages(episode_id, messages))

    async def list_messages(
        self, episode_id: str, *, page_size: int = 0, page_token: str = ""
    ) -> episode_service_pb2.ListMessagesResponse:
        request = rq.list_messages(episode_id, page_size=page_size, page_token=page_token)
        return await self._call(self._episodes.ListMessages, request)

    async def iter_messages(
        self, episode_id: str, *, page_size: int = 0
    ) -> AsyncIterator[episode_pb2.Message]:
        """The whole log, newest (highest seq) first, fetching pages as needed."""
        fetch = partial(self._call, self._episodes.ListMessages)
        async for page in apages(fetch, rq.list_messages(episode_id, page_size=page_size)):
            for message in page.messages:
                yield message

    # --- live watching ------------------------------------------------------------------

    async def watch_episode(
        self, episode_id: str, *, after_seq: int | None = None, timeout: float | None = None
    ) -> AsyncIterator[episode_service_pb2.WatchEpisodeResponse]:
        """The episode's events as they happen (after_seq: replay the log after it first),
        until it closes; no deadline unless `timeout` is given. An error ends it: a watcher
        that fell behind gets ResourceExhausted and watches again with after_seq."""
        request = rq.watch_episode(episode_id, after_seq=after_seq)
        call = self._episodes.WatchEpisode(request, timeout=timeout, metadata=self._metadata)
        try:
            async for response in call:
                yield response
        except grpc.RpcError as error:
            raise from_rpc_error(error) from error
        finally:  # a no-op once the stream has ended; stops it if the caller stopped reading
            call.cancel()

    async def push_assistant_delta(
        self, episode_id: str, draft_id: str, offset: int, text: str
    ) -> episode_service_pb2.PushAssistantDeltaResponse:
        """Adds `text` to the reply in progress `draft_id`; offset: characters already pushed."""
        request = rq.push_assistant_delta(episode_id, draft_id, offset, text)
        return await self._call(self._episodes.PushAssistantDelta, request)

    async def finalize_assistant_message(
        self,
        episode_id: str,
        draft_id: str,
        *,
        length: int | None = None,
        metadata: JsonObject | None = None,
        tool_calls: Sequence[episode_pb2.ToolCall] | None = None,
    ) -> episode_service_pb2.FinalizeAssistantMessageResponse:
        request = rq.finalize_assistant_message(
            episode_id, draft_id, length=length, metadata=metadata, tool_calls=tool_calls
        )
        return await self._call(self._episodes.FinalizeAssistantMessage, request)

    async def retract_message(self, episode_id: str, seq: int) -> episode_service_pb2.RetractMessageResponse:
        """Takes message `seq` of an open episode back: it stays in the log (with retract_time)
        and leaves every projection. FAILED_PRECONDITION once a summary covers it, or for an
        assistant message whose tool results are not retracted."""
        request = episode_service_pb2.RetractMessageRequest(episode_id=episode_id, seq=seq)
        return await self._call(self._episodes.RetractMessage, request)

    # --- context ------------------------------------------------------------------------

    async def build_context(
        self,
        episode_id: str,
        *,
        user_message: str = "",
        append_user_message: bool = False,
        client_message_id: str = "",
        system_prompt: str | None = None,
        memory_config: agent_pb2.MemoryConfig | None = None,
        model: str = "",
        recall_query: str = "",
        request_id: str = "",
        knowledge: Sequence[knowledge_pb2.KnowledgeItem] = (),
        timeout: float | None = None,
        wait_for_record: bool = False,
    ) -> BuiltContext:
        """Returns the whole messages and the report, as soon as the report arrives.
        `knowledge`: items retrieved elsewhere (`episodic_client.knowledge_item(text, ...)`),
        rendered in the "[Knowledge]" section; `report.knowledge` says what became of each.
        `record_pending`: the model call's record was still being committed (the appended
        user message is durable either way); `get_model_call` waits for it.
        `wait_for_record`: return only once the record is durable (raises if it failed)."""
        request = rq.build_context(
            episode_id,
            user_message=user_message,
            append_user_message=append_user_message,
            client_message_id=client_message_id,
            system_prompt=system_prompt,
            memory_config=memory_config,
            model=model,
            recall_query=recall_query,
            request_id=request_id,
            knowledge=knowledge,
        )
        last = _has_durable_report if wait_for_record else _has_report
        frames = await self._stream(self._context.BuildContext, request, timeout, last=last)
        return join_frames(frames)

    async def get_model_call(self, model_call_id: str) -> context_service_pb2.GetModelCallResponse:
        return await self._call(self._context.GetModelCall, rq.get_model_call(model_call_id))

    async def list_model_calls(
        self, episode_id: str, *, page_size: int = 0, page_token: str = ""
    ) -> context_service_pb2.ListModelCallsResponse:
        request = rq.list_model_calls(episode_id, page_size=page_size, page_token=page_token)
        return await self._call(self._context.ListModelCalls, request)

    async def iter_model_calls(
        self, episode_id: str, *, page_size: int = 0
    ) -> AsyncIterator[context_pb2.ModelCall]:
        """Every model call of the episode, newest first, fetching pages as needed."""
        fetch = partial(self._call, self._context.ListModelCalls)
        async for page in apages(fetch, rq.list_model_calls(episode_id, page_size=page_size)):
            for model_call in page.model_calls:
                yield model_call

    async def record_model_reply(
        self,
        model_call_id: str,
        *,
        input_tokens: int,
        output_tokens: int,
        latency: timedelta | None = None,
        assistant_message_seq: int = 0,
    ) -> context_service_pb2.RecordModelReplyResponse:
        request = rq.record_model_reply(
            model_call_id,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            latency=latency,
            assistant_message_seq=assistant_message_seq,
        )
        return await self._call(self._context.RecordModelReply, request)

    # --- memories -----------------------------------------------------------------------

    async def create_memories(
        self,
        memories: Sequence[memory_service_pb2.MemoryInput],
        *,
        agent_id: str = "",
        user_id: str = "",
        episode_id: str = "",
        placement: str | int = 0,
        keep_separate: bool = False,
    ) -> memory_service_pb2.CreateMemoriesResponse:
        """Build each memory with `episodic_client.memory_input(text, kind, ...)`."""
        request = mq.create_memories(
            memories,
            agent_id=agent_id,
            user_id=user_id,
            episode_id=episode_id,
            placement=placement,
            keep_separate=keep_separate,
        )
        return await self._call(self._memories.CreateMemories, request)

    async def get_memory(self, memory_id: str) -> memory_service_pb2.GetMemoryResponse:
        return await self._call(
            self._memories.GetMemory, memory_service_pb2.GetMemoryRequest(memory_id=memory_id)
        )

    async def list_memories(
        self,
        agent_id: str,
        user_id: str,
        *,
        state: MemoryStateLike = 0,
        episode_id: str = "",
        include_superseded: bool = False,
        topics: Sequence[str] = (),
        page_size: int = 0,
        page_token: str = "",
    ) -> memory_service_pb2.ListMemoriesResponse:
        """`state`: only "pending" or "promoted" memories (0, the default: both);
        `include_superseded`: also memories a newer one replaced; `topics`: only memories
        with at least one of them."""
        request = mq.list_memories(
            agent_id,
            user_id,
            state=state,
            episode_id=episode_id,
            include_superseded=include_superseded,
            topics=topics,
            page_size=page_size,
            page_token=page_token,
        )
        return await self._call(self._memories.ListMemories, request)

    async def update_memory(
        self, memory: memory_pb2.Memory, update_mask: Sequence[str]
    ) -> memory_service_pb2.UpdateMemoryResponse:
        return await self._call(self._memories.UpdateMemory, mq.update_memory(memory, update_mask))

    async def delete_memory(self, memory_id: str) -> memory_service_pb2.DeleteMemoryResponse:
        request = memory_service_pb2.DeleteMemoryRequest(memory_id=memory_id)
        return await self._call(self._memories.DeleteMemory, request)

    async def search_memories(
        self, agent_id: str, user_id: str, query: str = "", **options: Any
    ) -> memory_service_pb2.SearchMemoriesResponse:
        """Options: mode, top_k, min_score, kinds, topics, entities, after, before, episode_id,
        include_superseded."""
        request = mq.search_memories(agent_id, user_id, query, **options)
        return await self._call(self._memories.SearchMemories, request)

    async def get_session_data(self, episode_id: str) -> memory_service_pb2.GetSessionDataResponse:
        request = memory_service_pb2.GetSessionDataRequest(episode_id=episode_id)
        return await self._call(self._memories.GetSessionData, request)

    async def update_session_data(
        self, episode_id: str, data: JsonObject, *, etag: str = "", ttl: timedelta | None = None
    ) -> memory_service_pb2.UpdateSessionDataResponse:
        request = mq.update_session_data(episode_id, data, etag=etag, ttl=ttl)
        return await self._call(self._memories.UpdateSessionData, request)

    async def get_memory_tools(self) -> list[memory_service_pb2.MemoryTool]:
        """add_memory and search_memory; `MessageToDict(tool.definition)` is the OpenAI tool."""
        reply = await self._call(self._memories.GetMemoryTools, memory_service_pb2.GetMemoryToolsRequest())
        return list(reply.tools)

    async def call_memory_tool(self, episode_id: str, name: str, arguments: str) -> str:
        """Runs one tool call of the model (arguments as it wrote them); returns the JSON result."""
        request = memory_service_pb2.CallMemoryToolRequest(
            episode_id=episode_id, name=name, arguments=arguments
        )
        return (await self._call(self._memories.CallMemoryTool, request)).result

    # --- knowledge ----------------------------------------------------------------------

    async def create_documents(
        self, agent_id: str, documents: Sequence[knowledge_service_pb2.DocumentInput]
    ) -> knowledge_service_pb2.CreateDocumentsResponse:
        """Build each document with `episodic_client.document_input(document_id, text, ...)`;
        at most 100, all or none. Needs a key that may write knowledge."""
        return await self._call(self._knowledge.CreateDocuments, kq.create_documents(agent_id, documents))

    async def get_document(
        self, agent_id: str, document_id: str, *, include_chunks: bool = False
    ) -> knowledge_service_pb2.GetDocumentResponse:
        request = kq.get_document(agent_id, document_id, include_chunks=include_chunks)
        return await self._call(self._knowledge.GetDocument, request)

    async def list_documents(
        self,
        agent_id: str,
        *,
        metadata: Mapping[str, str] | None = None,
        page_size: int = 0,
        page_token: str = "",
    ) -> knowledge_service_pb2.ListDocumentsResponse:
        request = kq.list_documents(agent_id, metadata=metadata, page_size=page_size, page_token=page_token)
        return await self._call(self._knowledge.ListDocuments, request)

    async def iter_documents(
        self, agent_id: str, *, metadata: Mapping[str, str] | None = None, page_size: int = 0
    ) -> AsyncIterator[knowledge_pb2.Document]:
        """Every matching document of the agent (without its text), by document_id, fetching
        pages as needed."""
        request = kq.list_documents(agent_id, metadata=metadata, page_size=page_size)
        async for page in apages(partial(self._call, self._knowledge.ListDocuments), request):
            for document in page.documents:
                yield document

    async def update_document(
        self,
        agent_id: str,
        document_id: str,
        *,
        text: str | None = None,
        format: kq.FormatLike | None = None,
        title: str | None = None,
        uri: str | None = None,
        metadata: Mapping[str, str] | None = None,
        expire_time: datetime | kq.Unchanged | None = kq.UNCHANGED,
    ) -> knowledge_service_pb2.UpdateDocumentResponse:
        """Sets the fields given, leaving the others (None: unchanged; expire_time=None: never
        expires). A new text or format is cut into chunks and embedded again."""
        request = kq.update_document(
            agent_id,
            document_id,
            text=text,
            format=format,
            title=title,
            uri=uri,
            metadata=metadata,
            expire_time=expire_time,
        )
        return await self._call(self._knowledge.UpdateDocument, request)

    async def delete_document(
        self, agent_id: str, document_id: str
    ) -> knowledge_service_pb2.DeleteDocumentResponse:
        return await self._call(self._knowledge.DeleteDocument, kq.delete_document(agent_id, document_id))

    async def search_knowledge(
        self,
        agent_id: str,
        query: str = "",
        *,
        mode: SearchModeLike = "hybrid",
        top_k: int = 0,
        min_score: float | None = None,
        metadata: Mapping[str, str] | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
    ) -> knowledge_service_pb2.SearchKnowledgeResponse:
        """Chunks of the agent's documents, best first."""
        request = kq.search_knowledge(
            agent_id,
            query,
            mode=mode,
            top_k=top_k,
            min_score=min_score,
            metadata=metadata,
            updated_after=updated_after,
            updated_before=updated_before,
        )
        return await self._call(self._knowledge.SearchKnowledge, request)

    # --- diagnostics --------------------------------------------------------------------

    async def echo(self, payload: bytes) -> diagnostics_service_pb2.EchoResponse:
        return await self._call(self._diagnostics.Echo, rq.echo(payload))

    async def check_index(self, agent_id: str = "") -> diagnostics_service_pb2.CheckIndexResponse:
        """Whether the vector indexes hold exactly what SQL holds (the tenant's, or one agent's)."""
        request = diagnostics_service_pb2.CheckIndexRequest(agent_id=agent_id)
        return await self._call(self._diagnostics.CheckIndex, request)


def _has_report(frame: context_service_pb2.BuildContextResponse) -> bool:
    """The report comes on BuildContext's last frame."""
    return frame.HasField("report")


def _has_durable_report(frame: context_service_pb2.BuildContextResponse) -> bool:
    """A report of a record still pending is read past: the stream's status says whether it
    was stored."""
    return frame.HasField("report") and not frame.record_pending


def _open_channel(
    target: str, credentials: grpc.ChannelCredentials | None, options: list[tuple[str, Any]]
) -> grpc.aio.Channel:
    if credentials is None:
        return grpc.aio.insecure_channel(target, options)
    return grpc.aio.secure_channel(target, credentials, options)
