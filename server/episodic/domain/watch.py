"""Watching an episode live: the events a watcher receives, and how one read of the
episode (its row, its drafts, the messages after what was seen) turns into events for
every watcher of it. Pure: the reader that reads and fans out is state/watch_hub.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from episodic.domain.log import countable_text
from episodic.domain.model import Episode, EpisodeState, Message, NewMessage
from episodic.errors import FailedPrecondition, InvalidArgument


@dataclass(frozen=True, slots=True)
class WatchLimits:
    """Watchers per episode, per tenant and per process; what one watcher may have waiting to be sent
    (events, and about that many bytes of text) before it is cut; messages one watch may
    replay."""

    per_episode: int = 100
    per_process: int = 500
    per_tenant: int = 64
    buffer_events: int = 1024
    buffer_bytes: int = 4 * 1024 * 1024
    replay: int = 1000


@dataclass(frozen=True, slots=True)
class MessageAppended:
    message: Message


@dataclass(frozen=True, slots=True)
class DraftText:
    draft_id: str
    offset: int
    text: str


@dataclass(frozen=True, slots=True)
class DraftFinalized:
    draft_id: str
    seq: int


@dataclass(frozen=True, slots=True)
class DraftDiscarded:
    draft_id: str


@dataclass(frozen=True, slots=True)
class EpisodeClosed:
    episode: Episode


@dataclass(frozen=True, slots=True)
class Heartbeat:
    last_seq: int


WatchEvent = MessageAppended | DraftText | DraftFinalized | DraftDiscarded | EpisodeClosed | Heartbeat
_EVENT_OVERHEAD = 64


def event_weight(event: WatchEvent) -> int:
    """About what the event costs to hold and send, for a watcher's buffer bound."""
    if isinstance(event, MessageAppended):
        m = event.message
        payload = NewMessage(m.role, m.content, tool_calls=m.tool_calls, tool_result=m.tool_result)
        return _EVENT_OVERHEAD + len(countable_text(payload))
    if isinstance(event, DraftText):
        return _EVENT_OVERHEAD + len(event.text)
    return _EVENT_OVERHEAD


@dataclass(frozen=True, slots=True)
class DraftChange:
    """A draft present in a read: its length, and its text from `offset` on, or None when
    its length is the one the reader gave (nothing new was read)."""

    length: int
    offset: int = 0
    text: str | None = None


@dataclass(frozen=True, slots=True)
class LiveRead:
    """One read of a watched episode, made in this order: the episode, its drafts, the
    messages after the reader's last seq (at most a page; `complete` False: more follow).
    That order means a draft missing from the read whose message was committed before it
    went is in `messages`, unless the page was full."""

    episode: Episode
    drafts: Mapping[str, DraftChange]
    messages: Sequence[Message]
    complete: bool = True


@dataclass(slots=True)
class LiveState:
    """What a reader has sent every watcher of an episode: the log up to `last_seq`, and
    the text so far of each draft in progress. `finalized`: drafts whose message was seen,
    by the length they had, until their rows are gone."""

    last_seq: int
    drafts: dict[str, str] = field(default_factory=dict)
    finalized: dict[str, int] = field(default_factory=dict)
    closed: bool = False

    def known(self) -> dict[str, int]:
        """Draft id -> the length already read, so a read brings only what is new."""
        return {**{d: len(text) for d, text in self.drafts.items()}, **self.finalized}

    def snapshot(self) -> list[WatchEvent]:
        """What a watcher joining now gets before the next events: every draft's text so far."""
        return [DraftText(d, 0, text) for d, text in self.drafts.items()]


def advance(state: LiveState, read: LiveRead) -> list[WatchEvent]:
    """The events `read` brings after `state`, which it brings up to date."""
    events = _messages(state, read.messages)
    if read.episode.state is EpisodeState.CLOSED:
        if read.complete:  # every message was committed before the close: all are in
            state.closed = True
            state.drafts.clear()
            events.append(EpisodeClosed(read.episode))
        return events
    events += _drafts(state, read.drafts)
    if read.complete:
        events += _gone(state, read.drafts)
    return events


def _messages(state: LiveState, messages: Sequence[Message]) -> list[WatchEvent]:
    events: list[WatchEvent] = []
    for message in messages:
        if message.seq <= state.last_seq:
            continue
        state.last_seq = message.seq
        events.append(MessageAppended(message))
        draft_id = message.client_message_id
        if not draft_id:
            continue
        text = state.drafts.pop(draft_id, None)
        state.finalized[draft_id] = len(text or "")
        if text is not None:
            events.append(DraftFinalized(draft_id, message.seq))
    return events


def _drafts(state: LiveState, drafts: Mapping[str, DraftChange]) -> list[WatchEvent]:
    events: list[WatchEvent] = []
    for draft_id, change in drafts.items():
        if draft_id in state.finalized or change.text is None:
            continue
        held = state.drafts.get(draft_id)
        if held is not None and change.offset == len(held):
            state.drafts[draft_id] = held + change.text
            events.append(DraftText(draft_id, change.offset, change.text))
            continue
        if held is not None:  # dropped and started again under the same id
            events.append(DraftDiscarded(draft_id))
        state.drafts[draft_id] = change.text
        events.append(DraftText(draft_id, 0, change.text))
    return events


def _gone(state: LiveState, present: Mapping[str, DraftChange]) -> list[WatchEvent]:
    """Drafts whose rows went without a message (dropped); finalized rows now gone."""
    events: list[WatchEvent] = []
    for draft_id in [d for d in state.drafts if d not in present]:
        del state.drafts[draft_id]
        events.append(DraftDiscarded(draft_id))
    for draft_id in [d for d in state.finalized if d not in present]:
        del state.finalized[draft_id]
    return events


def check_after_seq(after_seq: int | None, message_count: int, limits: WatchLimits) -> None:
    """A replay starts inside the log and is bounded."""
    if after_seq is None:
        return
    if after_seq < 0:
        raise InvalidArgument.of("after_seq", "must not be negative")
    if after_seq > message_count:
        raise InvalidArgument.of("after_seq", f"is past the episode's last message (seq {message_count})")
    if message_count - after_seq > limits.replay:
        raise FailedPrecondition(
            f"after_seq {after_seq} would replay {message_count - after_seq} messages, more than "
            f"{limits.replay}: read older ones with ListMessages, then watch from a later seq",
            reason="REPLAY_TOO_LONG",
        )
