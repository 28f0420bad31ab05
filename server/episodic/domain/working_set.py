"""The working set of one conversation: the latest summary and the verbatim tail after its
span, never the whole log. A pure value; the LRU of them is `episodic.state.working_set`."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from episodic.domain.context import Summary
from episodic.domain.earlier import CompactedLog
from episodic.domain.model import Agent, Episode, Message
from episodic.domain.ports.episodes import ContextSources
from episodic.domain.tail import Tail


@dataclass(slots=True)
class WorkingSet:
    """The tail is held as columns (`Tail`): a turn renders its views afresh from them
    (reducers' `history_views`, ~0.4 us a message), where a cache of them cost ~100 bytes a
    message.

    After a big import (more new messages than the allowance a read takes, see
    ContextStore.sources) the tail holds only the newest ones: the messages between the
    summary and the tail stay in SQL, unheld. `summary` is what the next compaction rolls
    into, so it is None then (a new summary must not claim the unheld span), and the one
    before the gap is kept as `earlier`, still rendered until a summary replaces it."""

    episode: Episode
    agent: Agent
    summary: Summary | None
    tail: Tail = field(default_factory=Tail)  # messages after held_after, oldest first
    held_after: int = -1  # the tail starts after this seq; -1: right after the summary
    earlier: Summary | None = None  # the latest summary, when unheld messages follow it
    # the spoken messages the tail no longer holds, searched per turn ("Earlier in this conversation")
    compacted_log: CompactedLog = field(default_factory=CompactedLog)

    def __post_init__(self) -> None:
        self.tail.episode_id = self.tail.episode_id or self.episode.episode_id
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
            return self.tail.last_seq
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
        self.tail.extend([m for m in found.messages if m.seq > last])

    def appended(self, message: Message) -> bool:
        """Takes a message this process just appended, without reading the log again: True
        when it is the next one (or one already held); False when something else was appended
        since the last read, and the set must read what is new."""
        if message.seq <= self.last_seq:
            return True
        if message.seq != self.last_seq + 1:
            return False
        self.tail.append(message)
        return True

    def _hold_only(self, newest: list[Message]) -> None:
        self.compacted_log.extend([m for m in self.tail if m.seq < newest[0].seq])
        self.earlier, self.summary = self.shown_summary, None
        self.held_after = newest[0].seq - 1
        self.tail = Tail.of(newest, self.episode.episode_id)

    def compacted(self, summary: Summary) -> None:
        if summary.to_seq <= self.summary_to:
            return
        if summary.to_seq < self.held_after:  # unheld messages still follow it
            self.earlier = summary
            return
        self.summary, self.earlier, self.held_after = summary, None, summary.to_seq
        kept = self.tail.after(summary.to_seq)
        self.compacted_log.extend(self.tail[: len(self.tail) - len(kept)])
        self.tail = kept

    def size(self) -> int:
        summary = sum([sys.getsizeof(s.content) for s in (self.summary, self.earlier) if s])
        return 1000 + self.compacted_log.size() + summary + self.tail.size()
