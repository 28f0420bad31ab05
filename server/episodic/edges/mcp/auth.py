"""Who an MCP call is served as, with the API keys of `episodic serve`. Over stdio the
process serves one caller, the key in EPISODIC_MCP_API_KEY; over HTTP every request carries
its own `Authorization: Bearer <key>`, and a request without a valid one is refused before
it reaches the MCP layer. As for gRPC, `--insecure-dev` serves a request that carries no key
as the dev tenant, and a wrong key is refused even then, so a typo never writes there."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from episodic.config import ConfigError
from episodic.config.concerns import McpSettings
from episodic.domain.model import Caller
from episodic.edges.keys import KeyRing

CALLER_KEY = "episodic.caller"  # where an authenticated HTTP request's scope holds its caller
REFUSED = "missing or unknown API key: send 'Authorization: Bearer <key>'"
UNAUTHENTICATED = -32001  # JSON-RPC server error: no valid credential


def stdio_caller(settings: McpSettings, keys: KeyRing) -> Caller:
    key = settings.mcp_api_key.strip()
    if key:
        caller = keys.caller_for(key)
        if caller is None:
            raise ConfigError(
                "mcp_api_key: not one of the configured API keys (EPISODIC_API_KEYS or "
                "EPISODIC_API_KEYS_FILE hold its hash; see `episodic keygen`)"
            )
        return caller
    if settings.dev_tenant is not None:
        return Caller(settings.dev_tenant)
    raise ConfigError(
        "mcp_api_key: required over stdio: set EPISODIC_MCP_API_KEY to one of the configured API "
        "keys, or pass --insecure-dev for local development"
    )


def dev_caller(settings: McpSettings) -> Caller | None:
    return None if settings.dev_tenant is None else Caller(settings.dev_tenant)


def request_caller(request: Any) -> Caller | None:
    """The caller `BearerAuth` put on an HTTP request (the SDK hands handlers the request)."""
    scope = getattr(request, "scope", None)
    found = scope.get(CALLER_KEY) if isinstance(scope, dict) else None
    return found if isinstance(found, Caller) else None


class BearerAuth:
    """ASGI middleware in front of the MCP endpoint."""

    def __init__(self, app: ASGIApp, keys: KeyRing, dev: Caller | None) -> None:
        self._app = app
        self._keys = keys
        self._dev = dev

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan: the app's own start and stop
            await self._app(scope, receive, send)
            return
        caller = self._keys.caller_for_header(Headers(scope=scope).get("authorization"), self._dev)
        if caller is None:
            await _refuse(scope, receive, send)
            return
        scope[CALLER_KEY] = caller
        await self._app(scope, receive, send)


async def _refuse(scope: Scope, receive: Receive, send: Send) -> None:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": UNAUTHENTICATED, "message": REFUSED}}
    headers = {"WWW-Authenticate": 'Bearer realm="episodic"'}
    await JSONResponse(body, status_code=401, headers=headers)(scope, receive, send)
