"""Serving an ASGI app (the MCP endpoint, the inspector) with uvicorn on a socket bound
beforehand, so a taken port fails the start before the database opens. Signals stay the
command's: it stops the app after the server.

uvicorn's h11 protocol bounds only the idle time between requests; `GuardedH11` adds what
`http_guard` asks of every listener: a connection cap (one more socket is answered 503 and
closed at once, so open files stay bounded), deadlines for a request's head, its body and a
stalled answer, and 414/431 for an oversized head, read to its end so the client sees them."""

from __future__ import annotations

import asyncio
import logging
import math
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from http import HTTPStatus
from typing import Any, ClassVar

import h11
import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

from episodic.config import ConfigError
from episodic.config.concerns import HttpLimits
from episodic.edges.http.guard import (
    HEAD_END,
    LINGER_SECONDS,
    MAX_HEADER_BYTES,
    MAX_REQUEST_LINE_BYTES,
    Tallies,
    head_problem,
    plain_answer,
)

log = logging.getLogger("episodic.http")

WRITE_SECONDS = 30.0  # an answer the client takes nothing of for this long is dropped


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
    """uvicorn's server without its signal handlers, and with an event for its start."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self.ready.set()


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol under a listener's `HttpLimits` (set on a subclass per
    listener by `guarded_protocol`)."""

    limits: ClassVar[HttpLimits]
    tallies: ClassVar[Tallies]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._refused = False
        self._lingering = False
        self._head = bytearray()  # the head being read, for its size limits
        self._reading_head = False
        self._reading_body = False
        self._deadline: asyncio.TimerHandle | None = None
        self._write_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.limits.max_connections:
            self._refuse(transport)
            return
        super().connection_made(transport)
        self._expect_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel(self._deadline)
        self._cancel(self._write_deadline)
        if not self._refused:
            super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused or self._lingering:
            return  # dropped: the answer is on its way and the connection closes
        if self._reading_head and self._head_too_large(data):
            return
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._expect_head()
        else:
            self._follow()  # a pipelined request may already be read

    def pause_writing(self) -> None:
        super().pause_writing()
        self._cancel(self._write_deadline)
        self._write_deadline = self.loop.call_later(WRITE_SECONDS, self._too_slow)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._cancel(self._write_deadline)
        self._write_deadline = None

    def _refuse(self, transport: asyncio.Transport) -> None:
        """Over the cap: a 503 (a fresh socket's send buffer takes it at once), then closed;
        the socket never joins the server's connections."""
        self._refused = True
        self.transport = transport
        transport.write(plain_answer(HTTPStatus.SERVICE_UNAVAILABLE))
        transport.close()
        self.tallies.refused.add()

    def _expect_head(self) -> None:
        self._head.clear()
        self._reading_head = True
        self._reading_body = False
        self._arm(self.limits.header_seconds)

    def _head_too_large(self, data: bytes) -> bool:
        self._head += data
        problem = head_problem(self._head)
        if HEAD_END in self._head or problem is not None:
            self._head.clear()  # whole (h11 takes it from here) or refused: no need to keep it
        if problem is None:
            return False
        self._reject(problem)
        return True

    def _reject(self, status: HTTPStatus) -> None:
        """The answer, then the client's rest is read and dropped for a while: closing with
        unread data would reset the connection before the client reads the answer."""
        self.tallies.too_large.add()
        self._lingering = True
        self._reading_head = False
        self.transport.write(plain_answer(status))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._arm(LINGER_SECONDS, counted=False)

    def _follow(self) -> None:
        """Moves the deadline along with h11's view of the request."""
        state = self.conn.their_state
        if state is h11.IDLE:
            return  # the head is still arriving: its deadline stands
        self._reading_head = False
        if state is h11.SEND_BODY:
            if not self._reading_body:
                self._reading_body = True
                self._arm(self.limits.body_seconds)
            return
        self._reading_body = False
        self._cancel(self._deadline)  # read whole: the application's time is its own
        self._deadline = None

    def _arm(self, seconds: float, *, counted: bool = True) -> None:
        self._cancel(self._deadline)
        self._deadline = self.loop.call_later(seconds, self._too_slow if counted else self._drop)

    def _too_slow(self) -> None:
        if not self.transport.is_closing():
            self.tallies.timed_out.add()
        self._drop()

    def _drop(self) -> None:
        self.transport.abort()  # close() would wait for a client that reads nothing

    @staticmethod
    def _cancel(timer: asyncio.TimerHandle | None) -> None:
        if timer is not None:
            timer.cancel()


def guarded_protocol(limits: HttpLimits, tallies: Tallies) -> type[GuardedH11]:
    return type("GuardedH11", (GuardedH11,), {"limits": limits, "tallies": tallies})


@asynccontextmanager
async def serving_asgi(
    asgi: ASGIApp,
    sock: socket.socket,
    *,
    setting: str,
    stop_seconds: float,
    limits: HttpLimits,
    lifespan: str = "off",
) -> AsyncIterator[int]:
    """`asgi` on `sock` until the block ends (requests in flight then get `stop_seconds`);
    yields the port."""
    config = uvicorn.Config(
        asgi,
        http=guarded_protocol(limits, Tallies.of(log, setting)),
        # h11's own limit, behind ours: it also covers pipelined heads ours does not scan
        h11_max_incomplete_event_size=MAX_REQUEST_LINE_BYTES + MAX_HEADER_BYTES + 1024,
        timeout_keep_alive=math.ceil(limits.keepalive_seconds),
        backlog=limits.max_connections,
        log_config=None,
        access_log=False,
        lifespan=lifespan,  # type: ignore[arg-type]
        ws="none",
        server_header=False,  # says nothing about what serves it
        timeout_graceful_shutdown=int(stop_seconds),
    )
    http = _Uvicorn(config)
    serving = asyncio.create_task(http.serve(sockets=[sock]))
    ready = asyncio.create_task(http.ready.wait())
    try:
        await asyncio.wait((serving, ready), return_when=asyncio.FIRST_COMPLETED)
    finally:
        ready.cancel()
        with suppress(asyncio.CancelledError):
            await ready
    if serving.done():
        await serving  # raises what stopped the start
        raise ConfigError(f"{setting}: the HTTP server stopped while starting")
    try:
        yield int(sock.getsockname()[1])
    finally:
        http.should_exit = True
        await serving
        _abort_left_over(http)


def _abort_left_over(http: uvicorn.Server) -> None:
    """Resets the connections uvicorn's shutdown left open. asyncio makes a socket accepted
    just before the listener closed into a connection a moment later, after uvicorn asked
    its connections to finish; uvicorn never closes it, so its client waited for an answer
    that never came. A reset is what the kernel gives a connection the closed listener never
    accepted: no answer begun."""
    for connection in list(http.server_state.connections):
        transport = getattr(connection, "transport", None)
        if transport is not None and not transport.is_closing():
            transport.abort()
