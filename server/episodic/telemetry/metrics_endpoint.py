"""The --metrics-address listener: GET /metrics and nothing else (404 for any other path,
405 for another method), one request per connection.

It runs on the event loop, so a scrape reads the in-RAM state from the thread that changes
it; all its I/O is asynchronous with timeouts, so a slow or stalled scraper holds only its
own connection, never an RPC. Like every HTTP listener (`http_guard`), it holds at most
`max_connections` at once (one more is answered 503 and closed), closes a head that takes
longer than `header_seconds`, and answers 414/431 to an oversized one. Closing stops
listening first (a scrape that comes after is refused), then lets the scrapes in flight
finish for a bounded time."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http import HTTPStatus

from episodic.config import ConfigError, split_address
from episodic.config.concerns import HttpLimits
from episodic.edges.http.guard import (
    HEAD_END,
    LINGER_SECONDS,
    Tallies,
    head_problem,
    plain_answer,
)
from episodic.telemetry.metrics import Metrics

log = logging.getLogger(__name__)

PATH = "/metrics"
READ_BYTES = 4096  # per read of the head; a scraper sends a few hundred in all
WRITE_SECONDS = 10.0  # for the scraper to take the answer
CLOSE_SECONDS = 5.0  # for scrapes in flight when the endpoint closes
ACCEPT_SETTLE_TURNS = 3  # event-loop turns from an accepted socket to its answer task


class MetricsEndpoint:
    def __init__(self, metrics: Metrics, limits: HttpLimits | None = None) -> None:
        self._metrics = metrics
        self._limits = limits or HttpLimits()
        self._tallies = Tallies.of(log, "metrics_address")
        self._server: asyncio.Server | None = None
        self._answering: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self._server is not None, "not listening"
        return int(self._server.sockets[0].getsockname()[1])

    async def open(self, address: str) -> None:
        host, port = split_address("metrics_address", address)
        try:
            self._server = await asyncio.start_server(
                self._accept, host, port, backlog=self._limits.max_connections
            )
        except OSError as exc:  # asyncio's own message repeats the address: keep the reason
            reason = os.strerror(exc.errno) if exc.errno else str(exc)
            raise ConfigError(
                f"metrics_address: cannot listen on {address}: {reason}; "
                "stop the other process or choose another --metrics-address"
            ) from exc

    async def close(self) -> None:
        if self._server is None:
            return
        self._server.close()  # no new connections from here on
        # A connection the loop accepted just before reaches _accept a turn or two later
        # (its transport is made by a task, then connection_made is scheduled): let it, so
        # it is answered like the others instead of left hanging.
        for _ in range(ACCEPT_SETTLE_TURNS):
            await asyncio.sleep(0)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CLOSE_SECONDS
        while self._answering and (left := deadline - loop.time()) > 0:
            await asyncio.wait(set(self._answering), timeout=left)
        late = set(self._answering)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
        self._server = None

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._answering) >= self._limits.max_connections:
            # over the cap: a fresh socket's send buffer takes the 503 at once, then it closes
            writer.write(plain_answer(HTTPStatus.SERVICE_UNAVAILABLE))
            writer.close()
            self._tallies.refused.add()
            return
        task = asyncio.get_running_loop().create_task(self._answer(reader, writer))
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(_read_head(reader), self._limits.header_seconds)
            except TimeoutError:
                self._tallies.timed_out.add()
                raise
            if isinstance(head, HTTPStatus):
                await self._refuse_head(head, reader, writer)
                return
            status, body, content_type = await self._respond(head)
            writer.write(_response(status, body, content_type))
            await asyncio.wait_for(writer.drain(), WRITE_SECONDS)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            # the scraper went away, stalled or sent garbage: only its connection ends, at
            # once (close() would wait for a scraper that reads nothing)
            writer.transport.abort()
        except Exception:
            log.exception("metrics scrape failed")
        finally:
            writer.close()

    async def _refuse_head(
        self, status: HTTPStatus, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """414/431, then the client's rest is read and dropped for a while: closing with
        unread data would reset the connection before the client reads the answer."""
        self._tallies.too_large.add()
        writer.write(plain_answer(status))
        if writer.can_write_eof():
            writer.write_eof()
        await asyncio.wait_for(writer.drain(), WRITE_SECONDS)
        try:
            async with asyncio.timeout(LINGER_SECONDS):
                while await reader.read(64 * 1024):
                    pass
        except TimeoutError:
            pass

    async def _respond(self, head: bytes) -> tuple[HTTPStatus, bytes, str]:
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        parts = request_line.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return _plain(HTTPStatus.BAD_REQUEST)
        method, target = parts[0], parts[1].partition("?")[0]
        if target != PATH:
            return _plain(HTTPStatus.NOT_FOUND)
        if method != "GET":
            return _plain(HTTPStatus.METHOD_NOT_ALLOWED)
        await self._metrics.refresh()
        body, content_type = self._metrics.exposition(_header(header_lines, "accept"))
        return HTTPStatus.OK, body, content_type


async def _read_head(reader: asyncio.StreamReader) -> bytes | HTTPStatus:
    """The request line and headers, or 414/431 as soon as they are too large."""
    head = b""
    while HEAD_END not in head:
        chunk = await reader.read(READ_BYTES)
        if not chunk:
            raise asyncio.IncompleteReadError(head, None)
        head += chunk
        problem = head_problem(head)
        if problem is not None:
            return problem
    return head.partition(HEAD_END)[0] + HEAD_END


def _header(lines: list[str], name: str) -> str:
    for line in lines:
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == name:
            return value.strip()
    return ""


def _plain(status: HTTPStatus) -> tuple[HTTPStatus, bytes, str]:
    return status, f"{status.value} {status.phrase}\n".encode(), "text/plain; charset=utf-8"


def _response(status: HTTPStatus, body: bytes, content_type: str) -> bytes:
    allow = "Allow: GET\r\n" if status is HTTPStatus.METHOD_NOT_ALLOWED else ""
    head = (
        f"HTTP/1.1 {status.value} {status.phrase}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"{allow}Connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


@asynccontextmanager
async def serving_metrics(
    metrics: Metrics, address: str, limits: HttpLimits | None = None
) -> AsyncIterator[MetricsEndpoint | None]:
    """The endpoint on `address` for the block, when metrics are on (None otherwise)."""
    if not metrics.enabled or not address:
        yield None
        return
    endpoint = MetricsEndpoint(metrics, limits)
    await endpoint.open(address)
    metrics.port = endpoint.port
    log.info("serving metrics", extra={"address": address, "port": endpoint.port, "path": PATH})
    try:
        yield endpoint
    finally:
        await endpoint.close()
        metrics.port = None
