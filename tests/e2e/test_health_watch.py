"""Health/Watch streams the server's status (clients' health checking and load balancers
use it), like Health/Check answers it once."""

from __future__ import annotations

import asyncio

from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.server_harness import RunningServer


async def test_watching_health_streams_serving(server: RunningServer) -> None:
    async with server.channel() as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        call = stub.Watch(health_pb2.HealthCheckRequest(service=""))
        first = await asyncio.wait_for(call.read(), timeout=10)
        assert first.status == health_pb2.HealthCheckResponse.SERVING
        call.cancel()
