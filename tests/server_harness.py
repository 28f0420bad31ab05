"""A real Episodic gRPC server on 127.0.0.1:0 for e2e tests, and keys for two tenants."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import grpc

from episodic.bootstrap.lifecycle import open_app, serve_app
from episodic.config import EmbedderKind, Settings
from episodic.edges.keys import config_line
from episodic.telemetry.tracing import Tracing

KEY_A = "epk_test_tenant_a_0123456789abcdef"
KEY_B = "epk_test_tenant_b_0123456789abcdef"
KEY_A_READER = "epk_test_tenant_a_reader_0123456789"  # may read and search knowledge, not write it
TENANT_A = "tenant-a"
TENANT_B = "tenant-b"


def settings_for(database_url: str, **overrides: object) -> Settings:
    keys = ",".join(
        [
            config_line(TENANT_A, KEY_A, knowledge_write=True),
            config_line(TENANT_B, KEY_B, knowledge_write=True),
            config_line(TENANT_A, KEY_A_READER),
        ]
    )
    base = Settings(
        address="127.0.0.1:0",
        database_url=database_url,
        api_keys=keys,
        access_log=False,
        embedder=EmbedderKind.HASHING,
        # the run's shared PostgreSQL database holds every test's open episodes: an app's
        # warm start would read them all (tests/integration/test_warm_start.py turns it on)
        warm_start_conversations=0,
    )
    return dataclasses.replace(base, **overrides)  # type: ignore[arg-type]


@dataclass(frozen=True)
class RunningServer:
    address: str
    settings: Settings

    def channel(self) -> grpc.aio.Channel:
        """Plaintext; a TLS server (settings with tls_cert_file) needs a secure channel."""
        return grpc.aio.insecure_channel(self.address)


def bearer(key: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"),)


@asynccontextmanager
async def running_server(settings: Settings, tracing: Tracing | None = None) -> AsyncIterator[RunningServer]:
    """`tracing` replaces the one the OTEL_* variables would configure (e.g. an in-memory
    exporter); it traces both the RPCs and the services, as in `episodic serve`. Stopping
    does not wait for arrivals to settle: a test's calls have all returned by then."""
    async with (
        open_app(settings, tracing=tracing) as app,
        serve_app(app, grace_seconds=1, settle_seconds=0) as grpc_server,
    ):
        yield RunningServer(f"127.0.0.1:{grpc_server.port}", settings)
