"""The working set: per active conversation, in RAM, the latest summary and the verbatim
tail after its span — never the whole log. Held in an LRU bounded by bytes; a miss (or a
restart) rebuilds it from SQL as "latest summary + messages after its span"."""

from __future__ import annotations

import asyncio
import sys
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from episodic.domain.context import RenderedMessage, Summary
from episodic.domain.model import Agent, Episode, Message
from episodic.domain.reducers import from_log

Key = tuple[str, str]  # (tenant, episode)
_MESSAGE_FIXED_BYTES = 320  # Message + RenderedMessage objects and small fields (tracemalloc)


def message_bytes(m: Message) -> int:
    """The message, its rendered view (which shares the text) and their small fields."""
    return _MESSAGE_FIXED_BYTES + sys.getsizeof(m.content) + 120 * len(m.tool_calls)


@dataclass(slots=True)
class WorkingSet:
    """`rendered` holds each tail message as the model sees it (before stubbing), so a turn
    does not rebuild them; the strings are shared with `tail`, not copied."""

    episode: Episode
    agent: Agent
    summary: Summary | None
    tail: list[Message] = field(default_factory=list)  # messages after the summary's span
    rendered: list[RenderedMessage] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rendered = [from_log(m) for m in self.tail]

    @property
    def last_seq(self) -> int:
        if self.tail:
            return self.tail[-1].seq
        return self.summary.to_seq if self.summary else 0

    @property
    def summary_to(self) -> int:
        return self.summary.to_seq if self.summary else 0

    def absorb(self, episode: Episode, agent: Agent, summary: Summary | None, new: list[Message]) -> None:
        """Takes what a delta read found: a newer summary (made by another replica, or in the
        background) drops the tail it covers; new messages extend the tail."""
        self.episode, self.agent = episode, agent
        if summary is not None:
            self.compacted(summary)
        last = self.last_seq
        fresh = [m for m in new if m.seq > last]
        self.tail.extend(fresh)
        self.rendered.extend(from_log(m) for m in fresh)

    def compacted(self, summary: Summary) -> None:
        if summary.to_seq > self.summary_to:
            self.summary = summary
            keep = [i for i, m in enumerate(self.tail) if m.seq > summary.to_seq]
            self.tail = [self.tail[i] for i in keep]
            self.rendered = [self.rendered[i] for i in keep]

    def size(self) -> int:
        summary = sys.getsizeof(self.summary.content) if self.summary else 0
        return 1000 + summary + sum(message_bytes(m) for m in self.tail)


class WorkingSetCache:
    """LRU of working sets bounded by their estimated bytes, plus one lock per conversation
    so concurrent calls on one episode take turns (calls on different episodes do not)."""

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._items: OrderedDict[Key, tuple[WorkingSet, int]] = OrderedDict()
        self._bytes = 0
        self._locks: dict[Key, tuple[asyncio.Lock, int]] = {}

    @property
    def total_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: Key) -> WorkingSet | None:
        found = self._items.get(key)
        if found is None:
            return None
        self._items.move_to_end(key)
        return found[0]

    def put(self, key: Key, working_set: WorkingSet) -> None:
        """(Re)inserts after a change, re-measuring it, and evicts the least recently used."""
        self.discard(key)
        size = working_set.size()
        self._items[key] = (working_set, size)
        self._bytes += size
        while self._bytes > self._max_bytes and len(self._items) > 1:
            _, (_, evicted) = self._items.popitem(last=False)
            self._bytes -= evicted

    def discard(self, key: Key) -> None:
        found = self._items.pop(key, None)
        if found is not None:
            self._bytes -= found[1]

    @asynccontextmanager
    async def hold(self, key: Key) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)
