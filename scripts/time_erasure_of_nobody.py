"""Times what tenant A's erasures of unknown users cost tenant B: an in-process server on a
fresh database, tenant B's history seeded (so the full-text index and tables hold
something), then tenant B's AddMessage latency alone and while tenant A loops EraseUser of
users it never had, one every ERASE_EVERY_SECONDS (the same load before and after a change).
Prints p50/p99 of both phases and the ratios, measured in the same run, and the erasures'
own median time.

    .venv/bin/python scripts/time_erasure_of_nobody.py            # a temporary SQLite file
    .venv/bin/python scripts/time_erasure_of_nobody.py postgres   # a throwaway PostgreSQL database
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from episodic.v1 import episode_service_pb2
from tests.e2e.helpers import Client, user_message
from tests.server_harness import KEY_A, KEY_B, running_server, settings_for
from tests.throwaway_postgres import throwaway_postgres

SEED_BATCHES = 200
SEED_BATCH = 100
SAMPLES = 400
ERASE_EVERY_SECONDS = 0.02
# Tenant B's sequential calls would otherwise meet its fair share of requests per second.
UNLIMITED = {"tenant_rate_per_second": 100_000.0, "tenant_rate_burst": 100_000}


@asynccontextmanager
async def database(kind: str) -> AsyncIterator[str]:
    if kind == "postgres":
        async with throwaway_postgres() as url:
            yield url
        return
    with tempfile.TemporaryDirectory() as folder:
        yield f"sqlite:///{folder}/erasure.db"


async def seed(client: Client) -> str:
    episode_id = await client.open_episode()
    for n in range(SEED_BATCHES):
        batch = [
            user_message(f"note {n}-{i}: water the tomatoes at dawn, basil {i}") for i in range(SEED_BATCH)
        ]
        await client.add(episode_id, *batch)
    return episode_id


async def add_latencies(client: Client, episode_id: str) -> list[float]:
    times = []
    for i in range(SAMPLES):
        started = time.perf_counter()
        await client.add(episode_id, user_message(f"one more line {i}"))
        times.append((time.perf_counter() - started) * 1000)
    return times


async def erase_nobody(client: Client, stop: asyncio.Event) -> list[float]:
    times = []
    while not stop.is_set():
        request = episode_service_pb2.EraseUserRequest(user_id=f"nobody-{uuid.uuid4().hex[:12]}")
        started = time.perf_counter()
        await client.episodes.EraseUser(request, metadata=client.auth, timeout=60)
        times.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(max(0.0, ERASE_EVERY_SECONDS - times[-1] / 1000))
    return times


def p(times: list[float], q: float) -> float:
    return statistics.quantiles(times, n=100)[int(q) - 1]


async def main(kind: str) -> None:
    settings = settings_for("", migrate_on_start=True, **UNLIMITED)
    async with (
        database(kind) as url,
        running_server(dataclasses.replace(settings, database_url=url)) as server,
        server.channel() as channel,
    ):
        tenant_a, tenant_b = Client.of(channel, KEY_A), Client.of(channel, KEY_B)
        episode_id = await seed(tenant_b)
        await add_latencies(tenant_b, episode_id)  # warm-up
        alone = await add_latencies(tenant_b, episode_id)
        stop = asyncio.Event()
        eraser = asyncio.create_task(erase_nobody(tenant_a, stop))
        during = await add_latencies(tenant_b, episode_id)
        stop.set()
        erasures = await eraser
    for name, times in (("alone", alone), ("during erasures", during)):
        print(f"{kind} tenant B AddMessage {name}: p50 {p(times, 50):.2f} ms, p99 {p(times, 99):.2f} ms")
    print(
        f"{kind} ratios during/alone: p50 {p(during, 50) / p(alone, 50):.1f}x, "
        f"p99 {p(during, 99) / p(alone, 99):.1f}x ({len(erasures)} erasures of unknown users, "
        f"median {statistics.median(erasures):.1f} ms each)"
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "sqlite"))
