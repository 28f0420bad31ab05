"""The gRPC listener against strangers: connections past the cap are closed at accept, and
a socket that never speaks HTTP/2 is closed after the handshake timeout, so sockets held
open by nobody cannot keep health checks out for long."""

from __future__ import annotations

import asyncio
import socket
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.server_harness import running_server, settings_for

CLOSE_TIMEOUT_SECONDS = 30.0  # a guard against a hang, never a measurement


def closed_by_server(sock: socket.socket) -> bool:
    """Reads what the server sent (its SETTINGS) until it closes, or says it is still open."""
    sock.setblocking(False)
    try:
        while data := sock.recv(4096):
            del data
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True
    return True


async def until_closed(socks: list[socket.socket]) -> None:
    deadline = time.monotonic() + CLOSE_TIMEOUT_SECONDS
    while not all(closed_by_server(s) for s in socks):
        assert time.monotonic() < deadline, "the server left silent sockets open"
        await asyncio.sleep(0.1)


async def health(address: str) -> grpc.StatusCode:
    options = [("grpc.use_local_subchannel_pool", 1)]  # a connection of its own
    async with grpc.aio.insecure_channel(address, options=options) as channel:
        try:
            await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        except grpc.aio.AioRpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


async def test_silent_sockets_past_the_cap_are_closed_and_health_answers_again(database_url: str) -> None:
    settings = settings_for(database_url, max_connections=3, max_connection_handshake_seconds=1)
    async with running_server(settings) as server:
        host, port = server.address.rsplit(":", 1)
        silent = [socket.create_connection((host, int(port))) for _ in range(3)]
        try:
            assert await health(server.address) == grpc.StatusCode.UNAVAILABLE  # past the cap
            await until_closed(silent)  # nobody completed a handshake: all closed
            assert await health(server.address) == grpc.StatusCode.OK
        finally:
            for sock in silent:
                sock.close()
