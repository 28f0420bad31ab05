"""Working sets of active conversations, in RAM: an LRU bounded by bytes; a miss (or a
restart) rebuilds one from SQL as "latest summary + messages after its span"."""

from __future__ import annotations

from collections import OrderedDict
from contextlib import AbstractAsyncContextManager

from episodic.domain.changes import AgentChanged, CachesStale, Change, stale_keys
from episodic.domain.erasure import user_hash
from episodic.domain.model import Agent
from episodic.domain.working_set import WorkingSet
from episodic.state.keyed_locks import KeyedLocks

Key = tuple[str, str]  # (tenant, episode)
MAX_SHARED_AGENTS = 10_000  # agents whose one Agent object the sets share; past it the table starts over


class WorkingSetCache:
    """LRU of working sets bounded by their estimated bytes, plus one lock per conversation
    so concurrent calls on one episode take turns (calls on different episodes do not)."""

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._items: OrderedDict[Key, tuple[WorkingSet, int]] = OrderedDict()
        self._bytes = 0
        self._locks = KeyedLocks()
        self._unverified: set[Key] = set()  # their agent changed: read the head before using them
        # One Agent object per agent for every set holding an equal one: each read of a set
        # brings its own (strings, memory configuration: ~1 KB, of a small set's ~30).
        self._agents: dict[tuple[str, str], Agent] = {}
        self.evictions = 0  # over the byte budget, since start (read by metrics)

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

    def current(self, key: Key) -> WorkingSet | None:
        """The held set when nothing but its own log can have changed it: its agent did not
        change since it was read (every replica's agent changes reach `changed`), so a turn
        may append without reading the head first. Other writers' appends and summaries are
        found by the append itself (a seq that does not follow: see WorkingSet.appended)."""
        return None if key in self._unverified else self.get(key)

    def put(self, key: Key, working_set: WorkingSet) -> None:
        """(Re)inserts after a change, re-measuring it, and evicts the least recently used."""
        self.discard(key)
        self._unverified.discard(key)
        self._share_agent(key, working_set)
        size = working_set.size()
        self._items[key] = (working_set, size)
        self._bytes += size
        while self._bytes > self._max_bytes and len(self._items) > 1:
            gone, (_, evicted) = self._items.popitem(last=False)
            self._unverified.discard(gone)
            self._bytes -= evicted
            self.evictions += 1

    def _share_agent(self, key: Key, working_set: WorkingSet) -> None:
        agent = working_set.agent
        of = (key[0], agent.agent_id)
        shared = self._agents.get(of)
        if shared is agent:
            return
        if shared is not None and shared == agent:
            working_set.agent = shared
        else:
            if len(self._agents) >= MAX_SHARED_AGENTS:
                self._agents.clear()
            self._agents[of] = agent  # the newest read: later sets share it

    def changed(self, change: Change) -> None:
        """A removed episode's working set goes (its id may be opened again); after an
        erasure on another replica, only the erased user's (the others are costly to
        rebuild, and still right)."""
        if isinstance(change, AgentChanged):
            agent = (change.tenant_id, change.agent_id)
            self._agents.pop(agent, None)
            self._unverified.update(k for k, (held, _) in self._items.items() if _of_agent(k, held, agent))
            return
        if isinstance(change, CachesStale) and change.tenant_id is not None and change.user_hash:
            for key in [k for k, (held, _) in self._items.items() if _of_user(k, held, change.user_hash)]:
                self.discard(key)
            return
        for key in stale_keys(change, list(self._items)):
            self.discard(key)

    def discard(self, key: Key) -> None:
        self._unverified.discard(key)
        found = self._items.pop(key, None)
        if found is not None:
            self._bytes -= found[1]

    def hold(self, key: Key) -> AbstractAsyncContextManager[None]:
        """The conversation's lock: one turn at a time per episode."""
        return self._locks.hold(key)


def _of_user(key: Key, held: WorkingSet, hashed: str) -> bool:
    return user_hash(key[0], held.episode.user_id) == hashed


def _of_agent(key: Key, held: WorkingSet, agent: tuple[str, str]) -> bool:
    return (key[0], held.episode.agent_id) == agent
