"""Fuzzes every RPC of the episodic.v1 services against a live server and reports, per RPC,
how many generated requests ended in which status.

RPCs are discovered from the generated file descriptors, so a new RPC is fuzzed without
touching this file. Requests are drawn with Hypothesis in batches (tests/fuzz/strategies),
in worker processes while the previous batch is sent, each batch against ids seeded on the
server just before it was drawn. Bodies are sent as raw bytes (identity serializers), so
undecodable and wrong-type payloads travel exactly like valid ones; streams are consumed
to the end and every response must decode as the method's response type.

A run fails on: any INTERNAL or UNKNOWN status, an undecodable response, a failed health
check (every `health_every` calls and at the end; the subprocess still running), and a
partial write: a log whose seqs are not exactly 1..message_count, a rejected write whose
marked messages (unique client_message_ids) made it into a log, or the other tenant's
data changed. DEADLINE_EXCEEDED and RESOURCE_EXHAUSTED are counted, not failures.

    python -m tests.fuzz.runner --examples 10000 --backend sqlite|postgres
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import functools
import importlib
import json
import multiprocessing
import os
import pkgutil
import random
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
from google.protobuf import text_format
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import DecodeError, Message
from grpc_health.v1 import health_pb2, health_pb2_grpc

import episodic.v1
from episodic.edges.keys import config_line
from episodic.v1 import (
    agent_pb2,
    agent_service_pb2,
    context_service_pb2,
    diagnostics_service_pb2,
    episode_pb2,
    episode_service_pb2,
    memory_pb2,
    memory_service_pb2,
)
from episodic.v1.agent_service_pb2_grpc import AgentServiceStub
from episodic.v1.context_service_pb2_grpc import ContextServiceStub
from episodic.v1.diagnostics_service_pb2_grpc import DiagnosticsServiceStub
from episodic.v1.episode_service_pb2_grpc import EpisodeServiceStub
from episodic.v1.memory_service_pb2_grpc import MemoryServiceStub
from tests.fuzz.strategies import (
    MARKER_FIELD,
    Request,
    World,
    draw_examples,
    kind_counts,
    message_class,
    requests,
)
from tests.server_harness import KEY_A, KEY_B, TENANT_A, TENANT_B, bearer

if TYPE_CHECKING:
    from episodic.v1.episode_service_pb2_grpc import EpisodeServiceAsyncStub

Metadata = tuple[tuple[str, str], ...]
Code = grpc.StatusCode
FAILURE_CODES = (Code.INTERNAL, Code.UNKNOWN)
AMBIGUOUS_CODES = (
    Code.DEADLINE_EXCEEDED,
    Code.CANCELLED,
    Code.UNAVAILABLE,
)  # the write may still have landed
TABLE_CODES = (
    Code.OK, Code.INVALID_ARGUMENT, Code.NOT_FOUND, Code.FAILED_PRECONDITION, Code.ALREADY_EXISTS,
    Code.UNAUTHENTICATED, Code.RESOURCE_EXHAUSTED, Code.DEADLINE_EXCEEDED,
)  # fmt: skip
FAILED_COLUMN = "INTERNAL/UNKNOWN"
CLIENT_OPTIONS = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]  # the server's limits decide

# --- discovery ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rpc:
    path: str
    method: MethodDescriptor

    @property
    def name(self) -> str:
        return f"{self.method.containing_service.name}.{self.method.name}"


@functools.cache
def discover_rpcs() -> tuple[Rpc, ...]:
    """Every request-unary RPC of every service in the episodic.v1 generated modules."""
    found: list[Rpc] = []
    for module_info in pkgutil.iter_modules(episodic.v1.__path__):
        if not module_info.name.endswith("_pb2"):
            continue
        module = importlib.import_module(f"{episodic.v1.__name__}.{module_info.name}")
        for service in module.DESCRIPTOR.services_by_name.values():
            found += [
                Rpc(f"/{service.full_name}/{m.name}", m) for m in service.methods if not m.client_streaming
            ]
    return tuple(sorted(found, key=lambda rpc: rpc.name))


# --- drawing batches (in worker processes) ------------------------------------------------


@dataclass(frozen=True, slots=True)
class BatchTask:
    path: str
    count: int
    seed: int
    world: World


def draw_batch(task: BatchTask) -> list[Request]:
    """Runs in a worker process: `count` requests for one RPC, of each kind its share."""
    rpcs = {rpc.path: rpc for rpc in discover_rpcs()}
    other_types = sorted({rpc.method.input_type for rpc in rpcs.values()}, key=lambda d: d.full_name)
    drawn: list[Request] = []
    for offset, (kind, count) in enumerate(kind_counts(task.count).items()):
        strategy = requests(rpcs[task.path].method, task.world, other_types, kind)
        drawn += draw_examples(strategy, count, task.seed * 4 + offset) if count else []
    return drawn


class Drawer:
    """Draws batches in `workers` processes: off this process's event loop (which may be
    serving the server under test) and its `random` module state, which Hypothesis guards.
    Spawned, not forked: forking a process that runs gRPC is unsafe."""

    def __init__(self, workers: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._pool = concurrent.futures.ProcessPoolExecutor(max(1, workers), mp_context=context)

    def submit(self, tasks: Sequence[BatchTask]) -> list[asyncio.Future[list[Request]]]:
        return [asyncio.wrap_future(self._pool.submit(draw_batch, task)) for task in tasks]

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


# --- outcomes and the report --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    code: grpc.StatusCode
    details: str
    bad_response: str = ""  # why a response did not decode as the response type


@dataclass(frozen=True, slots=True)
class Failure:
    rpc: Rpc
    request: Request
    outcome: Outcome

    def describe(self) -> str:
        problem = self.outcome.bad_response or f"{self.outcome.code.name}: {self.outcome.details!r}"
        return (
            f"{self.rpc.path} [{self.request.kind}, credential {self.request.credential}] -> {problem}\n"
            f"  request ({len(self.request.body)} bytes): {request_text(self.rpc, self.request.body)}"
        )


def request_text(rpc: Rpc, body: bytes, limit: int = 1500) -> str:
    """The body in protobuf text format as the server decodes it (or hex when it does not)."""
    try:
        message = message_class(rpc.method.input_type).FromString(body)
    except DecodeError:
        return f"undecodable, hex {body[:200].hex()}{'...' if len(body) > 200 else ''}"
    text = text_format.MessageToString(message, as_one_line=True, as_utf8=True)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


def column_for(code: grpc.StatusCode) -> str:
    if code in FAILURE_CODES:
        return FAILED_COLUMN
    return code.name if code in TABLE_CODES else "other"


COLUMNS = ("sent", *(c.name for c in TABLE_CODES), "other", FAILED_COLUMN, "mean ms")


@dataclass
class Report:
    rpcs: Sequence[Rpc]
    tallies: dict[str, Counter[str]] = field(default_factory=dict)
    ok_by_kind: Counter[str] = field(default_factory=Counter)
    sent_by_kind: Counter[str] = field(default_factory=Counter)
    other_codes: Counter[str] = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)
    health_problems: list[str] = field(default_factory=list)
    invariant_violations: list[str] = field(default_factory=list)
    seconds: float = 0.0
    waiting_for_draws: float = 0.0

    def record(self, rpc: Rpc, request: Request, outcome: Outcome, seconds: float) -> None:
        tally = self.tallies.setdefault(rpc.name, Counter())
        tally["sent"] += 1
        tally["ms"] += round(seconds * 1000)
        tally[column_for(outcome.code)] += 1
        self.sent_by_kind[request.kind] += 1
        self.ok_by_kind[request.kind] += outcome.code == Code.OK
        if column_for(outcome.code) == "other":
            self.other_codes[f"{rpc.name} {outcome.code.name}"] += 1
        if outcome.code in FAILURE_CODES or outcome.bad_response:
            self.failures.append(Failure(rpc, request, outcome))

    @property
    def passed(self) -> bool:
        return not (self.failures or self.health_problems or self.invariant_violations)

    def sent(self, rpc: Rpc) -> int:
        return self.tallies.get(rpc.name, Counter())["sent"]

    def table(self) -> str:
        width = max(len(rpc.name) for rpc in self.rpcs) + 2
        rows = [self._row("RPC", COLUMNS, width)]
        total: Counter[str] = Counter()
        for rpc in self.rpcs:
            tally = self.tallies.get(rpc.name, Counter())
            total.update(tally)
            rows.append(self._row(rpc.name, self._cells(tally), width))
        rows.append(self._row("TOTAL", self._cells(total), width))
        return "\n".join(
            [
                *rows,
                self._kinds_line(),
                self._others_line(),
                f"took {self.seconds:.0f} s, {self.waiting_for_draws:.0f} s of it waiting for draws",
            ]
        )

    @staticmethod
    def _cells(tally: Counter[str]) -> list[str]:
        mean = f"{tally['ms'] / tally['sent']:.1f}" if tally["sent"] else "-"
        return [*(str(tally[c]) for c in COLUMNS[:-1]), mean]

    @staticmethod
    def _row(name: str, cells: Sequence[str], width: int) -> str:
        return name.ljust(width) + " ".join(
            cell.rjust(max(len(c), 5)) for cell, c in zip(cells, COLUMNS, strict=True)
        )

    def _kinds_line(self) -> str:
        parts = [f"{k} {n} ({self.ok_by_kind[k]} OK)" for k, n in sorted(self.sent_by_kind.items())]
        return "requests by kind: " + ", ".join(parts)

    def _others_line(self) -> str:
        return "other codes: " + (
            ", ".join(f"{k} x{n}" for k, n in sorted(self.other_codes.items())) or "none"
        )

    def problems(self, per_kind: int = 3) -> str:
        lines = [*self.health_problems, *self.invariant_violations]
        shown: Counter[tuple[str, str, str]] = Counter()
        for failure in self.failures:
            key = (failure.rpc.name, failure.outcome.code.name, failure.outcome.bad_response)
            shown[key] += 1
            if shown[key] <= per_kind:
                lines.append(failure.describe())
        if len(self.failures) > sum(min(n, per_kind) for n in shown.values()):
            lines.append(f"({len(self.failures)} failing calls in all)")
        return "\n".join(lines)


# --- tenants and the world each batch is drawn against ------------------------------------


@dataclass(frozen=True, slots=True)
class Tenants:
    """The fuzzed tenant's key, the other tenant's key, and the ids the other owns."""

    fuzzed_key: str = KEY_A
    other_key: str = KEY_B

    def metadata(self, credential: str) -> Metadata:
        return {
            "valid": bearer(self.fuzzed_key),
            "missing": (),
            "unknown": bearer("epk_fuzz_unknown_key_0123456789abcdef"),
            "malformed": (("authorization", f"Basic {self.fuzzed_key}"),),
        }[credential]


IdPools = dict[str, list[str]]
DESTRUCTIVE_PREFIXES = ("Close", "Erase", "Delete")  # RPCs that end what the others write into


@dataclass(frozen=True, slots=True)
class Seeded:
    """Ids that exist, by request field name: `shared` for most RPCs, `disposable` (open
    episodes of their own) for destructive ones, so these do not close every episode the
    others append to within the first few calls of a batch."""

    shared: IdPools
    disposable: IdPools

    def for_rpc(self, rpc: Rpc) -> IdPools:
        return self.disposable if rpc.method.name.startswith(DESTRUCTIVE_PREFIXES) else self.shared


async def seed_ids(channel: grpc.aio.Channel, auth: Metadata, tag: str) -> Seeded:
    """An agent; an open episode with pending tool calls; another with model calls; a
    closed one; two more open ones for the destructive RPCs. One user of their own, as
    fuzzed EraseUser calls erase the plausible users ("mary", "john")."""
    agents, episodes = AgentServiceStub(channel), EpisodeServiceStub(channel)
    agent = agent_pb2.Agent(agent_id=f"{tag}-agent", system_prompt="Be brief.", model="gpt-4")
    await agents.CreateAgent(agent_service_pb2.CreateAgentRequest(agent=agent), metadata=auth)
    ids, user = [f"{tag}-ep{i}" for i in range(5)], f"{tag}-user"
    for episode_id in ids:
        request = episode_service_pb2.OpenEpisodeRequest(
            agent_id=agent.agent_id, user_id=user, episode_id=episode_id
        )
        await episodes.OpenEpisode(request, metadata=auth)
    calls = [f"{tag}-call{i}" for i in range(3)]
    await _add(episodes, auth, ids[0], _user("hello"), _assistant_calling(calls))
    await _add(episodes, auth, ids[2], _user("bye"))
    await episodes.CloseEpisode(episode_service_pb2.CloseEpisodeRequest(episode_id=ids[2]), metadata=auth)
    model_calls = [await _build_context(channel, auth, ids[1]) for _ in range(3)]
    memories = await _memories(channel, auth, agent.agent_id, user, ids[0])
    common = {"agent_id": [agent.agent_id], "model_call_id": model_calls, "memory_id": memories}
    return Seeded(
        shared={**common, "episode_id": ids[:3], "tool_call_id": calls, "user_id": [user]},
        disposable={**common, "episode_id": ids[2:]},
    )


async def _memories(
    channel: grpc.aio.Channel, auth: Metadata, agent_id: str, user: str, episode_id: str
) -> list[str]:
    """Two long-term memories and one PENDING in an open episode."""
    stub = MemoryServiceStub(channel)
    texts = ("likes green tea", "lives in Porto")
    eager = memory_service_pb2.CreateMemoriesRequest(
        agent_id=agent_id,
        user_id=user,
        memories=[memory_service_pb2.MemoryInput(text=t, kind=memory_pb2.MEMORY_KIND_FACT) for t in texts],
    )
    lazy = memory_service_pb2.CreateMemoriesRequest(
        episode_id=episode_id,
        memories=[
            memory_service_pb2.MemoryInput(text="wants a quiet room", kind=memory_pb2.MEMORY_KIND_PREFERENCE)
        ],
    )
    made = [
        *(await stub.CreateMemories(eager, metadata=auth)).results,
        *(await stub.CreateMemories(lazy, metadata=auth)).results,
    ]
    return [r.memory.memory_id for r in made]


def _user(text: str) -> episode_pb2.MessageInput:
    return episode_pb2.MessageInput(role=episode_pb2.ROLE_USER, content=text)


def _assistant_calling(call_ids: Sequence[str]) -> episode_pb2.MessageInput:
    calls = [episode_pb2.ToolCall(tool_call_id=i, tool_name="search") for i in call_ids]
    return episode_pb2.MessageInput(role=episode_pb2.ROLE_ASSISTANT, tool_calls=calls)


async def _add(
    episodes: EpisodeServiceAsyncStub, auth: Metadata, episode_id: str, *messages: episode_pb2.MessageInput
) -> None:
    request = episode_service_pb2.AddMessagesRequest(episode_id=episode_id, messages=messages)
    await episodes.AddMessages(request, metadata=auth)


async def _build_context(channel: grpc.aio.Channel, auth: Metadata, episode_id: str) -> str:
    request = context_service_pb2.BuildContextRequest(
        episode_id=episode_id, user_message="What did I say?", append_user_message=True
    )
    frames = [frame async for frame in ContextServiceStub(channel).BuildContext(request, metadata=auth)]
    return str(frames[-1].report.model_call_id)


# --- partial writes -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WriteAttempt:
    """A rejected request that carried marked messages, and how it ended."""

    rpc: Rpc
    request: Request
    markers: tuple[str, ...]
    code: grpc.StatusCode


def markers_in(message: Message, prefix: str) -> list[str]:
    """Marked client_message_ids anywhere in the request (well-known types and maps skipped)."""
    found: list[str] = []
    for descriptor, value in message.ListFields():
        nested = descriptor.message_type
        if nested is None:
            if descriptor.name == MARKER_FIELD and value.startswith(prefix):
                found.append(value)
        elif not nested.full_name.startswith("google.protobuf.") and not nested.GetOptions().map_entry:
            for item in value if descriptor.is_repeated else [value]:
                found += markers_in(item, prefix)
    return found


def markers_of(rpc: Rpc, body: bytes, prefix: str) -> tuple[str, ...]:
    """What the server saw: the body decoded as the method's own request type."""
    try:
        return tuple(markers_in(message_class(rpc.method.input_type).FromString(body), prefix))
    except DecodeError:
        return ()


async def read_logs(
    channel: grpc.aio.Channel, auth: Metadata
) -> dict[str, tuple[int, list[episode_pb2.Message]]]:
    """episode_id -> (message_count, every message) for every episode of the tenant."""
    episodes = EpisodeServiceStub(channel)
    logs: dict[str, tuple[int, list[episode_pb2.Message]]] = {}
    token = ""
    while True:
        page = await episodes.ListEpisodes(
            episode_service_pb2.ListEpisodesRequest(page_size=1000, page_token=token), metadata=auth
        )
        for episode in page.episodes:
            logs[episode.episode_id] = (
                episode.message_count,
                await _messages(episodes, auth, episode.episode_id),
            )
        token = page.next_page_token
        if not token:
            return logs


async def _messages(
    episodes: EpisodeServiceAsyncStub, auth: Metadata, episode_id: str
) -> list[episode_pb2.Message]:
    messages: list[episode_pb2.Message] = []
    token = ""
    while True:
        request = episode_service_pb2.ListMessagesRequest(
            episode_id=episode_id, page_size=1000, page_token=token
        )
        page = await episodes.ListMessages(request, metadata=auth, timeout=60)
        messages += page.messages
        token = page.next_page_token
        if not token:
            return messages


def gaps_in(logs: dict[str, tuple[int, list[episode_pb2.Message]]]) -> list[str]:
    problems = []
    for episode_id, (count, messages) in logs.items():
        seqs = sorted(m.seq for m in messages)
        if seqs != list(range(1, count + 1)):
            problems.append(f"episode {episode_id!r}: message_count {count} but seqs {_ranges(seqs)}")
    return problems


def _ranges(seqs: list[int]) -> str:
    return str(seqs) if len(seqs) <= 20 else f"{seqs[:10]}...{seqs[-10:]} ({len(seqs)} in all)"


def leaked_markers(attempts: Sequence[WriteAttempt], present: set[str]) -> list[str]:
    problems = []
    for attempt in attempts:
        if attempt.code == Code.OK or attempt.code in AMBIGUOUS_CODES:
            continue
        leaked = sorted(present.intersection(attempt.markers))
        if leaked:
            problems.append(
                f"{attempt.rpc.name} ended {attempt.code.name} but its messages {leaked} are in a log; "
                f"request: {request_text(attempt.rpc, attempt.request.body)}"
            )
    return problems


# --- sending ------------------------------------------------------------------------------


# Streams that stay open while nothing goes wrong (a watch): a valid request would run to
# the deadline, so they get a short one; their DEADLINE_EXCEEDED is counted like any other.
ENDLESS_STREAMS = frozenset({"WatchEpisode"})
ENDLESS_STREAM_SECONDS = 0.3


def deadline_for(rpc: Rpc, deadline: float) -> float:
    return min(deadline, ENDLESS_STREAM_SECONDS) if rpc.method.name in ENDLESS_STREAMS else deadline


async def call_once(
    channel: grpc.aio.Channel, rpc: Rpc, request: Request, auth: Metadata, deadline: float
) -> Outcome:
    try:
        if rpc.method.server_streaming:
            stream = channel.unary_stream(rpc.path, request_serializer=None, response_deserializer=None)
            responses = [response async for response in stream(request.body, metadata=auth, timeout=deadline)]
        else:
            unary = channel.unary_unary(rpc.path, request_serializer=None, response_deserializer=None)
            responses = [await unary(request.body, metadata=auth, timeout=deadline)]
    except grpc.aio.AioRpcError as err:
        return Outcome(err.code(), err.details() or "")
    return Outcome(Code.OK, "", _undecodable(rpc, responses))


def _undecodable(rpc: Rpc, responses: list[bytes]) -> str:
    response_type = message_class(rpc.method.output_type)
    for i, raw in enumerate(responses):
        try:
            response_type.FromString(raw)
        except DecodeError as exc:
            return f"response {i} does not decode as {rpc.method.output_type.full_name}: {exc}"
    return ""


async def health_problem(channel: grpc.aio.Channel, auth: Metadata, alive: Callable[[], bool]) -> str:
    """Empty when the server answers health SERVING and an Echo round trip."""
    if not alive():
        return "the server process is gone"
    payload = os.urandom(16)
    try:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        echoed = await DiagnosticsServiceStub(channel).Echo(
            diagnostics_service_pb2.EchoRequest(payload=payload), metadata=auth, timeout=10
        )
    except grpc.aio.AioRpcError as err:
        return f"health check failed: {err.code().name} {err.details()}"
    if reply.status != health_pb2.HealthCheckResponse.SERVING or echoed.payload != payload:
        return f"health check: status {reply.status}, echo {'ok' if echoed.payload == payload else 'wrong'}"
    return ""


# --- the run ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Plan:
    examples: int = 150  # requests per RPC
    batch: int = 50  # requests per RPC drawn against one freshly seeded set of ids
    concurrency: int = 8
    seed: int = 0
    deadline_seconds: float = 10.0
    health_every: int = 500
    workers: int = 1  # processes drawing requests
    only: str = ""  # fuzz only RPCs whose name contains this


Progress = Callable[[str], None]


class Fuzzer:
    def __init__(
        self, channel: grpc.aio.Channel, plan: Plan, alive: Callable[[], bool], progress: Progress | None
    ) -> None:
        self.channel, self.plan, self.alive, self.progress = channel, plan, alive, progress
        self.tenants = Tenants()
        self.run_id = f"fz{uuid.uuid4().hex[:6]}"
        self.rpcs = [rpc for rpc in discover_rpcs() if plan.only in rpc.name]
        self.report = Report(self.rpcs)
        self.attempts: list[WriteAttempt] = []
        self.foreign: IdPools = {}
        self._sent = 0

    async def run(self) -> Report:
        started = time.monotonic()
        valid = self.tenants.metadata("valid")
        self.foreign = (
            await seed_ids(self.channel, bearer(self.tenants.other_key), f"{self.run_id}-b")
        ).shared
        foreign_before = await read_logs(self.channel, bearer(self.tenants.other_key))
        drawer = Drawer(self.plan.workers)
        try:
            await self._all_batches(drawer)
            await self._record_health(valid)
            await self._check_invariants(valid, foreign_before)
        except grpc.aio.AioRpcError as err:  # seeding or reading the logs back failed
            self.report.health_problems.append(f"after {self._sent} calls: {err.code().name} {err.details()}")
        finally:
            drawer.close()
        self.report.seconds = time.monotonic() - started
        return self.report

    def _batches(self) -> int:
        return -(-self.plan.examples // self.plan.batch)

    def _count(self, batch: int) -> int:
        return min(self.plan.batch, self.plan.examples - batch * self.plan.batch)

    async def _all_batches(self, drawer: Drawer) -> None:
        pending = await self._draw(drawer, 0)
        for batch in range(self._batches()):
            following = await self._draw(drawer, batch + 1) if batch + 1 < self._batches() else []
            waited = time.monotonic()
            drawn = [await future for future in pending]
            self.report.waiting_for_draws += time.monotonic() - waited
            await self._send_batch(drawn, batch)
            self._report_progress(batch)
            if self.report.health_problems and not self.alive():
                return
            pending = following

    def _report_progress(self, batch: int) -> None:
        if self.progress is not None:
            failed = len(self.report.failures) + len(self.report.health_problems)
            self.progress(f"batch {batch + 1}/{self._batches()}: {self._sent} calls, {failed} failures")

    async def _draw(self, drawer: Drawer, batch: int) -> list[asyncio.Future[list[Request]]]:
        seeded = await seed_ids(self.channel, self.tenants.metadata("valid"), f"{self.run_id}-{batch}")
        now = int(time.time())
        tasks = [
            BatchTask(
                rpc.path,
                self._count(batch),
                self.plan.seed * 1_000_003 + batch * 1009 + index,
                World.of(seeded.for_rpc(rpc), self.foreign, self.run_id, now),
            )
            for index, rpc in enumerate(self.rpcs)
        ]
        return drawer.submit(tasks)

    async def _send_batch(self, drawn: list[list[Request]], batch: int) -> None:
        calls = [
            (rpc, request) for rpc, requests_ in zip(self.rpcs, drawn, strict=True) for request in requests_
        ]
        random.Random(self.plan.seed * 7919 + batch).shuffle(calls)  # RPCs interleave, as in real traffic
        semaphore = asyncio.Semaphore(self.plan.concurrency)

        async def send(rpc: Rpc, request: Request) -> None:
            async with semaphore:
                await self._send(rpc, request)

        await asyncio.gather(*(send(rpc, request) for rpc, request in calls))

    async def _send(self, rpc: Rpc, request: Request) -> None:
        auth = self.tenants.metadata(request.credential)
        started = time.perf_counter()
        outcome = await call_once(
            self.channel, rpc, request, auth, deadline_for(rpc, self.plan.deadline_seconds)
        )
        self.report.record(rpc, request, outcome, time.perf_counter() - started)
        rejected = outcome.code != Code.OK and outcome.code not in AMBIGUOUS_CODES
        markers = markers_of(rpc, request.body, self.run_id) if rejected else ()
        if markers:
            self.attempts.append(WriteAttempt(rpc, request, markers, outcome.code))
        self._sent += 1
        if self._sent % self.plan.health_every == 0:
            await self._record_health(self.tenants.metadata("valid"))

    async def _record_health(self, auth: Metadata) -> None:
        problem = await health_problem(self.channel, auth, self.alive)
        if problem:
            self.report.health_problems.append(f"after {self._sent} calls: {problem}")

    async def _check_invariants(
        self, auth: Metadata, foreign_before: dict[str, tuple[int, list[episode_pb2.Message]]]
    ) -> None:
        if not self.alive():
            return
        logs = await read_logs(self.channel, auth)
        present = {m.client_message_id for _, messages in logs.values() for m in messages}
        violations = gaps_in(logs) + leaked_markers(self.attempts, present)
        if await read_logs(self.channel, bearer(self.tenants.other_key)) != foreign_before:
            violations.append("the other tenant's episodes or messages changed")
        self.report.invariant_violations += violations


async def fuzz(
    address: str, plan: Plan, alive: Callable[[], bool] = lambda: True, progress: Progress | None = None
) -> Report:
    async with grpc.aio.insecure_channel(address, options=CLIENT_OPTIONS) as channel:
        return await Fuzzer(channel, plan, alive, progress).run()


# --- the standalone long run: a real server subprocess ------------------------------------

START_TIMEOUT_SECONDS = 60.0


@dataclass
class ServerProcess:
    process: asyncio.subprocess.Process
    port: int
    log_path: Path

    def alive(self) -> bool:
        return self.process.returncode is None

    def unexpected_errors(self, limit: int = 40) -> str:
        lines = self.log_path.read_text(errors="replace").splitlines()
        errors = [line for line in lines if "unexpected error" in line or "Traceback" in line]
        return "\n".join(errors[:limit])


def server_command(database_url: str) -> list[str]:
    keys = ",".join([config_line(TENANT_A, KEY_A), config_line(TENANT_B, KEY_B)])
    return [
        sys.executable, "-m", "episodic", "serve", "--database-url", database_url, "--migrate-on-start",
        "--api-keys", keys, "--embedder", "hashing", "--no-access-log", "--address", "127.0.0.1:0",
    ]  # fmt: skip


@asynccontextmanager
async def server_process(database_url: str, workdir: Path) -> AsyncIterator[ServerProcess]:
    log_path = workdir / "server.log"
    with log_path.open("wb") as log_file:
        process = await asyncio.create_subprocess_exec(
            *server_command(database_url), stdout=asyncio.subprocess.DEVNULL, stderr=log_file, cwd=workdir
        )
        try:
            yield ServerProcess(process, await _serving_port(process, log_path), log_path)
        finally:
            await _stop(process)


async def _serving_port(process: asyncio.subprocess.Process, log_path: Path) -> int:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline and process.returncode is None:
        log = await asyncio.to_thread(log_path.read_text, errors="replace")
        for line in log.splitlines():
            if line.startswith("{") and '"serving"' in line:
                return int(json.loads(line)["port"])
        await asyncio.sleep(0.1)
    raise RuntimeError(f"the server did not start; see {log_path}")


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), 30)
        except TimeoutError:
            process.kill()
            await process.wait()


@asynccontextmanager
async def database(backend: str, workdir: Path, admin_url: str) -> AsyncIterator[str]:
    from episodic_lab.bench.databases import throwaway_database

    async with throwaway_database(backend, workdir, admin_url) as url:
        yield url


async def long_run(args: argparse.Namespace) -> int:
    plan = Plan(
        examples=args.examples, batch=args.batch, concurrency=args.concurrency, seed=args.seed,
        workers=args.workers, only=args.only,
    )  # fmt: skip
    workdir = Path(tempfile.mkdtemp(prefix="episodic-fuzz-"))
    async with (
        database(args.backend, workdir, args.postgres_admin_url) as url,
        server_process(url, workdir) as server,
    ):
        report = await fuzz(f"127.0.0.1:{server.port}", plan, server.alive, _print_progress)
        await _stop(server.process)
        if server.process.returncode not in (0, -signal.SIGTERM):
            report.health_problems.append(f"the server exited with {server.process.returncode}")
    print(f"\n{args.backend}, {plan.examples} requests per RPC, seed {plan.seed}\n{report.table()}")
    if not report.passed:
        print(f"\nFAILED\n{report.problems()}\n\nserver log {server.log_path}:\n{server.unexpected_errors()}")
        return 1
    print("\nPASSED: no INTERNAL/UNKNOWN, server healthy throughout, no partial writes")
    shutil.rmtree(workdir, ignore_errors=True)  # kept on failure, for the server log and database
    return 0


def _print_progress(line: str) -> None:
    print(time.strftime("%H:%M:%S"), line, file=sys.stderr, flush=True)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.runner", description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=10_000, help="requests per RPC")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--batch", type=int, default=100, help="requests per RPC per freshly seeded batch")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--only", default="", help="fuzz only RPCs whose name contains this")
    parser.add_argument(
        "--postgres-admin-url",
        default=os.environ.get("EPISODIC_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    return asyncio.run(long_run(parse_args(argv)))


if __name__ == "__main__":
    from tests.fuzz import runner  # the module by its importable name, so worker processes can load it

    sys.exit(runner.main())
