"""Losing the database primary under load, measured: two `episodic serve` replicas (A, B)
on a primary + synchronous standby pair (`tests/chaos/pg_pair.py`) named by one libpq
multi-host URL; writers append through A; the primary is SIGKILLed and, once A has
noticed, the standby is promoted. What the clients saw is returned as `Figures`: every
acknowledged write and whether it is still there, the codes of the calls that failed,
how long writes stopped, A's health over time, whether a change made through A after the
promotion reached B's RAM (the feed tail and its LISTEN connection came back) and whether
a replica leads the cluster jobs again.

Used by tests/chaos/test_primary_failover.py (asserts) and scripts/failover.py (prints)."""

from __future__ import annotations

import asyncio
import collections
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from episodic.v1 import context_service_pb2, memory_pb2, memory_service_pb2
from episodic.v1 import episode_service_pb2 as es
from tests.chaos.pg_pair import Pair, primary_and_standby
from tests.e2e.helpers import Client, user_message
from tests.e2e.replicas import Replica, free_port, migrate

WRITERS = 4
PER_EPISODE = 400  # ListMessages reads 1,000 at most: a writer moves on before that
CALL_SECONDS = 15.0
STATE_SECONDS = 90.0  # the longest any awaited state may take on a loaded 2-core machine
WRITES_BEFORE = 40  # acknowledged writes before the kill
WRITES_AFTER = 20  # per writer, after the promotion
LEADING = "leading a cluster job"
STATUS = health_pb2.HealthCheckResponse.ServingStatus


@dataclass
class Figures:
    acknowledged: int = 0
    lost: int = 0
    failed: collections.Counter[str] = field(default_factory=collections.Counter)  # "Method CODE"
    first_failure_after_kill: float | None = None
    promoted_after_kill: float = 0.0
    first_write_after_kill: float | None = None  # seconds from the kill to the new primary's first ack
    health: list[tuple[float, str]] = field(default_factory=list)  # A's changes, seconds from the kill
    feed_seconds: float | None = None  # a change through A, after the promotion, seen by B
    leading_again: bool = False
    problems: list[str] = field(default_factory=list)  # ERROR lines the replicas logged

    @property
    def codes(self) -> set[str]:
        return {key.split(" ", 1)[1] for key in self.failed}

    def lines(self) -> list[str]:
        health = ", ".join(f"{status} at {at:+.2f} s" for at, status in self.health)
        failed = ", ".join(f"{n} {key}" for key, n in sorted(self.failed.items())) or "none"
        first = self.first_write_after_kill
        return [
            f"acknowledged writes: {self.acknowledged}, lost: {self.lost}",
            f"failed calls: {failed}",
            f"first failure {_seconds(self.first_failure_after_kill)} after the kill; "
            f"standby promoted (pg_ctl promote returned) {self.promoted_after_kill:.2f} s after the kill",
            f"first write on the new primary: {_seconds(first)} after the kill, "
            f"{_seconds(None if first is None else first - self.promoted_after_kill)} after the promotion",
            f"health of A (from the kill): {health or 'SERVING throughout'}",
            f"a change through A reached B's RAM {_seconds(self.feed_seconds)} after it was made",
            f"cluster jobs led again after the kill: {'yes' if self.leading_again else 'no'}",
            f"ERROR lines logged: {len(self.problems)}",
        ]


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.2f} s"


@dataclass
class Load:
    """Writers appending through A, each call's outcome recorded; BuildContext beside them."""

    client: Client
    figures: Figures
    killed_at: float | None = None
    acked: dict[str, list[int]] = field(default_factory=dict)  # episode -> acknowledged seqs
    acked_after_kill: int = 0
    running: bool = True

    async def writer(self, agent_id: str, number: int) -> None:
        episode = ""
        sent = 0
        while self.running:
            if sent % PER_EPISODE == 0:
                episode = await self._open(agent_id)
            sent += 1
            await self._call("AddMessages", self._add(episode, f"writer {number} message {sent}"))

    async def builder(self, agent_id: str) -> None:
        episode = await self._open(agent_id)
        while self.running:
            await self._call("BuildContext", self._build(episode))

    async def _open(self, agent_id: str) -> str:
        while True:  # opened through the failover too
            try:
                episode = await self.client.open_episode(agent_id)
            except grpc.aio.AioRpcError as err:
                self._failed("OpenEpisode", err)
                await asyncio.sleep(0.05)
                continue
            self.acked.setdefault(episode, [])
            return episode

    async def _add(self, episode: str, text: str) -> None:
        """A call begun after the kill can only succeed on the new primary (one begun
        before may still be answered by the old one: its commit raced the kill)."""
        after_kill = self.killed_at is not None
        request = es.AddMessagesRequest(episode_id=episode, messages=[user_message(text)])
        reply = await self.client.episodes.AddMessages(request, timeout=CALL_SECONDS)
        self.acked[episode] += [m.seq for m in reply.messages]
        self.figures.acknowledged += len(reply.messages)
        if after_kill and self.killed_at is not None:
            self.acked_after_kill += 1
            if self.figures.first_write_after_kill is None:
                self.figures.first_write_after_kill = time.monotonic() - self.killed_at

    async def _build(self, episode: str) -> None:
        request = context_service_pb2.BuildContextRequest(episode_id=episode, user_message="what now?")
        async for _ in self.client.context.BuildContext(request, timeout=CALL_SECONDS):
            pass

    async def _call(self, method: str, call: Awaitable[None]) -> None:
        try:
            await call
        except grpc.aio.AioRpcError as err:
            self._failed(method, err)
            await asyncio.sleep(0.05)  # a client's retry back-off

    def _failed(self, method: str, err: grpc.aio.AioRpcError) -> None:
        self.figures.failed[f"{method} {err.code().name}"] += 1
        if self.killed_at is not None and self.figures.first_failure_after_kill is None:
            self.figures.first_failure_after_kill = time.monotonic() - self.killed_at


async def _health_of(channel: grpc.aio.Channel) -> str:
    try:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
    except grpc.aio.AioRpcError as err:
        return f"no answer ({err.code().name})"
    return str(STATUS.Name(reply.status))


async def _watch_health(channel: grpc.aio.Channel, load: Load, figures: Figures) -> None:
    last = "SERVING"
    while load.running:
        status = await _health_of(channel)
        if status != last and load.killed_at is not None:
            figures.health.append((time.monotonic() - load.killed_at, status))
        last = status
        await asyncio.sleep(0.02)


async def _until(what: str, check: Callable[[], Awaitable[bool]]) -> None:
    deadline = time.monotonic() + STATE_SECONDS
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {STATE_SECONDS:.0f} s: {what}")
        await asyncio.sleep(0.02)


async def _remember(client: Client, agent_id: str, text: str) -> str:
    request = memory_service_pb2.CreateMemoriesRequest(
        agent_id=agent_id,
        user_id="mary",
        placement=memory_service_pb2.MEMORY_PLACEMENT_EAGER,
        memories=[memory_service_pb2.MemoryInput(text=text, kind=memory_pb2.MEMORY_KIND_FACT)],
    )
    reply = await client.memories.CreateMemories(request, timeout=CALL_SECONDS)
    return str(reply.results[0].memory.memory_id)


async def _finds(client: Client, agent_id: str, memory_id: str) -> bool:
    request = memory_service_pb2.SearchMemoriesRequest(
        agent_id=agent_id, user_id="mary", query="cello", top_k=10, mode=es.SEARCH_MODE_SEMANTIC
    )
    reply = await client.memories.SearchMemories(request, timeout=CALL_SECONDS)
    return memory_id in {h.memory.memory_id for h in reply.hits}


def _entries(replica: Replica) -> list[dict[str, object]]:
    found = []
    for line in replica.log_path.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            found.append(entry)
    return found


def _count(replicas: list[Replica], message: str) -> int:
    return sum(e.get("message") == message for r in replicas for e in _entries(r))


async def _lost(client: Client, acked: dict[str, list[int]]) -> int:
    lost = 0
    for episode, seqs in acked.items():
        stored = {m.seq for m in await client.log_of(episode)}
        lost += len(set(seqs) - stored)
    return lost


async def _fail_over(
    pair: Pair, a: Replica, b: Replica, figures: Figures, promote_after: float, writes_before: int
) -> None:
    async with a.channel() as channel_a, b.channel() as channel_b:
        client_a, client_b = Client.of(channel_a, None), Client.of(channel_b, None)
        agent_id = await client_a.create_agent()
        first = await _remember(client_a, agent_id, "Mary plays the cello on Sundays")
        await _until("B finds a memory made through A", lambda: _finds(client_b, agent_id, first))

        load = Load(client_a, figures)
        tasks = [asyncio.create_task(load.writer(agent_id, n)) for n in range(WRITERS)]
        tasks += [
            asyncio.create_task(load.builder(agent_id)),
            asyncio.create_task(_watch_health(channel_a, load, figures)),
        ]
        try:
            await _until(
                "writes acknowledged before the kill", _at_least(lambda: figures.acknowledged, writes_before)
            )
            leading_before = _count([a, b], LEADING)
            load.killed_at = time.monotonic()
            pair.primary.kill()
            await _until("A noticed the primary's loss", _at_least(lambda: sum(figures.failed.values()), 1))
            await asyncio.sleep(promote_after)  # an operator's (or a failover manager's) delay
            await asyncio.to_thread(pair.standby.promote)
            figures.promoted_after_kill = time.monotonic() - load.killed_at
            await _until(
                "writes acknowledged by the new primary",
                _at_least(lambda: load.acked_after_kill, WRITERS * WRITES_AFTER),
            )
            await _until("A SERVING again", lambda: _is_serving(channel_a))
        finally:
            load.running = False
            await asyncio.gather(*tasks, return_exceptions=True)

        made = time.monotonic()
        second = await _remember(client_a, agent_id, "Mary also plays the cello in an orchestra")
        await _until(
            "B finds a memory made through A after the promotion", lambda: _finds(client_b, agent_id, second)
        )
        figures.feed_seconds = time.monotonic() - made
        await _until(
            "a replica leads the cluster jobs again",
            _at_least(lambda: _count([a, b], LEADING), leading_before + 1),
        )
        figures.leading_again = True
        figures.lost = await _lost(client_a, load.acked)


def _at_least(value: Callable[[], int], wanted: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return value() >= wanted

    return check


async def _is_serving(channel: grpc.aio.Channel) -> bool:
    return await _health_of(channel) == "SERVING"


async def measure_failover(
    workdir: Path, promote_after: float = 0.0, writes_before: int = WRITES_BEFORE
) -> Figures:
    """The whole run: clusters made, replicas started, `writes_before` writes acknowledged,
    the failover (the standby promoted `promote_after` seconds after A noticed the loss),
    everything stopped."""
    figures = Figures()
    with primary_and_standby() as pair:
        url = pair.url()
        await asyncio.to_thread(migrate, url)  # the comma form, at start-up too
        replicas = [Replica(name, free_port(), url, workdir) for name in ("A", "B")]
        try:
            for replica in replicas:
                replica.start()
            await asyncio.gather(*(r.wait_serving() for r in replicas))
            await _fail_over(pair, replicas[0], replicas[1], figures, promote_after, writes_before)
        finally:
            for replica in replicas:
                await replica.kill()
        figures.problems = [
            str(e.get("message"))
            for r in replicas
            for e in _entries(r)
            if e.get("level") in {"ERROR", "CRITICAL"}
        ]
    return figures
