"""Every HTTP listener (the inspector, MCP over HTTP, metrics) is bounded against strangers,
who need no key to open a socket: connections beyond the listener's cap are answered 503
and closed at once, a request head or body that trickles is closed after its timeout, an
oversized request line or header block gets 414 or 431 (not a reset), and through all of it
the gRPC server stays SERVING. Also: the inspector's numeric query parameters take ASCII
digits only (400, not 500), and metrics stay on when OTEL_SDK_DISABLED switches tracing off."""

from __future__ import annotations

import asyncio
import dataclasses
import http.client
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from urllib.parse import quote

import grpc
import pytest

from episodic.bootstrap.lifecycle import open_app, serve_app
from episodic.config.concerns import InspectorSettings
from episodic.edges.inspector.serving import serving_inspector
from episodic.edges.mcp import serve as mcp_serve
from tests.e2e.helpers import assert_serving
from tests.server_harness import KEY_A, bearer, settings_for

CAP = 20
SOCKETS = 60  # three times the cap, far below the open-file limit
HEAD_SECONDS = 1.0
BODY_SECONDS = 1.0
ENDED_WITHIN = 15.0  # generous: every slow socket is closed well before this
PATHS = {"inspector": "/", "mcp": mcp_serve.MCP_PATH, "metrics": "/metrics"}
LISTENERS = tuple(PATHS)
RESET = b"(reset)"


@dataclass(frozen=True)
class Listeners:
    grpc_address: str
    ports: dict[str, int]


@asynccontextmanager
async def listening(sqlite_url: str) -> AsyncIterator[Listeners]:
    """One app serving gRPC, metrics, the inspector and MCP over HTTP, each capped at CAP."""
    settings = dataclasses.replace(
        settings_for(sqlite_url),
        metrics_address="127.0.0.1:0",
        http_max_connections=CAP,
        http_header_timeout_seconds=HEAD_SECONDS,
        http_body_timeout_seconds=BODY_SECONDS,
    )
    async with AsyncExitStack() as stack:
        app = await stack.enter_async_context(open_app(settings))
        grpc_server = await stack.enter_async_context(serve_app(app, grace_seconds=1))
        # beside serve_app, as its inspector's port is not exposed
        with_inspector = dataclasses.replace(settings, inspector_address="127.0.0.1:0")
        inspector = await stack.enter_async_context(
            serving_inspector(InspectorSettings.of(with_inspector), app.services.inspection, app.keys)
        )
        sock = stack.enter_context(mcp_serve.bound("127.0.0.1", 0))
        mcp = await stack.enter_async_context(mcp_serve.serve_http(app, sock))
        assert inspector is not None and app.metrics.port is not None
        ports = {"inspector": inspector, "mcp": mcp, "metrics": app.metrics.port}
        yield Listeners(f"127.0.0.1:{grpc_server.port}", ports)


@pytest.fixture
async def listeners(sqlite_url: str) -> AsyncIterator[Listeners]:
    async with listening(sqlite_url) as found:
        yield found


# --- raw sockets ------------------------------------------------------------------------


@dataclass
class Slow:
    """A socket that sent part of a request and waits: what it got back, once it ended."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    @classmethod
    async def open(cls, port: int, sent: bytes) -> Slow:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(sent)
        await writer.drain()
        return cls(reader, writer)

    async def ended(self, within: float = ENDED_WITHIN) -> bytes | None:
        """What the server sent before closing (RESET if it reset the connection: closing a
        socket with unread bytes does); None if it is still open after `within`."""
        got = b""
        try:
            async with asyncio.timeout(within):
                while chunk := await self.reader.read(4096):
                    got += chunk
        except TimeoutError:
            return None
        except ConnectionError:
            return got or RESET
        return got

    def close(self) -> None:
        self.writer.transport.abort()


def partial_head(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".encode()


def blocking_get(port: int, target: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", target, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read().decode(errors="replace")
    finally:
        connection.close()


async def get(port: int, target: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    return await asyncio.to_thread(blocking_get, port, target, headers)


async def grpc_serving(listeners: Listeners) -> None:
    async with grpc.aio.insecure_channel(listeners.grpc_address) as channel:
        await assert_serving(channel, bearer(KEY_A))


# --- tests ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", LISTENERS)
async def test_slow_sockets_beyond_the_cap_are_refused_and_the_rest_time_out(
    listeners: Listeners, name: str
) -> None:
    port = listeners.ports[name]
    slow = [await Slow.open(port, partial_head(PATHS[name])) for _ in range(SOCKETS)]
    try:
        await grpc_serving(listeners)  # while the listener is full
        ended = await asyncio.gather(*(s.ended() for s in slow))
    finally:
        for s in slow:
            s.close()
    assert all(got is not None for got in ended), "a slow socket was held open"
    # refused at once: a 503, or a reset when the request's first bytes were still unread;
    # the cap's worth were held until their head timed out (a clean close), and some may
    # have timed out before the last sockets came, freeing room for others
    refused = [got for got in ended if got == RESET or (got or b"").startswith(b"HTTP/1.1 503")]
    assert SOCKETS - 2 * CAP <= len(refused) <= SOCKETS - CAP
    await grpc_serving(listeners)
    status, _ = await get(port, PATHS[name])  # room again once the slow ones are gone
    assert status != 503


@pytest.mark.parametrize("name", LISTENERS)
async def test_a_head_that_never_completes_is_closed_after_the_header_timeout(
    listeners: Listeners, name: str
) -> None:
    slow = await Slow.open(listeners.ports[name], partial_head(PATHS[name]))
    try:
        assert await slow.ended() is not None
    finally:
        slow.close()


@pytest.mark.parametrize("name", ["inspector", "mcp"])
async def test_a_body_that_trickles_is_closed_after_the_body_timeout(listeners: Listeners, name: str) -> None:
    head = f"POST {PATHS[name]} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n".encode()
    slow = await Slow.open(listeners.ports[name], head + b"{")
    try:
        ended = asyncio.ensure_future(slow.ended())
        for _ in range(int(ENDED_WITHIN * 2)):  # a byte every half second keeps it busy
            if ended.done():
                break
            slow.writer.write(b" ")
            await asyncio.sleep(0.5)
        assert await ended is not None, "the trickling body was never cut off"
    finally:
        slow.close()


@pytest.mark.parametrize("name", LISTENERS)
async def test_a_500_kb_url_gets_414(listeners: Listeners, name: str) -> None:
    status, _ = await get(listeners.ports[name], PATHS[name] + "?q=" + "a" * 500_000)
    assert status == 414
    await grpc_serving(listeners)


@pytest.mark.parametrize("name", LISTENERS)
async def test_oversized_headers_get_431(listeners: Listeners, name: str) -> None:
    headers = {f"X-Filler-{i}": "b" * 1000 for i in range(20)}  # 20 KiB in all
    status, _ = await get(listeners.ports[name], PATHS[name], headers)
    assert status == 431
    status, _ = await get(listeners.ports[name], PATHS[name], {"X-Small": "c" * 1000})
    assert status not in (414, 431)


@pytest.mark.parametrize("offset", ["²", "١", "1" * 5000, "-1", "1.5"])
async def test_a_non_ascii_or_huge_offset_gets_400_naming_it(listeners: Listeners, offset: str) -> None:
    target = f"/api/model-calls/anything?offset={quote(offset)}"
    status, body = await get(listeners.ports["inspector"], target, {"Authorization": f"Bearer {KEY_A}"})
    assert status == 400, body
    assert "offset" in body


async def test_metrics_stay_on_when_otel_sdk_disabled_turns_tracing_off(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")  # the SDK reads the process environment
    async with listening(sqlite_url) as found:
        await grpc_serving(found)
        status, body = await get(found.ports["metrics"], "/metrics")
    assert status == 200
    assert "episodic_" in body, "metrics went dark with tracing"
