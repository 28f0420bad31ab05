"""The working set of one conversation: the latest summary and the verbatim tail after its
span, never the whole log. A pure value; the LRU of them is `episodic.state.working_set`."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace

from episodic.domain.context import Summary
from episodic.domain.earlier import CompactedLog
from episodic.domain.model import Agent, Episode, Message, lean
from episodic.domain.ports.episodes import ContextSources

_MESSAGE_FIXED_BYTES = 192  # a Message object, its created_at and its list slot (tracemalloc: ~190)


_MALLOCED_CHARS = 464  # an ASCII str this long is malloc's (pymalloc: to 512 bytes, 49 of them its own)


def _own_text(m: Message) -> Message:
    """`m` with its text copied on this thread (the event loop's). A row read from SQL brings
    a string malloc made in that SQLite reader thread's arena, among the read's short-lived
    allocations; the tail keeps it while the conversation is active, and the 8 readers'
    arenas grew ~30% free space around the kept texts (holes below a page: ~9 KiB of RSS per
    active conversation, issue 47, scripts/footprint_probe.py). Copied here, the texts sit
    together in the main arena and each reader's stays at a few MiB. ~4 us a message, on a
    read (~0.6 ms for a cold read of 160; a turn's own appended message is copied once too)."""
    if len(m.content) < _MALLOCED_CHARS:  # pymalloc's, whichever thread made it
        return m
    return replace(m, content="".join((m.content, "")))  # two parts: a new string, never `m.content`


def message_bytes(m: Message) -> int:
    """The message, its text and its small fields."""
    return _MESSAGE_FIXED_BYTES + sys.getsizeof(m.content) + 120 * len(m.tool_calls)


@dataclass(slots=True)
class WorkingSet:
    """The tail is held as `Message`s only: a turn renders its views afresh (reducers'
    `history_views`, ~0.4 us a message), where a cache of them cost ~100 bytes a message.

    After a big import (more new messages than the allowance a read takes, see
    ContextStore.sources) the tail holds only the newest ones: the messages between the
    summary and the tail stay in SQL, unheld. `summary` is what the next compaction rolls
    into, so it is None then (a new summary must not claim the unheld span), and the one
    before the gap is kept as `earlier`, still rendered until a summary replaces it."""

    episode: Episode
    agent: Agent
    summary: Summary | None
    tail: list[Message] = field(default_factory=list)  # messages after held_after, oldest first
    held_after: int = -1  # the tail starts after this seq; -1: right after the summary
    earlier: Summary | None = None  # the latest summary, when unheld messages follow it
    # the spoken messages the tail no longer holds, searched per turn ("Earlier in this conversation")
    compacted_log: CompactedLog = field(default_factory=CompactedLog)

    def __post_init__(self) -> None:
        self.tail = self._lean(self.tail)
        if self.held_after < 0:
            self.held_after = self.summary.to_seq if self.summary else 0

    @classmethod
    def of(cls, found: ContextSources) -> WorkingSet:
        held = cls(found.episode, found.agent, found.summary)
        held.compacted_log.extend(found.earlier)
        held.absorb(found)
        return held

    @property
    def last_seq(self) -> int:
        if self.tail:
            return self.tail[-1].seq
        return max(self.summary_to, self.held_after)

    @property
    def summary_to(self) -> int:
        """The span end of the latest summary known, rolled into or not."""
        latest = self.summary or self.earlier
        return latest.to_seq if latest else 0

    @property
    def shown_summary(self) -> Summary | None:
        return self.summary or self.earlier

    @property
    def unheld(self) -> int:
        """Messages after the latest summary that the tail does not hold (seqs are dense)."""
        return max(self.held_after - self.summary_to, 0)

    def absorb(self, found: ContextSources) -> None:
        """Takes what a read found: a newer summary (made by another replica, or in the
        background) drops the tail it covers; new messages extend the tail, or replace it
        when they are only the newest of more than an allowance (`complete` False)."""
        self.episode, self.agent = found.episode, found.agent
        if found.summary is not None:
            self.compacted(found.summary)
        if not found.complete:
            self._hold_only(found.messages)
            return
        last = self.last_seq
        fresh = self._lean([m for m in found.messages if m.seq > last])
        self.tail.extend(fresh)

    def appended(self, message: Message) -> bool:
        """Takes a message this process just appended, without reading the log again: True
        when it is the next one (or one already held); False when something else was appended
        since the last read, and the set must read what is new."""
        if message.seq <= self.last_seq:
            return True
        if message.seq != self.last_seq + 1:
            return False
        (message,) = self._lean([message])
        self.tail.append(message)
        return True

    def _hold_only(self, newest: list[Message]) -> None:
        self.compacted_log.extend([m for m in self.tail if m.seq < newest[0].seq])
        self.earlier, self.summary = self.shown_summary, None
        self.held_after = newest[0].seq - 1
        self.tail = self._lean(newest)

    def _lean(self, messages: list[Message]) -> list[Message]:
        """The messages as the set holds them (`lean`): one episode id string for all, and
        each text a string of this thread's own (`_own_text`)."""
        episode_id = self.tail[0].episode_id if self.tail else self.episode.episode_id
        return [_own_text(lean(m, episode_id)) for m in messages]

    def compacted(self, summary: Summary) -> None:
        if summary.to_seq <= self.summary_to:
            return
        if summary.to_seq < self.held_after:  # unheld messages still follow it
            self.earlier = summary
            return
        self.summary, self.earlier, self.held_after = summary, None, summary.to_seq
        self.compacted_log.extend([m for m in self.tail if m.seq <= summary.to_seq])
        self.tail = [m for m in self.tail if m.seq > summary.to_seq]

    def size(self) -> int:
        summary = sum([sys.getsizeof(s.content) for s in (self.summary, self.earlier) if s])
        fixed = _MESSAGE_FIXED_BYTES * len(self.tail)  # message_bytes, summed without a call per message
        return (
            1000
            + self.compacted_log.size()
            + summary
            + fixed
            + sum([sys.getsizeof(m.content) + 120 * len(m.tool_calls) for m in self.tail])
        )
