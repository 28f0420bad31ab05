"""Serving an ASGI app (the MCP endpoint, the inspector) with uvicorn on a socket bound
beforehand, so a taken port fails the start before the database opens. Signals stay the
command's: it stops the app after the server."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import uvicorn
from starlette.types import ASGIApp

from episodic.config import ConfigError


@contextmanager
def bound(setting: str, host: str, port: int) -> Iterator[socket.socket]:
    """The listening socket; `setting` names the option in the error of a taken port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"{setting}: cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    try:
        yield sock
    finally:
        sock.close()


class _Uvicorn(uvicorn.Server):
    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@asynccontextmanager
async def serving_asgi(
    asgi: ASGIApp, sock: socket.socket, *, setting: str, stop_seconds: float, lifespan: str = "off"
) -> AsyncIterator[int]:
    """`asgi` on `sock` until the block ends (requests in flight then get `stop_seconds`);
    yields the port."""
    config = uvicorn.Config(
        asgi,
        log_config=None,
        access_log=False,
        lifespan=lifespan,  # type: ignore[arg-type]
        ws="none",
        server_header=False,  # says nothing about what serves it
        timeout_graceful_shutdown=int(stop_seconds),
    )
    http = _Uvicorn(config)
    serving = asyncio.create_task(http.serve(sockets=[sock]))
    while not http.started and not serving.done():
        await asyncio.sleep(0.01)
    if serving.done():
        await serving  # raises what stopped the start
        raise ConfigError(f"{setting}: the HTTP server stopped while starting")
    try:
        yield int(sock.getsockname()[1])
    finally:
        http.should_exit = True
        await serving
