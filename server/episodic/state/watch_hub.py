"""Who watches which episode in this process, and the one reader per watched episode that
reads what is new and fans it out. A reader wakes when this process writes to its
episode (`announce`), when another replica does (a signal on CHANNEL), and every
POLL_SECONDS in case a signal was lost; each wake is one read, whatever the number of
watchers. Each watcher has a bounded buffer: one that falls behind is cut alone, and
the others go on. The reader stops when its last watcher leaves."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import Counter, deque
from collections.abc import Iterable, Sequence

from episodic.domain.changes import Change, stale_keys
from episodic.domain.ports.changes import Signals
from episodic.domain.ports.episodes import DraftStore
from episodic.domain.shares import OverShare, Share
from episodic.domain.watch import (
    Heartbeat,
    LiveState,
    MessageAppended,
    WatchEvent,
    WatchLimits,
    advance,
    event_weight,
)
from episodic.errors import AtCapacity, EpisodicError, NotFound, ResourceExhausted, Unavailable
from episodic.state.shares import HELD_RETRY_SECONDS

log = logging.getLogger(__name__)
Key = tuple[str, str]  # (tenant_id, episode_id)
Weighted = tuple[WatchEvent, int]
CHANNEL = "episodic_watch"
POLL_SECONDS = 1.0
PAGE = 100  # messages per read: a burst is read a page at a time
FAILED_READS = 5  # consecutive failed reads (the database away) before watchers are ended
_PAYLOAD_BYTES = 6000  # a NOTIFY payload must stay under 8,000 bytes
_GAVE_UP = "watching stopped: the database did not answer; watch again with after_seq"


class Watcher:
    """One stream's buffer: events wait here until its RPC sends them."""

    def __init__(self, after_seq: int, replayed_through: int, limits: WatchLimits) -> None:
        self._after = after_seq  # the watcher has every message up to here
        self._limits = limits
        self._items: deque[Weighted] = deque()
        self._bytes = 0
        self._ready = asyncio.Event()
        self._failure: EpisodicError | None = None
        self._cut = False
        self._done = False
        self.last_seq = max(after_seq, replayed_through)  # the last message it was sent

    def offer(self, events: Sequence[Weighted]) -> bool:
        """Queues what this watcher lacks; False when it is cut instead, because it still
        has more than its buffer's worth waiting. (So one burst, e.g. a big AddMessages,
        does not cut a watcher that was keeping up: what one holds stays under the
        buffer plus one read's events, which every watcher of the episode shares.)"""
        if len(self._items) > self._limits.buffer_events or self._bytes > self._limits.buffer_bytes:
            self._items.clear()
            self._bytes = 0
            self._cut = True
            self._ready.set()
            return False
        for event, weight in events:
            if isinstance(event, MessageAppended) and event.message.seq <= self._after:
                continue
            self._items.append((event, weight))
            self._bytes += weight
        if self._items:
            self._ready.set()
        return True

    def fail(self, error: EpisodicError) -> None:
        if self._failure is None:
            self._failure = error
        self._ready.set()

    def finish(self) -> None:
        """No more events: the stream ends once the queued ones are sent."""
        self._done = True
        self._ready.set()

    async def next(self, heartbeat_seconds: float) -> WatchEvent | None:
        """The next event, a Heartbeat after `heartbeat_seconds` without one, or None once
        finished. Raises why the watch ended early (cut, episode gone, server stopping)."""
        while True:
            self._raise_if_ended()
            if self._items:
                return self._pop()
            if self._done:
                return None
            self._ready.clear()
            try:
                async with asyncio.timeout(heartbeat_seconds):
                    await self._ready.wait()
            except TimeoutError:
                return Heartbeat(self.last_seq)

    def _raise_if_ended(self) -> None:
        if self._cut:
            raise ResourceExhausted(
                f"this watcher fell behind (over {self._limits.buffer_events} events or "
                f"{self._limits.buffer_bytes} bytes waiting to be sent) and was cut: watch again "
                f"with after_seq {self.last_seq}",
                reason="WATCHER_TOO_SLOW",
            )
        if self._failure is not None:
            raise self._failure

    def _pop(self) -> WatchEvent:
        event, weight = self._items.popleft()
        self._bytes -= weight
        if isinstance(event, MessageAppended):
            self.last_seq = max(self.last_seq, event.message.seq)
        return event


class _Reader:
    """The one reader of a watched episode in this process."""

    def __init__(self, hub: WatchHub, key: Key, state: LiveState) -> None:
        self.hub = hub
        self.key = key
        self.state = state
        self.watchers: set[Watcher] = set()
        self._wake = asyncio.Event()
        self._wake.set()  # the first read at once: it brings the drafts in progress
        self.task = asyncio.create_task(self._run(), name="episodic-watch-reader")

    def wake(self) -> None:
        self._wake.set()

    async def _run(self) -> None:
        failures = 0
        while True:  # until the episode ends here, or `leave` cancels the last watcher's reader
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.hub.poll_seconds):
                    await self._wake.wait()
            self._wake.clear()
            try:
                more = await self._read_once()
            except NotFound as exc:
                self.hub.end(self, exc)
                return
            except Exception as exc:  # the database away (or a bug): retried, then given up
                failures += 1
                _log_failure(exc, failures)
                if failures >= FAILED_READS:
                    self.hub.end(self, Unavailable(_GAVE_UP))
                    return
                continue
            failures = 0
            if self.state.closed:
                self.hub.end(self, None)
                return
            if more:
                self._wake.set()

    async def _read_once(self) -> bool:
        """Reads what is new and hands it to every watcher; True when more is waiting."""
        tenant_id, episode_id = self.key
        read = await self.hub.store.read_live(
            tenant_id, episode_id, self.state.last_seq, self.state.known(), PAGE
        )
        events = advance(self.state, read)
        if events:
            weighted = [(event, event_weight(event)) for event in events]
            for watcher in list(self.watchers):
                if not watcher.offer(weighted):
                    self.hub.leave(watcher)
        return not read.complete


def _log_failure(exc: Exception, failures: int) -> None:
    if isinstance(exc, EpisodicError):  # ids stay out of the log: the error's kind only
        log.warning("reading a watched episode failed", extra={"reason": exc.reason, "failures": failures})
    else:
        log.exception("reading a watched episode failed", extra={"failures": failures})


class WatchHub:
    """The watchers of this process and their readers; subscribes to CHANNEL when built
    (before the signals start). Implements the change owner's watcher protocol, so an
    erasure or retention wakes the readers of the episodes it removed."""

    def __init__(
        self, store: DraftStore, signals: Signals, limits: WatchLimits, *, poll_seconds: float = POLL_SECONDS
    ) -> None:
        self.store = store
        self.limits = limits
        self.poll_seconds = poll_seconds
        self._signals = signals
        self._readers: dict[Key, _Reader] = {}
        self._reader_of: dict[Watcher, _Reader] = {}
        self._per_tenant: Counter[str] = Counter()  # watchers, by tenant (its share)
        self._origin = uuid.uuid4().hex[:12]  # this process's own signals come back: skip them
        self._outgoing: dict[Key, None] = {}
        self._closed = False
        signals.subscribe(CHANNEL, self._on_signal)

    @property
    def watchers(self) -> int:
        return len(self._reader_of)

    def join(self, key: Key, after_seq: int, message_count: int) -> tuple[Watcher, int, list[WatchEvent]]:
        """A new watcher of `key`, which has every message up to `after_seq`; with the seq
        up to which it must replay the log itself, and the drafts' text so far, both as of
        the moment it joined (later events come through the watcher)."""
        self._check_room(key)
        reader = self._readers.get(key)
        if reader is None:
            reader = self._readers[key] = _Reader(self, key, LiveState(message_count))
        watcher = Watcher(after_seq, reader.state.last_seq, self.limits)
        reader.watchers.add(watcher)
        self._reader_of[watcher] = reader
        self._per_tenant[key[0]] += 1
        return watcher, reader.state.last_seq, reader.state.snapshot()

    def _check_room(self, key: Key) -> None:
        if self._closed:
            raise Unavailable("the server is shutting down: watch again (another replica)")
        if self._per_tenant[key[0]] >= self.limits.per_tenant:
            raise OverShare(Share.WATCHERS, self.limits.per_tenant, HELD_RETRY_SECONDS)
        if len(self._reader_of) >= self.limits.per_process:
            raise AtCapacity(
                f"this server already has {self.limits.per_process} watchers (its limit)",
                reason="TOO_MANY_WATCHERS",
            )
        reader = self._readers.get(key)
        if reader is not None and len(reader.watchers) >= self.limits.per_episode:
            raise AtCapacity(
                f"the episode already has {self.limits.per_episode} watchers on this server (the limit)",
                reason="TOO_MANY_WATCHERS_OF_EPISODE",
            )

    def leave(self, watcher: Watcher) -> None:
        """Idempotent; the reader stops with its last watcher."""
        reader = self._dropped(watcher)
        if reader is None:
            return
        reader.watchers.discard(watcher)
        if not reader.watchers:
            self._forget(reader)
            reader.task.cancel()

    def end(self, reader: _Reader, error: EpisodicError | None) -> None:
        """Ends every watcher of `reader`: with `error`, or cleanly (the episode closed)."""
        self._forget(reader)
        for watcher in list(reader.watchers):
            self._dropped(watcher)
            if error is None:
                watcher.finish()
            else:
                watcher.fail(error)
        reader.watchers.clear()

    def _dropped(self, watcher: Watcher) -> _Reader | None:
        reader = self._reader_of.pop(watcher, None)
        if reader is not None:
            tenant_id = reader.key[0]
            self._per_tenant[tenant_id] -= 1
            if not self._per_tenant[tenant_id]:
                del self._per_tenant[tenant_id]
        return reader

    def _forget(self, reader: _Reader) -> None:
        if self._readers.get(reader.key) is reader:
            del self._readers[reader.key]

    def announce(self, tenant_id: str, episode_id: str) -> None:
        """This process committed a change to the episode: its reader here reads now, and
        other replicas are told (one signal per event-loop turn, whatever was written)."""
        key = (tenant_id, episode_id)
        reader = self._readers.get(key)
        if reader is not None:
            reader.wake()
        if not self._outgoing:
            asyncio.get_running_loop().call_soon(self._flush)
        self._outgoing[key] = None

    def _flush(self) -> None:
        keys, self._outgoing = list(self._outgoing), {}
        for payload in _payloads(self._origin, keys):
            try:
                self._signals.notify(CHANNEL, payload)
            except Exception:  # a lost signal costs latency only: readers poll
                log.exception("sending a watch signal failed")

    def _on_signal(self, payload: str) -> None:
        if not payload:  # the signal connection came back: anything may have been missed
            self._wake(list(self._readers))
            return
        origin, _, body = payload.partition("\n")
        if origin != self._origin:
            self._wake(_keys_in(body))

    def changed(self, change: Change) -> None:
        self._wake(stale_keys(change, list(self._readers)))

    def _wake(self, keys: Iterable[Key]) -> None:
        for key in keys:
            reader = self._readers.get(key)
            if reader is not None:
                reader.wake()

    async def close(self) -> None:
        """Ends every watch with UNAVAILABLE (clients watch again, on another replica) and
        stops the readers; later joins are refused."""
        self._closed = True
        readers = list(self._readers.values())
        stopping = "the server is shutting down: watch again (another replica)"
        for reader in readers:
            self.end(reader, Unavailable(stopping))
            reader.task.cancel()
        await asyncio.gather(*(r.task for r in readers), return_exceptions=True)


def _payloads(origin: str, keys: Sequence[Key]) -> Iterable[str]:
    """ "origin\ntenant|episode\n...", split to stay under the NOTIFY size limit ('|' is
    in no episode id, so the last one splits)."""
    lines: list[str] = []
    size = len(origin)
    for tenant_id, episode_id in keys:
        line = f"{tenant_id}|{episode_id}"
        if lines and size + len(line) + 1 > _PAYLOAD_BYTES:
            yield "\n".join([origin, *lines])
            lines, size = [], len(origin)
        lines.append(line)
        size += len(line.encode()) + 1
    if lines:
        yield "\n".join([origin, *lines])


def _keys_in(body: str) -> list[Key]:
    keys: list[Key] = []
    for line in body.split("\n"):
        tenant_id, sep, episode_id = line.rpartition("|")
        if sep:
            keys.append((tenant_id, episode_id))
    return keys
