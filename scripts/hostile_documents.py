"""Prints how much tenant A's hostile document slows tenant B's Echo: B calls Echo back to
back, first alone (the quiet baseline), then while A sends CreateDocuments with one 2 MiB
document of one-line sections ("a\\n=\\n" x 524,287, which cut into 524,287 chunks unbounded),
and prints B's p50/p99/max in both windows and their ratios, and what A was answered. An
in-process server on a fresh SQLite file (tests/server_harness.py), hashing embedder, its
start-up's objects frozen for the collector as `episodic serve` freezes them; quiet
and attacked windows alternate, so a busy second of the machine weighs on both alike.

    .venv/bin/python scripts/hostile_documents.py                 # 3 + 3 windows, 2 documents each
    .venv/bin/python scripts/hostile_documents.py --windows 5 --documents 4

A figure, not a test: it asserts nothing. The tests of the same behaviour, structurally
(refused naming the field, cut off the event loop, bounded work) are in
tests/unit/test_knowledge_use_cases.py and tests/unit/test_document_chunking.py.

Before the documents were cut on the embed pool and bounded (issue 43, finding 2): B's Echo
stalled 3.4-4.3 s while such a document was cut on the event loop, even when it was then
refused by the chunk share; with the share lifted, 524,287 chunks, 83-89 s, B's Echo up to
6.6 s, RSS 1.9 GiB."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc

from episodic.cli.serve import freeze_start_up
from episodic.v1 import diagnostics_service_pb2, knowledge_service_pb2
from tests.e2e.helpers import Client
from tests.server_harness import KEY_A, KEY_B, running_server, settings_for

HOSTILE = "a\n=\n" * 524_287
WARM_UP_CALLS = 200
QUIET_CALLS = 500


def quantile(latencies: list[float], q: float) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def figures(latencies: list[float]) -> str:
    p50, p99 = quantile(latencies, 0.5), quantile(latencies, 0.99)
    return f"p50 {p50 * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms, max {max(latencies) * 1000:.1f} ms"


async def echo(b: Client) -> float:
    started = time.perf_counter()
    await b.diagnostics.Echo(diagnostics_service_pb2.EchoRequest(payload=b"ping"), metadata=b.auth)
    return time.perf_counter() - started


async def echoes_until(b: Client, done: asyncio.Event, at_least: int) -> list[float]:
    measured: list[float] = []
    while not done.is_set() or len(measured) < at_least:
        measured.append(await echo(b))
    return measured


async def hostile_calls(a: Client, agent_id: str, documents: int, answers: list[str]) -> None:
    for n in range(documents):
        document = knowledge_service_pb2.DocumentInput(document_id=f"hostile-{n}", text=HOSTILE)
        request = knowledge_service_pb2.CreateDocumentsRequest(agent_id=agent_id, documents=[document])
        started = time.perf_counter()
        try:
            await a.knowledge.CreateDocuments(request, metadata=a.auth, timeout=300)
            code = "OK"
        except grpc.aio.AioRpcError as error:
            code = f"{error.code().name}: {(error.details() or '')[:90]}"
        answers.append(f"{code} in {time.perf_counter() - started:.2f} s")


async def measure(database_url: str, windows: int, documents: int, lift_share: bool) -> None:
    overrides: dict[str, object] = {"migrate_on_start": True, "max_receive_message_bytes": 8 * 1024 * 1024}
    if lift_share:  # so that only the per-document limit can refuse it
        overrides |= {"tenant_knowledge_chunks_burst": 10_000_000, "tenant_knowledge_chunks_per_second": 1e6}
    quiet: list[float] = []
    attacked: list[float] = []
    answers: list[str] = []
    async with (
        running_server(settings_for(database_url, **overrides)) as server,
        server.channel() as a_channel,
        server.channel() as b_channel,
    ):
        a, b = Client.of(a_channel, KEY_A), Client.of(b_channel, KEY_B)
        agent_id = await a.create_agent("hostile-writer")
        for _ in range(WARM_UP_CALLS):
            await echo(b)
        freeze_start_up()  # as `episodic serve` does once started: full collections walk less
        for window in range(1, windows + 1):
            calm = [await echo(b) for _ in range(QUIET_CALLS)]
            done = asyncio.Event()
            attack = asyncio.create_task(hostile_calls(a, agent_id, documents, answers))
            attack.add_done_callback(_setter(done))
            hit = await echoes_until(b, done, QUIET_CALLS)
            await attack
            quiet += calm
            attacked += hit
            print(f"window {window}: B's Echo quiet {figures(calm)}; attacked {figures(hit)}", flush=True)
    ratio50 = quantile(attacked, 0.5) / quantile(quiet, 0.5)
    ratio99 = quantile(attacked, 0.99) / quantile(quiet, 0.99)
    print(f"B's Echo quiet:    {figures(quiet)} ({len(quiet)} calls)")
    print(f"B's Echo attacked: {figures(attacked)} ({len(attacked)} calls)")
    print(f"ratio to quiet: p50 {ratio50:.2f}x, p99 {ratio99:.2f}x, max {max(attacked) / max(quiet):.1f}x")
    print(f"A's CreateDocuments ({len(answers)}): median {statistics.median(_seconds(answers)):.2f} s")
    for answer in sorted({a.rsplit(" in ", 1)[0] for a in answers}):
        print(f"  {answer}")


def _setter(event: asyncio.Event) -> Callable[[object], None]:
    return lambda _: event.set()


def _seconds(answers: list[str]) -> list[float]:
    return [float(a.rsplit(" in ", 1)[1].removesuffix(" s")) for a in answers]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int, default=3, help="quiet/attacked window pairs (default 3)")
    parser.add_argument("--documents", type=int, default=2, help="hostile calls per window (default 2)")
    parser.add_argument(
        "--lift-share", action="store_true", help="lift tenant A's chunk share, as the issue's second run did"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(measure(f"sqlite:///{folder}/hostile.db", args.windows, args.documents, args.lift_share))


if __name__ == "__main__":
    main(sys.argv[1:])
