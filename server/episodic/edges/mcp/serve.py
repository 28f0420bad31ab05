"""The MCP edge's transports: stdio (until the client closes stdin) and streamable HTTP on a
bound socket. `episodic mcp` (cli/serve_mcp.py) opens the app and runs one of them."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, cast

from mcp.server import Server
from mcp.server.stdio import stdio_server

from episodic.config.concerns import McpSettings
from episodic.edges.http import serving as http_serving
from episodic.edges.mcp.auth import BearerAuth, dev_caller, request_caller
from episodic.edges.mcp.server import build_server
from episodic.edges.mcp.stdin import stdin_lines

if TYPE_CHECKING:  # the app the composition root opened; the edge only reads it
    from episodic.bootstrap.containers import App

MCP_PATH = "/mcp"
HTTP_STOP_SECONDS = 10.0  # requests in flight at shutdown get this long


@contextmanager
def bound(host: str, port: int) -> Iterator[socket.socket]:
    """The listening socket, bound before the database opens so a taken port fails fast."""
    with http_serving.bound("mcp_address", host, port) as sock:
        yield sock


async def serve_stdio(server: Server[Any]) -> None:
    """MCP over this process's stdin and stdout until the client closes stdin."""
    # the SDK types stdin as an anyio file; it only iterates lines, which PipeLines yields
    async with stdin_lines() as lines, stdio_server(stdin=cast(Any, lines)) as (read, write):
        await server.run(read, write, server.create_initialization_options())


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
