"""Running `episodic mcp`: the app from the one composition root (its background workers
run as under `serve`; there is no gRPC listener), and MCP over stdio until the client
closes stdin, or over streamable HTTP until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Coroutine
from typing import Any

from episodic.bootstrap.adapters import load_keys
from episodic.bootstrap.fd_limit import quiet_accept_failures, raise_open_files_limit
from episodic.bootstrap.lifecycle import open_app
from episodic.cli.serve import dev_banner, stop_on_signals
from episodic.config import Settings, split_address
from episodic.config.concerns import CallerSettings, McpSettings
from episodic.domain.model import Caller
from episodic.edges.mcp.auth import stdio_caller
from episodic.edges.mcp.serve import HTTP_STOP_SECONDS, MCP_PATH, bound, serve_http, serve_stdio
from episodic.edges.mcp.server import build_server

log = logging.getLogger("episodic.mcp")


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
        await _until_stopped(serve_stdio(server), stop)


async def _serve_http(settings: Settings, address: tuple[str, int], stop: asyncio.Event) -> None:
    with bound(*address) as sock:
        async with open_app(settings) as app, serve_http(app, sock) as port:
            log.info("serving MCP over HTTP", extra={"host": address[0], "port": port, "path": MCP_PATH})
            await stop.wait()
            log.info("shutting down", extra={"grace_seconds": HTTP_STOP_SECONDS})


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
