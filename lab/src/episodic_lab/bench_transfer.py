"""`episodic-lab bench-transfer`: ExportUser and ImportUser of one user with N messages
(default 100k), on a throwaway `episodic serve` subprocess (SQLite, hashing embedder).

The user's messages are written through AddMessages (500 per call) into episodes of
`--per-episode` messages, with a few memories. Then: the export, through the same code as
`episodic export` (the stream written to a zip and checked against its manifest); the
erasure of the user; the import of the file, as `episodic import` sends it. For each: the
wall time, messages per second, and the server's resident memory before and at its peak
while the call ran (sampled from /proc every 20 ms): the export streams with server-side
cursors, so its peak should not grow with N; the import holds one episode's part at a time.
`--sizes` runs several N to compare. Prints, never asserts."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import zipfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc

from episodic.edges.grpc.transfer_client import read_export, write_export
from episodic.v1 import agent_pb2, agent_service_pb2, episode_pb2, memory_pb2, memory_service_pb2
from episodic.v1 import episode_service_pb2 as pb
from episodic.v1.agent_service_pb2_grpc import AgentServiceStub
from episodic.v1.episode_service_pb2_grpc import EpisodeServiceStub
from episodic.v1.memory_service_pb2_grpc import MemoryServiceStub
from episodic_lab.bench.server_process import UNPACED, Server, running_server

BATCH = 500
SERVER_FLAGS = ("--embedder", "hashing", "--tenant-memory-writes-per-second", "100000", *UNPACED)
USER = "bench-user"
AGENT = "bench-transfer"


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", default="100000", help="comma-separated message counts, e.g. 10000,100000")
    parser.add_argument("--per-episode", type=int, default=10_000, help="messages per episode")


def run_bench_transfer(args: argparse.Namespace) -> int:
    sizes = [int(s) for s in args.sizes.split(",") if s]
    print("ExportUser / ImportUser of one user, SQLite, hashing embedder; RSS is the server's (MiB)")
    print(
        f"{'messages':>9} {'step':<7} {'seconds':>8} {'msgs/s':>9} {'RSS before':>11} {'RSS peak':>9} "
        f"{'file MiB':>9}"
    )
    for size in sizes:
        asyncio.run(_bench(size, args.per_episode))
    return 0


async def _bench(size: int, per_episode: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-transfer-") as tmp:
        workdir = Path(tmp)
        async with running_server(f"sqlite:///{workdir / 'bench.db'}", workdir, SERVER_FLAGS) as server:
            channel = grpc.aio.insecure_channel(
                server.target, options=[("grpc.max_receive_message_length", 1 << 26)]
            )
            async with channel:
                await _fill(channel, size, per_episode)
                path = workdir / "user.zip"
                async with _peak_rss(server) as export:
                    await asyncio.to_thread(_export, server.target, path)
                _row(size, "export", export, path.stat().st_size)
                await EpisodeServiceStub(channel).EraseUser(pb.EraseUserRequest(user_id=USER))
                async with _peak_rss(server) as imported:
                    await asyncio.to_thread(_import, server.target, path)
                _row(size, "import", imported, path.stat().st_size)


async def _fill(channel: grpc.aio.Channel, size: int, per_episode: int) -> None:
    agent = agent_pb2.Agent(agent_id=AGENT, system_prompt="Be brief.", model="gpt-4")
    await AgentServiceStub(channel).CreateAgent(agent_service_pb2.CreateAgentRequest(agent=agent))
    episodes = EpisodeServiceStub(channel)
    written = 0
    while written < size:
        opened = await episodes.OpenEpisode(pb.OpenEpisodeRequest(agent_id=AGENT, user_id=USER))
        episode_id = opened.episode.episode_id
        count = min(per_episode, size - written)
        for start in range(0, count, BATCH):
            batch = [_message(written + i) for i in range(start, min(start + BATCH, count))]
            await episodes.AddMessages(pb.AddMessagesRequest(episode_id=episode_id, messages=batch))
        written += count
    memories = [
        memory_service_pb2.MemoryInput(
            text=f"Fact number {i} about the user.", kind=memory_pb2.MEMORY_KIND_FACT
        )
        for i in range(50)
    ]
    await MemoryServiceStub(channel).CreateMemories(
        memory_service_pb2.CreateMemoriesRequest(agent_id=AGENT, user_id=USER, memories=memories)
    )


def _message(i: int) -> episode_pb2.MessageInput:
    role = episode_pb2.ROLE_USER if i % 2 == 0 else episode_pb2.ROLE_ASSISTANT
    return episode_pb2.MessageInput(
        role=role, content=f"Message {i}: the weather in Lisbon is mild, tram 28 runs."
    )


def _export(target: str, path: Path) -> None:
    with grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", 1 << 26)]) as channel:
        stream = EpisodeServiceStub(channel).ExportUser(pb.ExportUserRequest(user_id=USER))
        write_export(stream, path)


def _import(target: str, path: Path) -> None:
    with grpc.insecure_channel(target) as channel, zipfile.ZipFile(path) as archive:
        requests: Iterator[pb.ImportUserRequest] = read_export(archive, "")
        EpisodeServiceStub(channel).ImportUser(requests)


class _Sampled:
    def __init__(self) -> None:
        self.before = 0.0
        self.peak = 0.0
        self.seconds = 0.0
        self.messages = 0


@asynccontextmanager
async def _peak_rss(server: Server) -> AsyncIterator[_Sampled]:
    sampled = _Sampled()
    sampled.before = sampled.peak = _rss_mib(server.pid)
    done = asyncio.Event()

    async def sample() -> None:
        while not done.is_set():
            sampled.peak = max(sampled.peak, _rss_mib(server.pid))
            await asyncio.sleep(0.02)

    task = asyncio.create_task(sample())
    started = time.monotonic()
    try:
        yield sampled
    finally:
        sampled.seconds = time.monotonic() - started
        done.set()
        await task


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _row(size: int, step: str, s: _Sampled, file_bytes: int) -> None:
    print(
        f"{size:>9} {step:<7} {s.seconds:>8.1f} {size / max(s.seconds, 1e-9):>9.0f} {s.before:>11.0f} "
        f"{s.peak:>9.0f} {file_bytes / 2**20:>9.1f}"
    )
