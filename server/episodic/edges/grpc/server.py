"""Builds the grpc.aio server: interceptors, servicers, health and reflection."""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

from episodic.config import ConfigError, TlsMaterial
from episodic.config.concerns import GrpcSettings
from episodic.edges.grpc.access_log import AccessLog
from episodic.edges.grpc.agents import AgentServicer
from episodic.edges.grpc.arrivals import ArrivalInterceptor, Arrivals
from episodic.edges.grpc.context import ContextServicer
from episodic.edges.grpc.diagnostics import DiagnosticsServicer
from episodic.edges.grpc.episodes import EpisodeServicer
from episodic.edges.grpc.interceptors import AuthInterceptor, ErrorInterceptor
from episodic.edges.grpc.knowledge import KnowledgeServicer
from episodic.edges.grpc.memories import MemoryServicer
from episodic.edges.grpc.shares import Refused, ShareInterceptor
from episodic.edges.keys import KeyRing
from episodic.service.services import Services
from episodic.state.shares import TenantShares
from episodic.v1 import (
    agent_service_pb2,
    agent_service_pb2_grpc,
    context_service_pb2,
    context_service_pb2_grpc,
    diagnostics_service_pb2,
    diagnostics_service_pb2_grpc,
    episode_service_pb2,
    episode_service_pb2_grpc,
    knowledge_service_pb2,
    knowledge_service_pb2_grpc,
    memory_service_pb2,
    memory_service_pb2_grpc,
)

SERVICE_NAMES = (
    episode_service_pb2.DESCRIPTOR.services_by_name["EpisodeService"].full_name,
    agent_service_pb2.DESCRIPTOR.services_by_name["AgentService"].full_name,
    context_service_pb2.DESCRIPTOR.services_by_name["ContextService"].full_name,
    diagnostics_service_pb2.DESCRIPTOR.services_by_name["DiagnosticsService"].full_name,
    memory_service_pb2.DESCRIPTOR.services_by_name["MemoryService"].full_name,
    knowledge_service_pb2.DESCRIPTOR.services_by_name["KnowledgeService"].full_name,
)


class HealthSource(Protocol):
    """Something whose health the server's reports follow (the database)."""

    def listen(self, listener: Callable[[bool], None]) -> None: ...


@dataclass(slots=True)
class GrpcServer:
    """Health says SERVING only while the server is up (`set_serving`) and the database
    answers (`database_changed`)."""

    server: grpc.aio.Server
    health: HealthServicer
    port: int
    arrivals: Arrivals  # noted by the server's outermost interceptor; settled before a stop
    up: bool = False
    database_ok: bool = True
    _publishing: asyncio.Lock = field(default_factory=asyncio.Lock)
    _pending: set[asyncio.Task[None]] = field(default_factory=set)

    async def set_serving(self, serving: bool) -> None:
        self.up = serving
        await self._publish()

    def database_changed(self, healthy: bool) -> None:
        self.database_ok = healthy
        task = asyncio.get_running_loop().create_task(self._publish())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _publish(self) -> None:
        """Under a lock, reading the state inside it: the last change is the one reported."""
        async with self._publishing:
            serving = self.up and self.database_ok
            status = _SERVING if serving else _NOT_SERVING
            for name in ("", *SERVICE_NAMES):
                await self.health.set(name, status)


_SERVING = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def server_options(listener: GrpcSettings) -> list[tuple[str, int]]:
    return [
        ("grpc.max_receive_message_length", listener.max_receive_message_bytes),
        ("grpc.max_send_message_length", listener.max_send_message_bytes),
        ("grpc.keepalive_time_ms", listener.keepalive_time_ms),
        ("grpc.keepalive_timeout_ms", listener.keepalive_timeout_ms),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
        # Caps on what clients that stop reading can hold (docs/operations.md, "Slow and
        # stalled clients"); the total across connections is maximum_concurrent_rpcs.
        ("grpc.max_concurrent_streams", listener.max_concurrent_streams),
        ("grpc.max_connection_age_ms", _milliseconds(listener.max_connection_age_seconds)),
        ("grpc.max_connection_age_grace_ms", _milliseconds(listener.max_connection_age_grace_seconds)),
        # Against strangers: idle connections are closed, connections past the cap are closed
        # at accept (file descriptors stay bounded), and a client pinging more often than
        # min_ping_interval is sent GOAWAY after max_ping_strikes.
        ("grpc.max_connection_idle_ms", _milliseconds(listener.max_connection_idle_seconds)),
        ("grpc.max_allowed_incoming_connections", listener.max_connections),
        ("grpc.http2.max_ping_strikes", 2),
        # a socket that never completes the HTTP/2 handshake is closed (gRPC's default: 120 s)
        ("grpc.server_handshake_timeout_ms", _milliseconds(listener.max_connection_handshake_seconds)),
        ("grpc.http2.settings_timeout", _milliseconds(listener.max_connection_handshake_seconds)),
        # gRPC sets SO_REUSEPORT by default, so a second server on a busy port would start
        # and take half the calls: the bind must fail instead.
        ("grpc.so_reuseport", 0),
    ]


def _milliseconds(seconds: float) -> int:
    return max(1, round(seconds * 1000))


async def build_server(
    listener: GrpcSettings,
    services: Services,
    keys: KeyRing,
    access_log: AccessLog,
    outer: Sequence[grpc.aio.ServerInterceptor[Any, Any]] = (),
    tls: TlsMaterial | None = None,
    database_health: HealthSource | None = None,
    *,
    shares: TenantShares,
    refused: Refused | None = None,
) -> GrpcServer:
    """Binds the port (TLS when `tls` is given) and registers everything; health starts
    NOT_SERVING. The caller's `outer` interceptors (tracing) come first, outermost first, so
    calls the error edge or authentication reject still pass through them. Each tenant's
    calls are held to its `shares` (gRPC's own maximum_concurrent_rpcs is not used: it
    would refuse health checks too, and let one tenant take every slot)."""
    arrivals = Arrivals()
    server = grpc.aio.server(
        interceptors=[
            ArrivalInterceptor(arrivals),
            *outer,
            ErrorInterceptor(access_log),
            AuthInterceptor(keys, listener.dev_tenant),
            ShareInterceptor(shares, refused),
        ],
        options=server_options(listener),
    )
    episode_service_pb2_grpc.add_EpisodeServiceServicer_to_server(
        EpisodeServicer(
            services.episodes,
            services.recall,
            services.erasure,
            listener.max_send_message_bytes,
            services.watch,
            services.transfer,
            services.users,
        ),
        server,
    )
    agent_service_pb2_grpc.add_AgentServiceServicer_to_server(
        AgentServicer(services.agents, services.agent_deletion), server
    )
    context_service_pb2_grpc.add_ContextServiceServicer_to_server(
        ContextServicer(services.context, services.model_calls, listener.max_send_message_bytes), server
    )
    diagnostics_service_pb2_grpc.add_DiagnosticsServiceServicer_to_server(
        DiagnosticsServicer(services.index_checker, services.knowledge_checker), server
    )
    health_servicer = HealthServicer()
    memory_service_pb2_grpc.add_MemoryServiceServicer_to_server(
        MemoryServicer(services.memories, services.memory_search, services.sessions, services.memory_tools),
        server,
    )
    knowledge_service_pb2_grpc.add_KnowledgeServiceServicer_to_server(
        KnowledgeServicer(services.knowledge, listener.max_send_message_bytes), server
    )
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (*SERVICE_NAMES, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME),
        server,
    )
    port = _bind(server, listener.address, tls)
    result = GrpcServer(server, health_servicer, port, arrivals)
    await result.set_serving(False)
    if database_health is not None:
        database_health.listen(result.database_changed)
    return result


class AddressInUse(ConfigError):
    """The gRPC address could not be bound (taken by another process, or not ours)."""


def _bind(server: grpc.aio.Server, address: str, tls: TlsMaterial | None) -> int:
    problem = address_problem(address)
    if problem is not None:
        raise AddressInUse(f"address: cannot listen on {address}: {problem}")
    try:
        return _add_port(server, address, tls)
    except RuntimeError as exc:  # grpc says only "Failed to bind to address"
        raise AddressInUse(f"address: cannot listen on {address}: {_TAKEN}") from exc


_TAKEN = (
    "the port is in use by another process or the address is not this machine's; "
    "stop the other server or choose another --address"
)


def address_problem(address: str) -> str | None:
    """Binds each resolved address once (no SO_REUSEPORT) and lets go: gRPC's own failure
    is a C-level log line plus "Failed to bind", so the usual mistakes are found first."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if int(port) == 0:
        return None
    try:
        resolved = socket.getaddrinfo(
            host or None, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror:
        return f"cannot resolve host {host!r}; use an IP address or a name this machine resolves"
    for family, kind, proto, _, where in resolved:
        with socket.socket(family, kind, proto) as probe:
            # As gRPC binds: a port left in TIME_WAIT by the previous process (a restart
            # right after serving) is free; one another process listens on is not.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(where)
            except OSError as exc:
                return (
                    _TAKEN if exc.errno == errno.EADDRINUSE else f"{exc.strerror}; choose another --address"
                )
    return None


def _add_port(server: grpc.aio.Server, address: str, tls: TlsMaterial | None) -> int:
    if tls is None:
        return server.add_insecure_port(address)
    credentials = grpc.ssl_server_credentials(
        [(tls.private_key, tls.certificate_chain)],
        root_certificates=tls.client_ca,
        require_client_auth=tls.client_ca is not None,
    )
    return server.add_secure_port(address, credentials)
