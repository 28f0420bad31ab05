"""Times PushAssistantDelta as a draft grows: an in-process server on a fresh SQLite file,
one draft pushed 10,000 deltas of 24 characters (240,000 bytes, under a message's 256 KiB),
then p50/p99 per push of the first and the last 1,000. A push should cost the same at the
end of a long reply as at its start.

    .venv/bin/python scripts/time_draft_pushes.py
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from episodic.config import Settings
from episodic.v1 import episode_service_pb2
from tests.e2e.helpers import Client
from tests.server_harness import KEY_A, running_server, settings_for

DELTAS = 10_000
WINDOW = 1_000
DELTA = "the quick brown fox. " + "abc"  # 24 characters
UNMETERED = {"tenant_rate_per_second": 1e9, "tenant_rate_burst": 1_000_000}  # time the push, not a quota


def settings(url: str) -> Settings:
    known = {f.name for f in dataclasses.fields(Settings)}
    extra = {k: v for k, v in UNMETERED.items() if k in known}
    return settings_for(url, migrate_on_start=True, **extra)


def p(times: list[float], q: int) -> float:
    return statistics.quantiles(times, n=100)[q - 1]


async def push_all(client: Client, episode_id: str) -> list[float]:
    times = []
    for i in range(DELTAS):
        request = episode_service_pb2.PushAssistantDeltaRequest(
            episode_id=episode_id, draft_id="reply", offset=i * len(DELTA), text=DELTA
        )
        started = time.perf_counter()
        await client.episodes.PushAssistantDelta(request, metadata=client.auth, timeout=60)
        times.append((time.perf_counter() - started) * 1000)
    return times


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/drafts.db"
        async with running_server(settings(url)) as server, server.channel() as channel:
            client = Client.of(channel, KEY_A)
            episode_id = await client.open_episode(await client.create_agent())
            times = await push_all(client, episode_id)
    for name, part in (("first", times[:WINDOW]), ("last", times[-WINDOW:])):
        print(f"{name} {WINDOW:,} pushes: p50 {p(part, 50):.2f} ms, p99 {p(part, 99):.2f} ms")


if __name__ == "__main__":
    asyncio.run(main())
