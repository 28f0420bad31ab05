"""Serving the inspector beside gRPC on --inspector-address (off when it is empty)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from episodic.config import split_address
from episodic.config.concerns import InspectorSettings
from episodic.domain.model import Caller
from episodic.edges.http.serving import bound, serving_asgi
from episodic.edges.inspector.app import build_inspector
from episodic.edges.keys import KeyRing
from episodic.service.inspection import InspectionService
from episodic.state.shares import TenantShares

log = logging.getLogger("episodic.inspector")

SETTING = "inspector_address"
STOP_SECONDS = 5.0  # page loads in flight at shutdown get this long


@asynccontextmanager
async def serving_inspector(
    settings: InspectorSettings,
    inspection: InspectionService,
    keys: KeyRing,
    shares: TenantShares | None = None,
) -> AsyncIterator[int | None]:
    """Yields the port the inspector listens on, or None when it is off. Its requests are
    held to the tenants' `shares` (the server's own, shared with gRPC)."""
    if not settings.inspector_address:
        yield None
        return
    host, port = split_address(SETTING, settings.inspector_address)
    dev = None if settings.dev_tenant is None else Caller(settings.dev_tenant)
    asgi = build_inspector(inspection, keys, dev, settings.inspector_trace_url, shares)
    with bound(SETTING, host, port) as sock:
        async with serving_asgi(
            asgi, sock, setting=SETTING, stop_seconds=STOP_SECONDS, limits=settings.http
        ) as serving_port:
            log.info("serving the inspector", extra={"host": host, "port": serving_port})
            yield serving_port
