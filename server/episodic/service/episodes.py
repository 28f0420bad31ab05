"""Episode use cases: open, append, close, read, list, scrollback."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Protocol

from episodic.domain.access import may_use, require_agent, require_visible
from episodic.domain.changes import MessageRetracted, ScopeChanged
from episodic.domain.episode_ids import agent_scoped_id
from episodic.domain.episodes import OpenRequest
from episodic.domain.log import PreparedMessage, countable_text
from episodic.domain.memories import Memory
from episodic.domain.model import (
    Caller,
    CloseReason,
    Episode,
    JsonObject,
    Message,
    NewMessage,
    Page,
)
from episodic.domain.paging import JsonScalar, decode_token, page_of, read_id, read_seq, read_time
from episodic.domain.ports.changes import ChangeOwner
from episodic.domain.ports.clock import Clock, IdFactory
from episodic.domain.ports.digests import DigestWaiter
from episodic.domain.ports.episodes import AgentStore, EpisodeCursor, EpisodeFilter, EpisodeStore
from episodic.domain.ports.models import TokenCounter
from episodic.domain.recall import Scope
from episodic.domain.validation import (
    Limits,
    Violations,
    check_batch,
    check_id,
    check_json,
    check_new_message,
    check_text,
    resolve_page_size,
)
from episodic.errors import NotFound
from episodic.service.privacy import PiiGuard, redact_message, redact_object
from episodic.state.fixed_facts import FixedFacts, FixedFactsCache
from episodic.telemetry.tracing import (
    CREATE_MEMORY,
    GEN_AI_CONVERSATION_ID,
    GEN_AI_MEMORY_RECORD_COUNT,
    GEN_AI_MEMORY_RECORD_ID,
    GEN_AI_OPERATION_NAME,
    AttributeValue,
    Tracing,
    no_tracing,
)

# Above this many characters tokenizing moves off the event loop.
_INLINE_TOKENIZE_CHARS = 16_384


class LiveLog(Protocol):
    """Who watches episodes live (service/watch.py), told after each commit."""

    def appended(self, tenant_id: str, episode_id: str) -> None: ...

    async def closed(self, tenant_id: str, episode_id: str) -> None: ...


class NoWatchers:
    """No live watching attached (tools that only need the log)."""

    def appended(self, tenant_id: str, episode_id: str) -> None:
        return None

    async def closed(self, tenant_id: str, episode_id: str) -> None:
        return None


@dataclass(slots=True, kw_only=True)
class EpisodeService:
    episodes: EpisodeStore
    agents: AgentStore
    tokens: TokenCounter
    limits: Limits
    clock: Clock
    new_id: IdFactory
    changes: ChangeOwner  # a close adds a pending digest to its scope
    digests: DigestWaiter
    pii: PiiGuard
    fixed_facts: FixedFactsCache  # registered with the change owner, which drops removed episodes
    tracing: Tracing = field(default_factory=no_tracing)
    live: LiveLog = field(default_factory=NoWatchers)

    async def open_episode(
        self,
        caller: Caller,
        *,
        agent_id: str,
        user_id: str,
        episode_id: str = "",
        metadata: JsonObject | None = None,
        started_at: datetime | None = None,
    ) -> tuple[Episode, bool]:
        v = Violations()
        check_id(v, "agent_id", agent_id)
        check_id(v, "user_id", user_id)
        check_id(v, "episode_id", episode_id, required=False)
        check_json(v, "metadata", metadata or {}, self.limits)
        v.raise_if_any()
        require_agent(caller, agent_id)
        agent = await self.agents.get_agent(caller.tenant_id, agent_id)
        if self.pii.redacts(caller.tenant_id, agent.memory.pii_policy):
            metadata = redact_object(metadata or {})
        episode_id = await self._id_to_open(caller, agent_id, episode_id)
        request = OpenRequest(agent_id, user_id, episode_id, metadata or {}, started_at or self.clock())
        return await self.episodes.open_episode(caller.tenant_id, request, agent.token_encoding)

    async def _id_to_open(self, caller: Caller, agent_id: str, requested: str) -> str:
        """A new id, or the one named; for a restricted key, the one named only when it is
        an episode of one of its agents, else that name in the agent's own id space."""
        if not requested:
            return self.new_id()
        if caller.agents is None or await self._held_by_allowed_agent(caller, requested):
            return requested
        return agent_scoped_id(agent_id, requested)

    async def _held_by_allowed_agent(self, caller: Caller, episode_id: str) -> bool:
        try:
            facts = await self._facts_of(caller.tenant_id, episode_id)
        except NotFound:
            return False
        return may_use(caller, facts.agent_id)

    async def add_message(self, caller: Caller, episode_id: str, message: NewMessage) -> tuple[Message, bool]:
        v = Violations()
        check_id(v, "episode_id", episode_id)
        check_new_message(v, "message", message, self.limits)
        v.raise_if_any()
        (result,) = await self._append(caller, episode_id, [message], "message")
        return result

    async def add_messages(
        self, caller: Caller, episode_id: str, messages: Sequence[NewMessage]
    ) -> list[Message]:
        v = Violations()
        check_id(v, "episode_id", episode_id)
        check_batch(v, "messages", messages, self.limits)
        v.raise_if_any()
        stored = await self._append(caller, episode_id, messages, "messages[{}]")
        return [message for message, _ in stored]

    async def close_episode(
        self,
        caller: Caller,
        episode_id: str,
        *,
        reason: CloseReason = CloseReason.USER_ENDED,
        note: str = "",
        ended_at: datetime | None = None,
        wait_for_digest: float = 0.0,
    ) -> Episode:
        """`wait_for_digest` > 0 waits up to that many seconds for the digest to settle."""
        v = Violations()
        check_id(v, "episode_id", episode_id)
        check_text(v, "note", note, self.limits.max_text_field_bytes)
        if reason is CloseReason.IDLE_TIMEOUT:
            v.add("reason", "CLOSE_REASON_IDLE_TIMEOUT is reserved for the server's idle reaper")
        v.raise_if_any()
        await self.ensure_visible(caller, episode_id)
        closed = await self.close_as(caller.tenant_id, episode_id, reason, note, ended_at)
        if wait_for_digest <= 0:
            return closed
        digest = await self.digests.wait_settled(caller.tenant_id, episode_id, wait_for_digest)
        return dataclasses.replace(closed, digest=digest or closed.digest)

    async def close_as(
        self, tenant_id: str, episode_id: str, reason: CloseReason, note: str, ended: datetime | None
    ) -> Episode:
        """Closes without request checks: the entry point for server-side closers too."""
        when = ended or self.clock()
        committed = await self.changes.commit(
            lambda declared: self.episodes.close_episode(tenant_id, episode_id, reason, note, when, declared),
            lambda closed: [ScopeChanged(Scope(tenant_id, closed.agent_id, closed.user_id))],
            exclusive=False,  # touches no index: closes need not wait for one another
        )
        closed = committed.result
        self.digests.wake()
        await self.live.closed(tenant_id, episode_id)
        return closed

    async def retract_message(self, caller: Caller, episode_id: str, seq: int) -> Message:
        """The working sets holding the episode (on every replica) drop it: the next turn
        reads its messages again, retraction included."""
        v = Violations()
        check_id(v, "episode_id", episode_id)
        if seq < 1:
            v.add("seq", f"must be a message's sequence number (1 or more), got {seq}")
        v.raise_if_any()
        tenant_id = caller.tenant_id
        episode = await self.episodes.get_episode(tenant_id, episode_id)
        require_visible(caller, episode.agent_id, "episode", episode_id)
        scope = Scope(tenant_id, episode.agent_id, episode.user_id)  # the feed row is erased with the user
        committed = await self.changes.commit(
            lambda declared: self.episodes.retract_message(tenant_id, episode_id, seq, declared),
            lambda _: [MessageRetracted(scope, episode_id)],
            exclusive=False,  # touches no index
        )
        return committed.result

    async def get_episode(self, caller: Caller, episode_id: str) -> Episode:
        v = Violations()
        check_id(v, "episode_id", episode_id)
        v.raise_if_any()
        episode = await self.episodes.get_episode(caller.tenant_id, episode_id)
        require_visible(caller, episode.agent_id, "episode", episode_id)
        return episode

    async def list_episodes(
        self, caller: Caller, where: EpisodeFilter, page_size: int, page_token: str
    ) -> Page[Episode]:
        v = Violations()
        check_id(v, "agent_id", where.agent_id, required=False)
        check_id(v, "user_id", where.user_id, required=False)
        limit = resolve_page_size(v, "page_size", page_size, self.limits)
        v.raise_if_any()
        query = _filter_query(where)
        after = _episode_cursor(decode_token(page_token, query))
        allowed = _within_allowed_agents(caller, where)
        found = await self.episodes.list_episodes(caller.tenant_id, allowed, after, limit + 1)
        return page_of(found, limit, _episode_position, query)

    async def list_messages(
        self, caller: Caller, episode_id: str, page_size: int, page_token: str
    ) -> Page[Message]:
        v = Violations()
        check_id(v, "episode_id", episode_id)
        limit = resolve_page_size(v, "page_size", page_size, self.limits)
        v.raise_if_any()
        query: dict[str, JsonScalar] = {"episode_id": episode_id}
        position = decode_token(page_token, query)
        before = read_seq(position, "before_seq") if position else None
        await self.ensure_visible(caller, episode_id)
        found = await self.episodes.list_messages(caller.tenant_id, episode_id, before, limit + 1)
        return page_of(found, limit, lambda last: {"before_seq": last.seq}, query)

    async def _append(
        self, caller: Caller, episode_id: str, messages: Sequence[NewMessage], field: str
    ) -> list[tuple[Message, bool]]:
        """`field` names each message in errors: "message", or "messages[{}]" for batches."""
        with self.tracing.span(CREATE_MEMORY, _create_memory_attributes(episode_id, messages)) as span:
            facts = await self._facts_of(caller.tenant_id, episode_id)
            require_visible(caller, facts.agent_id, "episode", episode_id)
            messages = await self._redacted(caller.tenant_id, facts.agent_id, messages)
            encoding = facts.token_encoding
            prepared = [
                PreparedMessage(m, await self._count(countable_text(m), encoding), encoding, field.format(i))
                for i, m in enumerate(messages)
            ]
            stored = await self._store(caller.tenant_id, episode_id, prepared)
            if len(stored) == 1:
                span.set_attribute(GEN_AI_MEMORY_RECORD_ID, f"{episode_id}/{stored[0][0].seq}")
            return stored

    async def append_turn(
        self, tenant_id: str, episode_id: str, message: PreparedMessage, with_pending: bool
    ) -> tuple[Message, list[Memory], asyncio.Future[None]]:
        """Appends one message its caller has already checked, authorized for the episode's
        agent, redacted under the agent's PII policy and counted (BuildContext, which knows
        all that from its working set): none of it is done twice. Returns it with the
        episode's PENDING memories, read in the append's transaction, and the append's
        commit, still running: the caller awaits it before it tells anyone of the message;
        watchers are told once it is durable."""
        with self.tracing.span(CREATE_MEMORY, _create_memory_attributes(episode_id, [message.new])) as span:
            stored, replayed, pending, durable = await self.episodes.append_turn(
                tenant_id, episode_id, message, with_pending
            )
            committed = asyncio.ensure_future(durable)
            if not replayed:
                committed.add_done_callback(partial(self._announce, tenant_id, episode_id))
            span.set_attribute(GEN_AI_MEMORY_RECORD_ID, f"{episode_id}/{stored.seq}")
            return stored, pending, committed

    def _announce(self, tenant_id: str, episode_id: str, committed: asyncio.Future[None]) -> None:
        if not committed.cancelled() and committed.exception() is None:
            self.live.appended(tenant_id, episode_id)

    async def _store(
        self, tenant_id: str, episode_id: str, prepared: Sequence[PreparedMessage]
    ) -> list[tuple[Message, bool]]:
        stored = await self.episodes.append(tenant_id, episode_id, prepared)
        if not all(replayed for _, replayed in stored):
            self.live.appended(tenant_id, episode_id)
        return stored

    async def _redacted(
        self, tenant_id: str, agent_id: str, messages: Sequence[NewMessage]
    ) -> Sequence[NewMessage]:
        """Personal data out before anything is counted, stored or embedded (PII policy)."""
        if not await self.pii.redacts_for(tenant_id, agent_id):
            return messages
        return [redact_message(m) for m in messages]

    async def ensure_visible(self, caller: Caller, episode_id: str) -> None:
        """NOT_FOUND unless the caller may use the episode's agent. Free for a key of every
        agent; a restricted key costs one read per episode, then hits the cache."""
        if caller.agents is None:
            return
        facts = await self._facts_of(caller.tenant_id, episode_id)
        require_visible(caller, facts.agent_id, "episode", episode_id)

    async def _facts_of(self, tenant_id: str, episode_id: str) -> FixedFacts:
        key = (tenant_id, episode_id)
        cached = self.fixed_facts.get(key)
        if cached is None:
            episode = await self.episodes.get_episode(tenant_id, episode_id)
            cached = FixedFacts(episode.token_encoding, episode.agent_id)
            self.fixed_facts.put(key, cached)
        return cached

    async def _count(self, text: str, encoding: str) -> int:
        if len(text) <= _INLINE_TOKENIZE_CHARS:
            return self.tokens.count(text, encoding)
        return await asyncio.to_thread(self.tokens.count, text, encoding)


def _create_memory_attributes(episode_id: str, messages: Sequence[NewMessage]) -> dict[str, AttributeValue]:
    """Ids and counts only: the messages' text stays out of traces."""
    return {
        GEN_AI_OPERATION_NAME: CREATE_MEMORY,
        GEN_AI_CONVERSATION_ID: episode_id,
        GEN_AI_MEMORY_RECORD_COUNT: len(messages),
    }


def _within_allowed_agents(caller: Caller, where: EpisodeFilter) -> EpisodeFilter:
    """A named agent must be allowed; otherwise a restricted key lists its agents only."""
    if where.agent_id:
        require_agent(caller, where.agent_id)
        return where
    return where if caller.agents is None else dataclasses.replace(where, agent_ids=caller.agents)


def _episode_position(last: Episode) -> dict[str, JsonScalar]:
    return {"started_at": last.started_at.isoformat(), "episode_id": last.episode_id}


def _filter_query(where: EpisodeFilter) -> dict[str, JsonScalar]:
    state = where.state.value if where.state else ""
    return {"agent_id": where.agent_id, "user_id": where.user_id, "state": state}


def _episode_cursor(position: dict[str, JsonScalar] | None) -> EpisodeCursor | None:
    if position is None:
        return None
    return EpisodeCursor(read_time(position, "started_at"), read_id(position, "episode_id"))
