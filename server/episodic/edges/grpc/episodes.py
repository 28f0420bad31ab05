"""EpisodeService servicer: proto -> domain call -> proto. No decisions here."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, TypeAlias

import grpc

from episodic.domain.model import CloseReason, Episode, Message, Page
from episodic.domain.ports.episodes import EpisodeFilter
from episodic.edges.grpc import convert as c
from episodic.edges.grpc import transfer, watch
from episodic.edges.grpc.fitting import fitted_page, require_fits
from episodic.edges.grpc.interceptors import current_caller
from episodic.service.episodes import EpisodeService
from episodic.service.erasure import EraseService
from episodic.service.recall import RecallService
from episodic.service.transfer import TransferService
from episodic.service.users import UserService
from episodic.service.watch import WatchService
from episodic.v1 import episode_service_pb2 as pb
from episodic.v1 import episode_service_pb2_grpc as pb_grpc

Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"


class EpisodeServicer(pb_grpc.EpisodeServiceServicer):
    def __init__(
        self,
        service: EpisodeService,
        recall: RecallService,
        erasure: EraseService,
        max_send_message_bytes: int,
        watch: WatchService,
        transfer: TransferService | None,
        users: UserService,
    ) -> None:
        self._service = service
        self._recall = recall
        self._erasure = erasure
        self._max_send_bytes = max_send_message_bytes
        self._watch = watch
        self._transfer = transfer
        self._users = users

    async def OpenEpisode(self, request: pb.OpenEpisodeRequest, context: Context) -> pb.OpenEpisodeResponse:
        episode, created = await self._service.open_episode(
            current_caller(),
            agent_id=request.agent_id,
            user_id=request.user_id,
            episode_id=request.episode_id,
            metadata=c.struct_in(request.metadata, "metadata"),
            started_at=c.optional_time_in(request, "start_time", "start_time"),
        )
        return pb.OpenEpisodeResponse(episode=c.episode_out(episode), created=created)

    async def AddMessage(self, request: pb.AddMessageRequest, context: Context) -> pb.AddMessageResponse:
        message = c.new_message_in(request.message, "message")
        stored, replayed = await self._service.add_message(current_caller(), request.episode_id, message)
        return pb.AddMessageResponse(message=c.message_out(stored), deduplicated=replayed)

    async def AddMessages(self, request: pb.AddMessagesRequest, context: Context) -> pb.AddMessagesResponse:
        messages = [c.new_message_in(m, f"messages[{i}]") for i, m in enumerate(request.messages)]
        stored = await self._service.add_messages(current_caller(), request.episode_id, messages)
        return pb.AddMessagesResponse(messages=[c.message_out(m) for m in stored])

    async def CloseEpisode(
        self, request: pb.CloseEpisodeRequest, context: Context
    ) -> pb.CloseEpisodeResponse:
        reason = c.enum_in(c.CLOSE_REASONS, request.reason, "reason", required=False)
        episode = await self._service.close_episode(
            current_caller(),
            request.episode_id,
            reason=reason or CloseReason.USER_ENDED,
            note=request.note,
            ended_at=c.optional_time_in(request, "end_time", "end_time"),
            wait_for_digest=_digest_wait(request.wait_for_digest, context),
        )
        return pb.CloseEpisodeResponse(episode=c.episode_out(episode))

    async def GetEpisode(self, request: pb.GetEpisodeRequest, context: Context) -> pb.GetEpisodeResponse:
        episode = await self._service.get_episode(current_caller(), request.episode_id)
        return require_fits(
            pb.GetEpisodeResponse(episode=c.episode_out(episode)), self._max_send_bytes, _RAISE
        )

    async def ListEpisodes(
        self, request: pb.ListEpisodesRequest, context: Context
    ) -> pb.ListEpisodesResponse:
        where = EpisodeFilter(
            agent_id=request.agent_id,
            user_id=request.user_id,
            state=c.enum_in(c.STATES, request.state, "state", required=False),
        )
        caller = current_caller()

        async def read(page_size: int) -> Page[Episode]:
            return await self._service.list_episodes(caller, where, page_size, request.page_token)

        return await fitted_page(
            read, _episodes_page, lambda r: r.episodes, request.page_size, self._max_send_bytes, "episode"
        )

    async def ListMessages(
        self, request: pb.ListMessagesRequest, context: Context
    ) -> pb.ListMessagesResponse:
        caller = current_caller()

        async def read(page_size: int) -> Page[Message]:
            return await self._service.list_messages(
                caller, request.episode_id, page_size, request.page_token
            )

        return await fitted_page(
            read, _messages_page, lambda r: r.messages, request.page_size, self._max_send_bytes, "message"
        )

    async def SearchEpisodes(
        self, request: pb.SearchEpisodesRequest, context: Context
    ) -> pb.SearchEpisodesResponse:
        result = await self._recall.search(current_caller(), c.search_in(request))
        response = pb.SearchEpisodesResponse(
            snippets=[c.snippet_out(s) for s in result.snippets], pending_digests=result.pending_digests
        )
        return require_fits(response, self._max_send_bytes, "ask for a smaller top_k, or raise the limit")

    async def ListUsers(self, request: pb.ListUsersRequest, context: Context) -> pb.ListUsersResponse:
        page = await self._users.list_users(
            current_caller(), request.agent_id, request.page_size, request.page_token
        )
        return pb.ListUsersResponse(
            users=[c.user_summary_out(u) for u in page.items], next_page_token=page.next_token
        )

    async def EraseUser(self, request: pb.EraseUserRequest, context: Context) -> pb.EraseUserResponse:
        receipt = await self._erasure.erase_user(current_caller(), request.user_id, request.agent_id)
        return pb.EraseUserResponse(receipt=c.receipt_out(receipt))

    async def WatchEpisode(
        self, request: pb.WatchEpisodeRequest, context: Context
    ) -> AsyncIterator[pb.WatchEpisodeResponse]:
        async for response in watch.watch_episode(self._watch, request, context):
            yield response

    async def PushAssistantDelta(
        self, request: pb.PushAssistantDeltaRequest, context: Context
    ) -> pb.PushAssistantDeltaResponse:
        return await watch.push_delta(self._watch, request)

    async def FinalizeAssistantMessage(
        self, request: pb.FinalizeAssistantMessageRequest, context: Context
    ) -> pb.FinalizeAssistantMessageResponse:
        return await watch.finalize(self._watch, request)

    async def RetractMessage(
        self, request: pb.RetractMessageRequest, context: Context
    ) -> pb.RetractMessageResponse:
        retracted = await self._service.retract_message(current_caller(), request.episode_id, request.seq)
        return pb.RetractMessageResponse(message=c.message_out(retracted))

    async def ExportUser(
        self, request: pb.ExportUserRequest, context: Context
    ) -> AsyncIterator[pb.ExportUserResponse]:
        async for response in transfer.export_user(transfer.required(self._transfer), request):
            yield response

    async def ImportUser(
        self, request_iterator: AsyncIterator[pb.ImportUserRequest], context: Context
    ) -> pb.ImportUserResponse:
        return await transfer.import_user(transfer.required(self._transfer), request_iterator)


_RAISE = "raise the limit"


def _episodes_page(page: Page[Episode]) -> pb.ListEpisodesResponse:
    return pb.ListEpisodesResponse(
        episodes=[c.episode_out(e) for e in page.items], next_page_token=page.next_token
    )


def _messages_page(page: Page[Message]) -> pb.ListMessagesResponse:
    return pb.ListMessagesResponse(
        messages=[c.message_out(m) for m in page.items], next_page_token=page.next_token
    )


MAX_DIGEST_WAIT_SECONDS = 30.0


def _digest_wait(wanted: bool, context: Context) -> float:
    """The proto's rule: wait at most until the call's deadline (less a margin), or 30 s."""
    if not wanted:
        return 0.0
    remaining = context.time_remaining()
    return (
        MAX_DIGEST_WAIT_SECONDS
        if remaining is None
        else max(0.0, min(MAX_DIGEST_WAIT_SECONDS, remaining - 0.5))
    )
