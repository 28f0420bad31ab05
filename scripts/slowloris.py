"""Slow HTTP clients against one of a local server's HTTP listeners, while probing its gRPC
side: each socket sends part of a request head, then one more header byte every few
seconds and never finishes. Prints, once a second, the server's open files, its gRPC health
and an Echo round trip's latency, and at the end how many slow sockets the server closed.

Loopback only, bounded in sockets (at most 2,000) and time (at most 120 s). Run it against a
server started by hand, e.g. (insecure dev mode, so Echo needs no key):

    ulimit -Sn 1024; .venv/bin/episodic serve --insecure-dev --database-url sqlite:////tmp/s.db \\
        --inspector-address 127.0.0.1:8089 --address 127.0.0.1:50061 &
    .venv/bin/python scripts/slowloris.py --http 127.0.0.1:8089 --grpc 127.0.0.1:50061 \\
        --pid $! --sockets 1100 --seconds 75
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import time
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from episodic.v1 import diagnostics_service_pb2
from episodic.v1.diagnostics_service_pb2_grpc import DiagnosticsServiceStub

MAX_SOCKETS = 2000
MAX_SECONDS = 120.0
TRICKLE_SECONDS = 5.0  # one more header byte this often
PROBE_TIMEOUT = 5.0


@dataclass
class Tally:
    opened: int = 0
    refused_at_connect: int = 0
    closed_by_server: int = 0
    open_fds: list[int] = field(default_factory=list)
    health: list[str] = field(default_factory=list)
    echo_ms: list[float] = field(default_factory=list)


def loopback(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not ipaddress.ip_address(host.strip("[]")).is_loopback:
        raise SystemExit(f"{address}: loopback addresses only")
    return host.strip("[]"), int(port)


async def slow_client(host: str, port: int, path: str, until: float, tally: Tally) -> None:
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        tally.refused_at_connect += 1
        return
    tally.opened += 1
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nX-Slow: ".encode())
        while time.monotonic() < until:
            try:
                # the server closing shows as EOF (or a reset) on a read
                if await asyncio.wait_for(reader.read(4096), TRICKLE_SECONDS) == b"":
                    tally.closed_by_server += 1
                    return
                tally.closed_by_server += 1  # an answer (a 503): it closes next
                return
            except TimeoutError:
                writer.write(b"a")
                await writer.drain()
    except OSError:
        tally.closed_by_server += 1
    finally:
        writer.transport.abort()


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


async def probe(channel: grpc.aio.Channel, pid: int, tally: Tally) -> str:
    try:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=PROBE_TIMEOUT
        )
        health = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    except grpc.aio.AioRpcError as exc:
        health = exc.code().name
    started = time.perf_counter()
    try:
        await DiagnosticsServiceStub(channel).Echo(
            diagnostics_service_pb2.EchoRequest(payload=b"ping"), timeout=PROBE_TIMEOUT
        )
        echo = (time.perf_counter() - started) * 1000
        shown = f"{echo:.1f} ms"
        tally.echo_ms.append(echo)
    except grpc.aio.AioRpcError as exc:
        shown = exc.code().name
    fds = open_fds(pid)
    tally.open_fds.append(fds)
    tally.health.append(health)
    return f"fds={fds} health={health} echo={shown}"


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--http", required=True, help="HOST:PORT of the HTTP listener (loopback)")
    parser.add_argument("--path", default="/", help="request path the slow heads name")
    parser.add_argument("--grpc", help="HOST:PORT of the server's gRPC (loopback); none for `episodic mcp`")
    parser.add_argument("--pid", type=int, required=True, help="the server's process id, for its open files")
    parser.add_argument("--sockets", type=int, default=1100)
    parser.add_argument("--seconds", type=float, default=75.0)
    args = parser.parse_args()
    sockets = min(args.sockets, MAX_SOCKETS)
    seconds = min(args.seconds, MAX_SECONDS)
    host, port = loopback(args.http)
    tally = Tally()
    until = time.monotonic() + seconds
    # without gRPC (`episodic mcp`), the probes fail fast and only the open files count
    async with grpc.aio.insecure_channel(":".join(map(str, loopback(args.grpc or "127.0.0.1:1")))) as channel:
        print("before:", await probe(channel, args.pid, tally), flush=True)
        clients = [
            asyncio.create_task(slow_client(host, port, args.path, until, tally)) for _ in range(sockets)
        ]
        started = time.monotonic()
        while time.monotonic() < until:
            await asyncio.sleep(1.0)
            line = await probe(channel, args.pid, tally)
            alive = tally.opened - tally.closed_by_server
            print(f"t={time.monotonic() - started:5.1f}s {line} slow_open={alive}", flush=True)
        await asyncio.gather(*clients)
    echo = sorted(tally.echo_ms)
    print(
        f"\nsockets={sockets} opened={tally.opened} refused_at_connect={tally.refused_at_connect} "
        f"closed_by_server={tally.closed_by_server} max_fds={max(tally.open_fds)} "
        f"health_not_serving={sum(h != 'SERVING' for h in tally.health)}/{len(tally.health)} "
        f"echo_failed={len(tally.health) - len(echo)} "
        f"echo_ms_median={echo[len(echo) // 2] if echo else float('nan'):.1f} "
        f"echo_ms_max={echo[-1] if echo else float('nan'):.1f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
