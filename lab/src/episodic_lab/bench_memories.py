"""`episodic-lab bench-memories`: SearchMemories latency at N stored memories next to the Echo
baseline, over gRPC to an in-process server (the composition root's door, no background
work), on a fresh SQLite file.

The memories are written straight through the memory store (as promotion writes them) with
the hashing embedder's vectors of synthetic statements, then the server starts and loads
its memory index from SQL, as after a restart. Two layouts: N memories spread over
N/100 users (100 each, the expected shape) and N in one user's scope (the worst case: one
exact search over every vector). One call in flight; figures are p50/p99 in ms and the
ratio to Echo measured in the same run (these machines are noisy: compare ratios)."""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc

from episodic.bootstrap.containers import Replacements
from episodic.bootstrap.lifecycle import open_app, serve_app
from episodic.config import EmbedderKind, Settings
from episodic.domain.agents import AgentDraft
from episodic.domain.changes import NO_CHANGES
from episodic.domain.memories import Memory, MemoryKind, MemoryOrigin, MemoryState, Source
from episodic.domain.model import Caller
from episodic.domain.ports.memories import MemoryWrite
from episodic.v1 import diagnostics_service_pb2, episode_service_pb2, memory_service_pb2
from episodic.v1.diagnostics_service_pb2_grpc import DiagnosticsServiceStub
from episodic.v1.memory_service_pb2_grpc import MemoryServiceStub
from episodic_lab.bench_recall.latency import Budget, Figures, timed

AGENT = "bench-memories"
WRITE_BATCH = 2000
SUBJECTS = ("tea", "coffee", "jazz", "cello", "Lisbon", "Porto", "Kyoto", "surfing", "cats", "chess", "sushi")
VERBS = ("likes", "visited", "learned", "dislikes", "plans", "bought", "studies", "prefers")
MODES = {
    "semantic": episode_service_pb2.SEARCH_MODE_SEMANTIC,
    "hybrid": episode_service_pb2.SEARCH_MODE_HYBRID,
    "recency": episode_service_pb2.SEARCH_MODE_RECENCY,
}


@dataclass(frozen=True, slots=True)
class Layout:
    name: str
    users: int


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--memories", type=int, default=100_000, help="memories stored per layout")
    parser.add_argument("--calls", type=int, default=500, help="measured calls per RPC")
    parser.add_argument("--seconds", type=float, default=30.0, help="time budget per RPC")
    parser.add_argument("--layouts", default="spread,one-scope", help="spread (100 per user), one-scope")


def run_bench_memories(args: argparse.Namespace) -> int:
    layouts = {"spread": Layout("spread", max(args.memories // 100, 1)), "one-scope": Layout("one-scope", 1)}
    chosen = [layouts[name] for name in args.layouts.split(",") if name]
    print(f"SearchMemories at {args.memories} memories, top 5, hashing embedder, one call in flight")
    print(f"{'layout':<10} {'rpc':<22} {'p50 ms':>8} {'p99 ms':>8} {'x echo p50':>10} {'x echo p99':>10}")
    for layout in chosen:
        asyncio.run(_bench(layout, args.memories, Budget.of(args.calls, args.seconds)))
    return 0


async def _bench(layout: Layout, count: int, budget: Budget) -> None:
    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(
            address="127.0.0.1:0",
            database_url=f"sqlite:///{Path(folder) / 'bench.db'}",
            insecure_dev=True,
            embedder=EmbedderKind.HASHING,
            access_log=False,
            migrate_on_start=True,
        )
        began = time.perf_counter()
        await _store(settings, layout, count)
        stored = time.perf_counter() - began
        async with (
            open_app(settings, replace=Replacements(background=False)) as app,
            serve_app(app) as server,
        ):
            print(f"{layout.name:<10} (stored in {stored:.1f} s; {layout.users} users)")
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                await _measure(channel, layout, budget)


async def _store(settings: Settings, layout: Layout, count: int) -> None:
    async with open_app(settings, replace=Replacements(background=False)) as app:
        caller = Caller(settings.dev_tenant)
        await app.services.agents.create_agent(caller, AgentDraft(AGENT, model="gpt-4"))
        rng, now = random.Random(7), datetime.now(UTC)
        for start in range(0, count, WRITE_BATCH):
            n = min(WRITE_BATCH, count - start)
            memories = [_memory(settings.dev_tenant, layout, start + i, rng, now) for i in range(n)]
            vectors = app.adapters.embedder.embed([m.text for m in memories])
            rows = MemoryWrite(insert=list(zip(memories, vectors, strict=True)))
            await app.adapters.memories.write(rows, NO_CHANGES)  # a load: nothing is searched yet


def _memory(tenant: str, layout: Layout, i: int, rng: random.Random, now: datetime) -> Memory:
    text = f"The user {rng.choice(VERBS)} {rng.choice(SUBJECTS)} and {rng.choice(SUBJECTS)} (note {i})"
    at = now - timedelta(seconds=i)
    return Memory(
        tenant, f"m{i}", AGENT, f"user{i % layout.users}", text, MemoryKind.FACT,
        Source(MemoryOrigin.CLIENT), MemoryState.PROMOTED, at, at,
    )  # fmt: skip


async def _measure(channel: grpc.aio.Channel, layout: Layout, budget: Budget) -> None:
    echo_stub, memories = DiagnosticsServiceStub(channel), MemoryServiceStub(channel)

    async def echo(_: int) -> object:
        return await echo_stub.Echo(diagnostics_service_pb2.EchoRequest())

    baseline = await timed(echo, budget)
    _row(layout.name, "Echo", baseline, baseline)
    rng = random.Random(11)
    for name, mode in MODES.items():

        async def search(_: int, mode: episode_service_pb2.SearchMode.ValueType = mode) -> object:
            query = "" if mode == episode_service_pb2.SEARCH_MODE_RECENCY else f"likes {rng.choice(SUBJECTS)}"
            request = memory_service_pb2.SearchMemoriesRequest(
                agent_id=AGENT, user_id=f"user{rng.randrange(layout.users)}", mode=mode, query=query, top_k=5
            )
            return await memories.SearchMemories(request)

        _row(layout.name, f"SearchMemories {name}", await timed(search, budget), baseline)


def _row(layout: str, rpc: str, f: Figures, echo: Figures) -> None:
    print(
        f"{layout:<10} {rpc:<22} {f.p50_ms:>8.2f} {f.p99_ms:>8.2f} "
        f"{f.p50_ms / echo.p50_ms:>10.1f} {f.p99_ms / echo.p99_ms:>10.1f}"
    )
