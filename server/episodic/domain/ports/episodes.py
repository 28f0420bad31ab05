"""The log's stores: agents, episodes and their messages, what a turn reads, drafts, digests and retention."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from episodic.domain.agent_deletion import AgentHoldings, AgentRemoved
from episodic.domain.changes import Declared, Recorded
from episodic.domain.context import ModelCall, ModelReply, Summary
from episodic.domain.drafts import DraftLimits, Push, Pushed
from episodic.domain.episodes import OpenRequest
from episodic.domain.inspection import UserSummary
from episodic.domain.log import PreparedMessage
from episodic.domain.memories import Memory
from episodic.domain.model import Agent, CloseReason, Episode, EpisodeState, Message
from episodic.domain.retention import SoftDeleted
from episodic.domain.watch import LiveRead


@dataclass(frozen=True, slots=True)
class EpisodeFilter:
    """`agent_ids`, when given, restricts to those agents (a key's allowed set)."""

    agent_id: str = ""
    user_id: str = ""
    state: EpisodeState | None = None
    agent_ids: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class EpisodeCursor:
    """Keyset position in the newest-first episode listing."""

    started_at: datetime
    episode_id: str


class ReadBatch(Protocol):
    """One request's reads that share one trip to the database: the store's, opaque here. A
    read given it (`batch=`) joins the trip, in a transaction of its own; a read not given it
    is its own trip. Nothing else changes how a read runs."""


class ReadsTogether(Protocol):
    """Lets one request's concurrent reads share one trip to the database."""

    def together(self) -> AbstractContextManager[ReadBatch]:
        """A batch for the block: the reads given it in one turn of the event loop run on one
        connection (each in its own transaction), never with another request's."""
        ...


class AgentStore(Protocol):
    async def create_agent(self, agent: Agent) -> Agent: ...

    async def get_agent(self, tenant_id: str, agent_id: str) -> Agent: ...

    async def update_agent(
        self, tenant_id: str, agent_id: str, change: Callable[[Agent], Agent], declared: Declared[Agent]
    ) -> Recorded[Agent]: ...

    async def list_agents(
        self, tenant_id: str, after: str | None, limit: int, only: frozenset[str] | None = None
    ) -> list[Agent]:
        """`only`, when given, restricts the listing to those agent ids."""
        ...

    async def holdings(self, tenant_id: str, agent_id: str) -> AgentHoldings:
        """What the agent holds (see AgentHoldings); all zero for an agent that does not exist."""
        ...

    async def user_ids(self, tenant_id: str, agent_id: str, after: str | None, limit: int) -> list[str]:
        """The users the agent has episodes (soft-deleted ones too) or memories of, by id,
        after `after`: whose data DeleteAgent erases."""
        ...

    async def delete_agent(
        self, tenant_id: str, agent_id: str, declared: Declared[AgentRemoved]
    ) -> Recorded[AgentRemoved]:
        """The agent row with its documents (and their chunks), in one transaction. NotFound
        when it does not exist; FailedPrecondition (AGENT_HOLDS_DATA) when episodes or
        memories of it are left (written since they were erased)."""
        ...


class EpisodeStore(Protocol):
    async def open_episode(
        self, tenant_id: str, request: OpenRequest, token_encoding: str
    ) -> tuple[Episode, bool]: ...

    async def append(
        self, tenant_id: str, episode_id: str, batch: Sequence[PreparedMessage]
    ) -> list[tuple[Message, bool]]: ...

    async def append_turn(
        self, tenant_id: str, episode_id: str, message: PreparedMessage, with_pending: bool
    ) -> tuple[Message, bool, list[Memory], Awaitable[None]]:
        """A BuildContext turn's user message: (stored, replayed, the episode's PENDING
        memories oldest first as of the append's transaction ([] unless `with_pending`), its
        commit). It returns once the append's statements ran, before its COMMIT: the turn
        goes on while the commit is made durable, and awaits the last item before it tells
        anyone of the message (if that fails, the message is not in the log)."""
        ...

    async def close_episode(
        self,
        tenant_id: str,
        episode_id: str,
        reason: CloseReason,
        note: str,
        ended_at: datetime,
        declared: Declared[Episode],
    ) -> Recorded[Episode]: ...

    async def retract_message(
        self, tenant_id: str, episode_id: str, seq: int, declared: Declared[Message]
    ) -> Recorded[Message]:
        """`episodes.retract` under the episode's lock, with the latest summary's span end and
        the unretracted results of the message's tool calls."""
        ...

    async def get_episode(self, tenant_id: str, episode_id: str) -> Episode: ...

    async def list_episodes(
        self, tenant_id: str, where: EpisodeFilter, after: EpisodeCursor | None, limit: int
    ) -> list[Episode]: ...

    async def list_messages(
        self, tenant_id: str, episode_id: str, before_seq: int | None, limit: int
    ) -> list[Message]: ...

    async def idle_episodes(self, now: datetime, limit: int) -> list[Episode]: ...


class RecentlyActive(Protocol):
    """The open episodes written to last, for a restarted replica to warm their working sets."""

    async def recently_active(self, limit: int) -> list[tuple[str, str]]:
        """(tenant, episode) of up to `limit` open episodes, most recently active first."""
        ...


class UserDirectory(Protocol):
    """The users an agent has episodes or long-term memories of (ListUsers, and the
    inspector's navigation)."""

    async def list_users(
        self, tenant_id: str, agent_id: str, after_user_id: str | None, limit: int
    ) -> list[UserSummary]:
        """By user id; episodes soft-deleted by retention are not counted, nor superseded or
        expired memories. A user with only such rows is not listed."""
        ...


@dataclass(frozen=True, slots=True)
class ContextSources:
    """What one read brings for a working set: the episode and its agent, a summary newer
    than the one already known (if any), and the messages after the known seq, oldest
    first. `complete` False: there were more than an allowance of them, and only the
    newest that pass it were read (see reducers.least_tokens); older ones stay in SQL."""

    episode: Episode
    agent: Agent
    summary: Summary | None
    messages: list[Message]
    complete: bool = True
    # a cold read's spoken messages before the tail (the newest MAX_MESSAGES), oldest first
    earlier: list[Message] = field(default_factory=list)


class SpokenMessages(Protocol):
    async def spoken(
        self, tenant_id: str, episode_ids: Sequence[str], per_episode: int
    ) -> dict[str, list[Message]]:
        """The first `per_episode` user and assistant messages of each of these (visible)
        episodes, oldest first: what recall's passages and excerpts are chosen from. Only
        episode id, seq, role, content and time are filled in."""
        ...


class ContextStore(SpokenMessages, Protocol):
    async def sources(
        self, tenant_id: str, episode_id: str, known_summary_to: int, after_seq: int | None, allowance: int
    ) -> ContextSources: ...

    async def save_call(self, call: ModelCall, summary: Summary | None) -> tuple[ModelCall, bool]: ...

    async def save_summary(self, summary: Summary) -> None: ...

    async def call_for_request(
        self, tenant_id: str, episode_id: str, request_id: str
    ) -> ModelCall | None: ...

    async def get_call(self, tenant_id: str, model_call_id: str) -> ModelCall: ...

    async def list_calls(
        self, tenant_id: str, episode_id: str, before: tuple[datetime, str] | None, limit: int
    ) -> list[ModelCall]: ...

    async def record_reply(self, tenant_id: str, model_call_id: str, reply: ModelReply) -> ModelCall: ...


class RetentionStore(Protocol):
    async def soft_delete_due(
        self, now: datetime, limit: int, declared: Declared[list[SoftDeleted]]
    ) -> Recorded[list[SoftDeleted]]: ...

    async def purge_due(self, deleted_before: datetime, limit: int) -> int: ...


class DraftStore(Protocol):
    """Assistant replies in progress (drafts: never the log), and the reads that watch an
    episode live. Offsets and lengths count Unicode code points."""

    async def push(
        self, tenant_id: str, episode_id: str, push: Push, now: datetime, limits: DraftLimits
    ) -> Pushed:
        """Plans the push (domain/drafts.py) under the episode's lock and writes it. NotFound
        for a missing episode; FailedPrecondition when it is closed or the draft finalized."""
        ...

    async def text_of(self, tenant_id: str, episode_id: str, draft_id: str) -> str | None: ...

    async def finalized(self, tenant_id: str, episode_id: str, draft_id: str) -> Message | None:
        """The message of the log whose client_message_id is the draft id, if any."""
        ...

    async def remove(self, tenant_id: str, episode_id: str, draft_id: str) -> None: ...

    async def discard_all(self, tenant_id: str, episode_id: str) -> None: ...

    async def read_live(
        self, tenant_id: str, episode_id: str, after_seq: int, known: dict[str, int], limit: int
    ) -> LiveRead:
        """One read, in LiveRead's order; a draft's text only from the length in `known`
        (all of it when unknown or shorter). NotFound once the episode is gone."""
        ...

    async def messages_after(
        self, tenant_id: str, episode_id: str, after_seq: int, through_seq: int, limit: int
    ) -> list[Message]:
        """Oldest first: the replay of a joining watcher, a page at a time."""
        ...
