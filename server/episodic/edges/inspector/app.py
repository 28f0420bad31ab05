"""The inspector's HTTP side: the page's static files and the JSON it reads, behind the
gRPC API keys. Read-only: every route is a GET. Handlers only translate; the use cases
are `InspectionService`'s, and errors map to HTTP statuses by one table."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from episodic.domain.model import Caller
from episodic.domain.shares import ShareLimits
from episodic.edges.inspector import views
from episodic.edges.inspector.errors import error_response, internal_error_response, unauthenticated
from episodic.edges.keys import KeyRing
from episodic.errors import EpisodicError, InvalidArgument
from episodic.logs import describe_exception
from episodic.service.inspection import InspectionService
from episodic.state.shares import TenantShares

log = logging.getLogger("episodic.inspector")

STATIC = Path(__file__).parent / "static"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
# The page's own files only: no inline script or style, no other origin, no framing.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}
NO_STORE = {"Cache-Control": "no-store"}  # user content never lingers in a browser cache
CALLER_KEY = "episodic.caller"
MAX_OFFSET = 10_000_000

Handler = Callable[[Request, Caller], Awaitable[views.Json]]


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    content_type: str
    etag: str  # of the bytes: a browser revalidates and gets 304 until the package changes


@dataclass(frozen=True, slots=True)
class Assets:
    """The static files, read once at start-up (they ship inside the package)."""

    files: Mapping[str, Asset]

    @classmethod
    def load(cls, folder: Path = STATIC) -> Assets:
        found = {}
        for path in sorted(folder.iterdir()) if folder.is_dir() else []:
            content_type = CONTENT_TYPES.get(path.suffix)
            if path.is_file() and content_type is not None:
                body = path.read_bytes()
                etag = f'"{hashlib.sha256(body).hexdigest()[:32]}"'
                found[path.name] = Asset(body, content_type, etag)
        return cls(found)

    def response(self, name: str, if_none_match: str | None) -> Response:
        asset = self.files.get(name)
        if asset is None:
            return Response("not found", status_code=404, media_type="text/plain")
        headers = {"Cache-Control": "no-cache", "ETag": asset.etag}
        if if_none_match is not None and asset.etag in if_none_match:
            return Response(status_code=304, headers=headers)
        return Response(asset.body, media_type=asset.content_type, headers=headers)


def build_inspector(
    inspection: InspectionService,
    keys: KeyRing,
    dev: Caller | None,
    trace_url_template: str = "",
    shares: TenantShares | None = None,
) -> ASGIApp:
    """`shares`: each JSON request is held to its tenant's share, as a gRPC call is."""
    assets = Assets.load()
    shares = TenantShares(ShareLimits()) if shares is None else shares
    routes = _Routes(inspection, trace_url_template)

    async def index(request: Request) -> Response:
        return assets.response("index.html", request.headers.get("if-none-match"))

    async def static(request: Request) -> Response:
        return assets.response(str(request.path_params["name"]), request.headers.get("if-none-match"))

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/static/{name}", static),
            *(Route(path, _api(handler, shares)) for path, handler in routes.table().items()),
        ]
    )
    return SecurityHeaders(ApiAuth(app, keys, dev))


def _api(handler: Handler, shares: TenantShares) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        caller = request.scope[CALLER_KEY]
        try:
            async with shares.serving(caller.tenant_id):
                body = await handler(request, caller)
        except EpisodicError as exc:
            return error_response(exc)
        except Exception as exc:
            log.error("inspector request failed", extra=describe_exception(exc))
            return internal_error_response()
        return JSONResponse(body, headers=NO_STORE)

    return endpoint


class _Routes:
    """One handler per JSON route: read the path and query, call the use case, render."""

    def __init__(self, inspection: InspectionService, trace_url_template: str) -> None:
        self._use = inspection
        self._template = trace_url_template

    def table(self) -> dict[str, Handler]:
        return {
            "/api/session": self.session,
            "/api/agents": self.agents,
            "/api/agents/{agent_id}/users": self.users,
            "/api/agents/{agent_id}/users/{user_id}/episodes": self.episodes,
            "/api/episodes/{episode_id}": self.episode,
            "/api/episodes/{episode_id}/messages": self.messages,
            "/api/episodes/{episode_id}/model-calls": self.model_calls,
            "/api/episodes/{episode_id}/where": self.where,
            "/api/model-calls/{model_call_id}": self.model_call,
            "/api/model-calls/{model_call_id}/diff": self.diff,
            "/api/model-calls/{model_call_id}/why-not": self.why_not,
            "/api/agents/{agent_id}/documents/{document_id}": self.document,
        }

    async def session(self, _: Request, caller: Caller) -> views.Json:
        return {"tenant_id": caller.tenant_id, "trace_url_template": self._template}

    async def agents(self, request: Request, caller: Caller) -> views.Json:
        page = await self._use.list_agents(caller, _token(request))
        return views.listing("agents", [views.agent(a) for a in page.items], page.next_token)

    async def users(self, request: Request, caller: Caller) -> views.Json:
        page = await self._use.list_users(caller, _path(request, "agent_id"), _token(request))
        return views.listing("users", [views.user(u) for u in page.items], page.next_token)

    async def episodes(self, request: Request, caller: Caller) -> views.Json:
        agent_id, user_id = _path(request, "agent_id"), _path(request, "user_id")
        page = await self._use.list_episodes(caller, agent_id, user_id, _token(request))
        return views.listing("episodes", [views.episode(e) for e in page.items], page.next_token)

    async def episode(self, request: Request, caller: Caller) -> views.Json:
        found = await self._use.get_episode(caller, _path(request, "episode_id"))
        return {"episode": views.episode(found)}

    async def messages(self, request: Request, caller: Caller) -> views.Json:
        page = await self._use.list_messages(caller, _path(request, "episode_id"), _token(request))
        return views.listing("messages", [views.message(m) for m in page.items], page.next_token)

    async def model_calls(self, request: Request, caller: Caller) -> views.Json:
        page = await self._use.list_model_calls(caller, _path(request, "episode_id"), _token(request))
        return views.listing("model_calls", [views.call_summary(c) for c in page.items], page.next_token)

    async def model_call(self, request: Request, caller: Caller) -> views.Json:
        offset = _offset(request)
        call = await self._use.get_model_call(caller, _path(request, "model_call_id"))
        return {"model_call": views.model_call(call, offset, self._template)}

    async def document(self, request: Request, caller: Caller) -> views.Json:
        agent_id, document_id = _path(request, "agent_id"), _path(request, "document_id")
        found, chunks = await self._use.get_document(caller, agent_id, document_id)
        return {"document": views.document(found, chunks)}

    async def diff(self, request: Request, caller: Caller) -> views.Json:
        return views.diff(await self._use.diff(caller, _path(request, "model_call_id")))

    async def why_not(self, request: Request, caller: Caller) -> views.Json:
        about = request.query_params.get("about", "")
        call, found = await self._use.candidacy(caller, _path(request, "model_call_id"), about)
        return views.candidacy(call, found)

    async def where(self, request: Request, caller: Caller) -> views.Json:
        phrase = request.query_params.get("phrase", "")
        traced = await self._use.where(caller, _path(request, "episode_id"), phrase)
        return views.where(phrase.strip(), traced)


def _path(request: Request, name: str) -> str:
    return str(request.path_params[name])


def _token(request: Request) -> str:
    return request.query_params.get("page_token", "")


def _offset(request: Request) -> int:
    return _whole_number(request, "offset", MAX_OFFSET, "must be a whole number of messages, 0 or more")


def _whole_number(request: Request, name: str, maximum: int, problem: str) -> int:
    """ASCII digits only: str.isdigit() also takes "²", which int() refuses (a 500), and an
    unbounded run of digits, which int() refuses past 4,300."""
    raw = request.query_params.get(name, "") or "0"
    if not (raw.isascii() and raw.isdigit()) or len(raw) > len(str(maximum)) or int(raw) > maximum:
        raise InvalidArgument.of(name, problem)
    return int(raw)


class ApiAuth:
    """Every /api/ request is served as the caller of its `Authorization: Bearer <key>`;
    without a valid one it is refused (401) before any handler runs. The page and its
    static files need no key: they hold no data."""

    def __init__(self, app: ASGIApp, keys: KeyRing, dev: Caller | None) -> None:
        self._app = app
        self._keys = keys
        self._dev = dev

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith("/api/"):
            await self._app(scope, receive, send)
            return
        caller = self._keys.caller_for_header(Headers(scope=scope).get("authorization"), self._dev)
        if caller is None:
            await unauthenticated()(scope, receive, send)
            return
        scope[CALLER_KEY] = caller
        await self._app(scope, receive, send)


class SecurityHeaders:
    """The CSP and its companions on every response, errors and 404s included."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers: list[Any] = list(message.get("headers", []))
                headers += [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self._app(scope, receive, with_headers)
