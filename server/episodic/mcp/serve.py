"""Running `episodic mcp`: the app from the one composition root (its background workers
run as under `serve`; there is no gRPC listener), and MCP over stdio until the client
closes stdin, or over streamable HTTP until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
from collections.abc import AsyncIterator, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, cast

import uvicorn
from mcp.server import Server
from mcp.server.stdio import stdio_server

from episodic.bootstrap import App, load_keys, open_app
from episodic.config import ConfigError, Settings
from episodic.domain.model import Caller
from episodic.mcp.auth import BearerAuth, dev_caller, request_caller, stdio_caller
from episodic.mcp.server import build_server
from episodic.mcp.stdin import stdin_lines
from episodic.serve import DEV_BANNER, stop_on_signals

log = logging.getLogger("episodic.mcp")

MCP_PATH = "/mcp"
HTTP_STOP_SECONDS = 10.0  # requests in flight at shutdown get this long


async def serve_mcp(settings: Settings) -> None:
    """Configuration errors (a bad address, a missing or unknown key) stop the start before
    the database is opened."""
    address = parse_address(settings.mcp_address) if settings.mcp_address else None
    keys = load_keys(settings)
    caller = stdio_caller(settings, keys) if address is None else None
    if settings.insecure_dev:
        print(DEV_BANNER.format(tenant=repr(settings.dev_tenant)), file=sys.stderr, flush=True)
    stop = stop_on_signals()  # before anything can report ready, so no SIGTERM is missed
    if caller is not None:
        await _serve_stdio(settings, caller, stop)
    elif address is not None:
        if settings.mcp_api_key:
            log.warning("mcp_api_key is unused over HTTP: each request carries its own key")
        await _serve_http(settings, address, stop)
    log.info("stopped")


async def _serve_stdio(settings: Settings, caller: Caller, stop: asyncio.Event) -> None:
    async with open_app(settings) as app:
        server = build_server(app.services, lambda _ctx: caller)
        log.info("serving MCP on stdio", extra={"insecure_dev": settings.insecure_dev})
        await _until_stopped(_stdio(server), stop)


async def _serve_http(settings: Settings, address: tuple[str, int], stop: asyncio.Event) -> None:
    with bound(*address) as sock:
        async with open_app(settings) as app, serve_http(app, sock) as port:
            log.info("serving MCP over HTTP", extra={"host": address[0], "port": port, "path": MCP_PATH})
            await stop.wait()
            log.info("shutting down", extra={"grace_seconds": HTTP_STOP_SECONDS})


def parse_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"mcp_address: want HOST:PORT (port 0-65535; 0 picks a free port), got {address!r}")
    return host.strip("[]"), int(port)


@contextmanager
def bound(host: str, port: int) -> Iterator[socket.socket]:
    """The listening socket, bound before the database opens so a taken port fails fast."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"mcp_address: cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    try:
        yield sock
    finally:
        sock.close()


async def _stdio(server: Server[Any]) -> None:
    # the SDK types stdin as an anyio file; it only iterates lines, which PipeLines yields
    async with stdin_lines() as lines, stdio_server(stdin=cast(Any, lines)) as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def _until_stopped(work: Coroutine[Any, Any, None], stop: asyncio.Event) -> None:
    """Runs `work` until it ends or `stop` is set, whichever comes first."""
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stop.wait())
    await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if not task.done():
        task.cancel()
    await asyncio.gather(task, stopped, return_exceptions=True)
    failure = None if task.cancelled() else task.exception()
    if failure is not None:
        raise failure


class _Uvicorn(uvicorn.Server):
    """Signals are the command's (it stops the app after the server), not uvicorn's."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@asynccontextmanager
async def serve_http(app: App, sock: socket.socket) -> AsyncIterator[int]:
    """Streamable HTTP at /mcp on `sock`, stateless (each request stands alone, with its own
    key: any replica can serve it) and answering in JSON; yields the port."""
    host, port = sock.getsockname()[:2]
    mcp = build_server(app.services, lambda ctx: request_caller(ctx.request))
    asgi = mcp.streamable_http_app(
        streamable_http_path=MCP_PATH, stateless_http=True, json_response=True, host=host
    )
    config = uvicorn.Config(
        BearerAuth(asgi, app.keys, dev_caller(app.settings)),
        log_config=None,
        access_log=False,
        lifespan="on",
        ws="none",
        timeout_graceful_shutdown=int(HTTP_STOP_SECONDS),
    )
    http = _Uvicorn(config)
    serving = asyncio.create_task(http.serve(sockets=[sock]))
    while not http.started and not serving.done():
        await asyncio.sleep(0.01)
    if serving.done():
        await serving  # raises what stopped the start
        raise ConfigError("mcp_address: the HTTP server stopped while starting")
    try:
        yield int(port)
    finally:
        http.should_exit = True
        await serving
