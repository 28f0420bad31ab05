"""`episodic healthcheck`: exit 0 when the local server reports SERVING (for container
HEALTHCHECKs and probes that cannot speak gRPC themselves)."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def probe_target(address: str) -> str:
    """A wildcard listen address is probed on loopback."""
    host, _, port = address.rpartition(":")
    return f"127.0.0.1:{port}" if host in {"0.0.0.0", "[::]", "::"} else address


def check(address: str, timeout: float = 3.0) -> bool:
    with grpc.insecure_channel(probe_target(address)) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout)
        except grpc.RpcError:
            return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)
