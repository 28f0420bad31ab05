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

from mcp.server import Server
from mcp.server.stdio import stdio_server

from episodic.bootstrap.adapters import load_keys
from episodic.bootstrap.containers import App
from episodic.bootstrap.fd_limit import quiet_accept_failures, raise_open_files_limit
from episodic.bootstrap.lifecycle import open_app
from episodic.cli.serve import dev_banner, stop_on_signals
from episodic.config import Settings, split_address
from episodic.config.concerns import CallerSettings, McpSettings
from episodic.domain.model import Caller
from episodic.edges.http import serving as http_serving
from episodic.edges.mcp.auth import BearerAuth, dev_caller, request_caller, stdio_caller
from episodic.edges.mcp.server import build_server
from episodic.edges.mcp.stdin import stdin_lines

log = logging.getLogger("episodic.mcp")

MCP_PATH = "/mcp"
HTTP_STOP_SECONDS = 10.0  # requests in flight at shutdown get this long


async def serve_mcp(settings: Settings) -> None:
    """Configuration errors (a bad address, a missing or unknown key) stop the start before
    the database is opened."""
    raise_open_files_limit()
    quiet_accept_failures()
    mcp = McpSettings.of(settings)
    address = split_address("mcp_address", mcp.mcp_address) if mcp.mcp_address else None
    keys = load_keys(CallerSettings.of(settings))
    caller = stdio_caller(mcp, keys) if address is None else None
    if mcp.dev_tenant is not None:
        print(dev_banner(mcp.dev_tenant), file=sys.stderr, flush=True)
    stop = stop_on_signals()  # before anything can report ready, so no SIGTERM is missed
    if caller is not None:
        await _serve_stdio(settings, caller, stop)
    elif address is not None:
        if mcp.mcp_api_key:
            log.warning("mcp_api_key is unused over HTTP: each request carries its own key")
        await _serve_http(settings, address, stop)
    log.info("stopped")


async def _serve_stdio(settings: Settings, caller: Caller, stop: asyncio.Event) -> None:
    async with open_app(settings) as app:
        server = build_server(app.services, lambda _ctx: caller, app.state.shares)
        log.info("serving MCP on stdio", extra={"insecure_dev": settings.insecure_dev})
        await _until_stopped(_stdio(server), stop)


async def _serve_http(settings: Settings, address: tuple[str, int], stop: asyncio.Event) -> None:
    with bound(*address) as sock:
        async with open_app(settings) as app, serve_http(app, sock) as port:
            log.info("serving MCP over HTTP", extra={"host": address[0], "port": port, "path": MCP_PATH})
            await stop.wait()
            log.info("shutting down", extra={"grace_seconds": HTTP_STOP_SECONDS})


@contextmanager
def bound(host: str, port: int) -> Iterator[socket.socket]:
    """The listening socket, bound before the database opens so a taken port fails fast."""
    with http_serving.bound("mcp_address", host, port) as sock:
        yield sock


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


@asynccontextmanager
async def serve_http(app: App, sock: socket.socket) -> AsyncIterator[int]:
    """Streamable HTTP at /mcp on `sock`, stateless (each request stands alone, with its own
    key: any replica can serve it) and answering in JSON; yields the port."""
    host = sock.getsockname()[0]
    mcp = build_server(app.services, lambda ctx: request_caller(ctx.request), app.state.shares)
    asgi = mcp.streamable_http_app(
        streamable_http_path=MCP_PATH, stateless_http=True, json_response=True, host=host
    )
    settings = McpSettings.of(app.settings)
    authenticated = BearerAuth(asgi, app.keys, dev_caller(settings))
    async with http_serving.serving_asgi(
        authenticated,
        sock,
        setting="mcp_address",
        stop_seconds=HTTP_STOP_SECONDS,
        limits=settings.http,
        lifespan="on",
    ) as port:
        yield port
