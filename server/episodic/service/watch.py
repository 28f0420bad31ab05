"""Live watching: WatchEpisode (replay, then what the episode's reader fans out), and the
gateway's side of a reply in progress, PushAssistantDelta and FinalizeAssistantMessage.
A draft is never part of the log: finalizing appends its text through the ordinary
append (deduplicated by client_message_id = draft id, redacted, counted)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from episodic.domain.drafts import (
    DraftLimits,
    Push,
    Pushed,
    check_final_parts,
    episode_closed_error,
)
from episodic.domain.model import Caller, EpisodeState, JsonObject, Message, NewMessage, Role, ToolCall
from episodic.domain.ports.clock import Clock
from episodic.domain.ports.episodes import DraftStore
from episodic.domain.validation import Limits, Violations, check_id, check_text
from episodic.domain.watch import EpisodeClosed, MessageAppended, WatchEvent, WatchLimits, check_after_seq
from episodic.errors import AlreadyExists, EpisodicError, FailedPrecondition, NotFound
from episodic.service.episodes import EpisodeService
from episodic.state.watch_hub import Key, WatchHub

log = logging.getLogger(__name__)
HEARTBEAT_SECONDS = 15.0  # a quiet stream still sends something: proxies drop idle ones
REPLAY_PAGE = 100
_ID_REUSED = "CLIENT_MESSAGE_ID_REUSED"  # domain/log.py: a client_message_id reused for other content


class LiveEpisodes:
    """What the episode use cases tell watchers (EpisodeService's `live`): an append wakes
    the episode's readers; a close also drops the replies still in progress."""

    def __init__(self, hub: WatchHub, drafts: DraftStore) -> None:
        self._hub = hub
        self._drafts = drafts

    def appended(self, tenant_id: str, episode_id: str) -> None:
        self._hub.announce(tenant_id, episode_id)

    async def closed(self, tenant_id: str, episode_id: str) -> None:
        """The close is committed: its caller is not failed for drafts left behind (a
        closed episode's drafts are never shown, and go with it)."""
        self._hub.announce(tenant_id, episode_id)
        try:
            await self._drafts.discard_all(tenant_id, episode_id)
        except EpisodicError as exc:
            log.warning("dropping a closed episode's drafts failed", extra={"reason": exc.reason})


@dataclass(slots=True, kw_only=True)
class WatchService:
    episodes: EpisodeService
    drafts: DraftStore
    hub: WatchHub
    limits: Limits
    watch_limits: WatchLimits
    draft_limits: DraftLimits
    clock: Clock
    heartbeat_seconds: float = HEARTBEAT_SECONDS

    async def watch(
        self, caller: Caller, episode_id: str, after_seq: int | None
    ) -> AsyncIterator[WatchEvent]:
        """`after_seq` None: no replay, only what comes next."""
        v = Violations()
        check_id(v, "episode_id", episode_id)
        v.raise_if_any()
        episode = await self.episodes.get_episode(caller, episode_id)
        check_after_seq(after_seq, episode.message_count, self.watch_limits)
        after = episode.message_count if after_seq is None else after_seq
        key = (caller.tenant_id, episode_id)
        if episode.state is EpisodeState.CLOSED:
            async for event in self._replay(key, after, episode.message_count):
                yield event
            yield EpisodeClosed(episode)
            return
        watcher, through, drafts = self.hub.join(key, after, episode.message_count)
        try:
            async for event in self._replay(key, after, through):
                yield event
            for draft in drafts:
                yield draft
            while (live := await watcher.next(self.heartbeat_seconds)) is not None:
                yield live
        finally:
            self.hub.leave(watcher)

    async def _replay(self, key: Key, after: int, through: int) -> AsyncIterator[WatchEvent]:
        """The log in (after, through], a page at a time (a slow client holds one page)."""
        while after < through:
            page = await self.drafts.messages_after(*key, after, through, REPLAY_PAGE)
            if not page:  # erased meanwhile: the reader ends the watch
                return
            for message in page:
                yield MessageAppended(message)
            after = page[-1].seq

    async def push(self, caller: Caller, episode_id: str, draft_id: str, offset: int, text: str) -> int:
        """The draft's length after the push."""
        v = Violations()
        check_id(v, "episode_id", episode_id)
        check_id(v, "draft_id", draft_id)
        if offset < 0:
            v.add("offset", "must not be negative")
        check_text(v, "text", text, self.limits.max_content_bytes)
        v.raise_if_any()
        await self.episodes.ensure_visible(caller, episode_id)
        push = Push(draft_id, offset, text)
        pushed: Pushed = await self.drafts.push(
            caller.tenant_id, episode_id, push, self.clock(), self.draft_limits
        )
        if pushed.changed:
            self.hub.announce(caller.tenant_id, episode_id)
        return pushed.length

    async def finalize(
        self,
        caller: Caller,
        episode_id: str,
        draft_id: str,
        *,
        length: int | None = None,
        metadata: JsonObject | None = None,
        tool_calls: Sequence[ToolCall] = (),
    ) -> Message:
        """`length`, when given, must be the draft's: every push arrived."""
        v = Violations()
        check_id(v, "episode_id", episode_id)
        check_id(v, "draft_id", draft_id)
        if length is not None and length < 0:
            v.add("length", "must not be negative")
        check_final_parts(v, metadata or {}, tool_calls, self.limits)
        v.raise_if_any()
        episode = await self.episodes.get_episode(caller, episode_id)
        held = await self.drafts.text_of(caller.tenant_id, episode_id, draft_id)
        done = await self.drafts.finalized(caller.tenant_id, episode_id, draft_id)
        if done is not None and held is None:  # a retry: the draft is already this message
            return done
        if episode.state is not EpisodeState.OPEN:
            raise episode_closed_error(episode_id)
        text = _final_text(draft_id, held, length, tool_calls)
        calls = tuple(tool_calls)
        reply = NewMessage(Role.ASSISTANT, text, draft_id, metadata=metadata or {}, tool_calls=calls)
        stored = await self._append_reply(caller, episode_id, reply)
        await self.drafts.remove(caller.tenant_id, episode_id, draft_id)
        return stored

    async def _append_reply(self, caller: Caller, episode_id: str, reply: NewMessage) -> Message:
        """Through the ordinary append, whose dedupe by client_message_id returns the message
        of an earlier finalization (one not followed by the draft's removal) and refuses an
        id an AddMessage took for other content: answering with that message would lose the
        draft's text, which is kept."""
        try:
            stored, _ = await self.episodes.add_message(caller, episode_id, reply)
        except AlreadyExists as exc:
            if exc.reason != _ID_REUSED:
                raise
            raise AlreadyExists(
                f"draft_id {reply.client_message_id!r} was already used as the client_message_id of "
                "a message with other content; the draft is kept: push the reply again under a new "
                "draft id",
                reason=_ID_REUSED,
            ) from None
        return stored


def _final_text(draft_id: str, text: str | None, length: int | None, tool_calls: Sequence[ToolCall]) -> str:
    if text is None:
        raise NotFound("draft", draft_id)
    if length is not None and len(text) != length:
        raise FailedPrecondition(
            f"length {length}: draft {draft_id!r} has {len(text)} characters; a push is missing "
            "or still in flight",
            reason="DRAFT_LENGTH_MISMATCH",
        )
    if not text and not tool_calls:
        raise FailedPrecondition(
            f"draft {draft_id!r} is empty: push its text, or finalize it with tool_calls",
            reason="DRAFT_EMPTY",
        )
    return text
