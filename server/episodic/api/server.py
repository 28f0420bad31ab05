"""Builds the grpc.aio server: interceptors, servicers, health and reflection."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

from episodic.api.access_log import AccessLog
from episodic.api.agents import AgentServicer
from episodic.api.context import ContextServicer
from episodic.api.diagnostics import DiagnosticsServicer
from episodic.api.episodes import EpisodeServicer
from episodic.api.interceptors import AuthInterceptor, ErrorInterceptor
from episodic.config import Settings, TlsMaterial
from episodic.keys import KeyRing
from episodic.service.agents import AgentService
from episodic.service.context import ContextService
from episodic.service.episodes import EpisodeService
from episodic.service.erasure import EraseService
from episodic.service.index_check import IndexChecker
from episodic.service.recall import RecallService
from episodic.telemetry.tracing import Tracing, server_interceptor
from episodic.v1 import (
    agent_service_pb2,
    agent_service_pb2_grpc,
    context_service_pb2,
    context_service_pb2_grpc,
    diagnostics_service_pb2,
    diagnostics_service_pb2_grpc,
    episode_service_pb2,
    episode_service_pb2_grpc,
)

SERVICE_NAMES = (
    episode_service_pb2.DESCRIPTOR.services_by_name["EpisodeService"].full_name,
    agent_service_pb2.DESCRIPTOR.services_by_name["AgentService"].full_name,
    context_service_pb2.DESCRIPTOR.services_by_name["ContextService"].full_name,
    diagnostics_service_pb2.DESCRIPTOR.services_by_name["DiagnosticsService"].full_name,
)


@dataclass(frozen=True, slots=True)
class Services:
    episodes: EpisodeService
    agents: AgentService
    recall: RecallService
    context: ContextService
    erasure: EraseService
    index_checker: IndexChecker


@dataclass(frozen=True, slots=True)
class GrpcServer:
    server: grpc.aio.Server
    health: HealthServicer
    port: int

    async def set_serving(self, serving: bool) -> None:
        status = (
            health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in ("", *SERVICE_NAMES):
            await self.health.set(name, status)


def server_options(settings: Settings) -> list[tuple[str, int]]:
    return [
        ("grpc.max_receive_message_length", settings.max_receive_message_bytes),
        ("grpc.max_send_message_length", settings.max_send_message_bytes),
        ("grpc.keepalive_time_ms", settings.keepalive_time_ms),
        ("grpc.keepalive_timeout_ms", settings.keepalive_timeout_ms),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
        # Caps on what clients that stop reading can hold (docs/operations.md, "Slow and
        # stalled clients"); the total across connections is maximum_concurrent_rpcs.
        ("grpc.max_concurrent_streams", settings.max_concurrent_streams),
        ("grpc.max_connection_age_ms", _milliseconds(settings.max_connection_age_seconds)),
        ("grpc.max_connection_age_grace_ms", _milliseconds(settings.max_connection_age_grace_seconds)),
    ]


def _milliseconds(seconds: float) -> int:
    return max(1, round(seconds * 1000))


async def build_server(
    settings: Settings,
    services: Services,
    keys: KeyRing,
    access_log: AccessLog,
    tracing: Tracing | None = None,
    tls: TlsMaterial | None = None,
) -> GrpcServer:
    """Binds the port (TLS when `tls` is given) and registers everything; health starts
    NOT_SERVING."""
    dev_tenant = settings.dev_tenant if settings.insecure_dev else None
    # Tracing first, so calls the other interceptors reject still get their span.
    traced = [server_interceptor(tracing)] if tracing is not None else []
    server = grpc.aio.server(
        interceptors=[*traced, ErrorInterceptor(access_log), AuthInterceptor(keys, dev_tenant)],
        options=server_options(settings),
        maximum_concurrent_rpcs=settings.max_concurrent_rpcs,
    )
    episode_service_pb2_grpc.add_EpisodeServiceServicer_to_server(
        EpisodeServicer(
            services.episodes, services.recall, services.erasure, settings.max_send_message_bytes
        ),
        server,
    )
    agent_service_pb2_grpc.add_AgentServiceServicer_to_server(AgentServicer(services.agents), server)
    context_service_pb2_grpc.add_ContextServiceServicer_to_server(
        ContextServicer(services.context, settings.max_send_message_bytes), server
    )
    diagnostics_service_pb2_grpc.add_DiagnosticsServiceServicer_to_server(
        DiagnosticsServicer(services.index_checker), server
    )
    health_servicer = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (*SERVICE_NAMES, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME),
        server,
    )
    port = _bind(server, settings.address, tls)
    result = GrpcServer(server, health_servicer, port)
    await result.set_serving(False)
    return result


def _bind(server: grpc.aio.Server, address: str, tls: TlsMaterial | None) -> int:
    if tls is None:
        return server.add_insecure_port(address)
    credentials = grpc.ssl_server_credentials(
        [(tls.private_key, tls.certificate_chain)],
        root_certificates=tls.client_ca,
        require_client_auth=tls.client_ca is not None,
    )
    return server.add_secure_port(address, credentials)
