"""Prints what a hostile ImportUser costs the server's memory: a manifest naming one part of
1,200 records, then 1,200 requests of one 1 MiB record each (issue 43, finding 1). An
in-process server on a fresh SQLite file (tests/server_harness.py); the client reuses one
1 MiB string, so what grows is the server's. Prints the process's RSS before, its peak while
the import ran (sampled every 20 ms) and after, and what the import was answered.

    .venv/bin/python scripts/import_memory.py [--records 1200] [--record-mib 1]

A figure, not a test: it asserts nothing. The behaviour is tested structurally in
tests/unit/test_user_transfer.py (a part is refused once it holds more than MAX_PART_BYTES).

Before parts were bounded: RSS 396 -> 1,605 MiB in 3 s, refused only by the sha256 check
once all 1,200 records were held."""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc

from episodic.v1 import episode_service_pb2 as pb
from tests.e2e.helpers import Client
from tests.server_harness import KEY_A, running_server, settings_for


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class PeakSampler:
    def __init__(self) -> None:
        self.peak = rss_mib()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss_mib())

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def hostile(records: int, record_bytes: int) -> AsyncIterator[pb.ImportUserRequest]:
    manifest = pb.ExportManifest(format="episodic-export", version=1, user_id="mary")
    manifest.parts.add(name="episodes/000001.jsonl", records=records, sha256="0" * 64)
    manifest.parts.add(name="memories.jsonl", records=0, sha256="0" * 64)
    line = "x" * record_bytes

    async def stream() -> AsyncIterator[pb.ImportUserRequest]:
        yield pb.ImportUserRequest(manifest=manifest)
        for _ in range(records):
            yield pb.ImportUserRequest(part="episodes/000001.jsonl", records=[line])

    return stream()


async def measure(records: int, record_bytes: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{tmp}/import.db"
        settings = settings_for(url, max_receive_message_bytes=record_bytes + 64 * 1024)
        async with running_server(settings) as server, server.channel() as channel:
            client = Client.of(channel, KEY_A)
            before = rss_mib()
            started = time.perf_counter()
            with PeakSampler() as sampler:
                try:
                    await client.episodes.ImportUser(hostile(records, record_bytes), metadata=client.auth)
                    answer = "OK"
                except grpc.aio.AioRpcError as error:
                    answer = f"{error.code().name}: {(error.details() or '')[:120]}"
            seconds = time.perf_counter() - started
            print(f"{records} records of {record_bytes / 2**20:.1f} MiB in one part: {seconds:.2f} s")
            print(f"  {answer}")
            print(f"  RSS before {before:,.0f} MiB, peak {sampler.peak:,.0f} MiB, after {rss_mib():,.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1200)
    parser.add_argument("--record-mib", type=float, default=1.0)
    args = parser.parse_args()
    asyncio.run(measure(args.records, int(args.record_mib * 2**20)))


if __name__ == "__main__":
    main()
