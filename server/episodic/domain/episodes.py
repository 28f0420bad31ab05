"""Rules of an episode's lifecycle: idempotent open, idempotent close, retraction."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from episodic.domain.model import CloseReason, Episode, EpisodeState, JsonObject, Message
from episodic.errors import AlreadyExists, FailedPrecondition, InvalidArgument


@dataclass(frozen=True, slots=True)
class OpenRequest:
    agent_id: str
    user_id: str
    episode_id: str
    metadata: JsonObject
    started_at: datetime


def new_episode(
    tenant_id: str, request: OpenRequest, token_encoding: str, *, opened_at: datetime | None = None
) -> Episode:
    """Opening is activity: an episode opened with a start long past (an import) is not idle
    from birth, so the idle reaper cannot close it before its first message."""
    active = request.started_at if opened_at is None else max(request.started_at, opened_at)
    return Episode(
        tenant_id=tenant_id,
        episode_id=request.episode_id,
        agent_id=request.agent_id,
        user_id=request.user_id,
        state=EpisodeState.OPEN,
        token_encoding=token_encoding,
        started_at=request.started_at,
        last_activity_at=active,
        metadata=request.metadata,
    )


def reopen(existing: Episode, request: OpenRequest) -> Episode:
    """Opening an existing id is a retry only if it is the same conversation and still open."""
    if (existing.agent_id, existing.user_id) != (request.agent_id, request.user_id):
        raise AlreadyExists(
            f"episode {existing.episode_id!r} already exists for another agent or user",
            reason="EPISODE_ID_TAKEN",
        )
    if existing.state is not EpisodeState.OPEN:
        raise FailedPrecondition(
            f"episode {existing.episode_id!r} is closed and cannot be reopened",
            reason="EPISODE_CLOSED",
        )
    return existing


def close(episode: Episode, reason: CloseReason, note: str, ended_at: datetime) -> Episode:
    """Closing is idempotent: a closed episode keeps its original reason and end time."""
    if episode.state is EpisodeState.CLOSED:
        return episode
    if ended_at < episode.started_at:
        raise InvalidArgument.of("end_time", "is before the episode's start_time")
    return dataclasses.replace(
        episode,
        state=EpisodeState.CLOSED,
        ended_at=ended_at,
        close_reason=reason,
        close_note=note,
    )


def retract(
    episode: Episode, message: Message, summarized_through: int, live_results: Sequence[int], now: datetime
) -> Message:
    """A retraction ("undo") keeps the message in the log and takes it out of every
    projection. Only where no projection has folded it in yet: after the latest compaction
    summary (which may already tell it), and not under tool results still shown (they would
    answer a call the model no longer sees). Idempotent."""
    if message.retracted_at is not None:
        return message
    if episode.state is EpisodeState.CLOSED:
        raise FailedPrecondition(
            f"episode {episode.episode_id!r} is closed: its log is final", reason="EPISODE_CLOSED"
        )
    if message.seq <= summarized_through:
        raise FailedPrecondition(
            f"message {message.seq} is covered by a compaction summary (through message "
            f"{summarized_through}); only later messages can be retracted",
            reason="MESSAGE_SUMMARIZED",
        )
    if live_results:
        shown = ", ".join(str(seq) for seq in live_results)
        raise FailedPrecondition(
            f"message {message.seq} issued tool calls whose results (messages {shown}) are not "
            "retracted: retract them first",
            reason="TOOL_RESULTS_NOT_RETRACTED",
        )
    return dataclasses.replace(message, retracted_at=now)
