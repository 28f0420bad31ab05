"""What every HTTP listener (inspector, MCP, metrics) holds against strangers: no key is
needed to open a socket, so each listener bounds how long a request head or body may take,
how large a head may be, and how many connections it holds at once, and it reports what it
turned away in one counted log line per interval, never one per socket."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus

# Method, target and version: 414 beyond. The longest valid request is an inspector search
# for a 1,000-character phrase, percent-encoded UTF-8: up to 12 KiB.
MAX_REQUEST_LINE_BYTES = 16 * 1024
MAX_HEADER_BYTES = 16 * 1024  # every header line together: 431 beyond
LINGER_SECONDS = 2.0  # after a 414/431, the client's rest is read (and dropped) this long
NOTE_EVERY_SECONDS = 10.0  # at most one log line per reason and listener this often
HEAD_END = b"\r\n\r\n"


def head_problem(head: bytes | bytearray) -> HTTPStatus | None:
    """414 or 431 when the request head received so far (whole or not) is already too large."""
    start = 0
    while head.startswith(b"\r\n", start):  # empty lines before a request are allowed
        start += 2
    line_end = head.find(b"\r\n", start)
    line_bytes = (len(head) if line_end < 0 else line_end) - start
    if line_bytes > MAX_REQUEST_LINE_BYTES:
        return HTTPStatus.REQUEST_URI_TOO_LONG
    if line_end < 0:
        return None
    head_end = head.find(HEAD_END, line_end)
    header_bytes = (len(head) if head_end < 0 else head_end) - (line_end + 2)
    if header_bytes > MAX_HEADER_BYTES:
        return HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE
    return None


def plain_answer(status: HTTPStatus) -> bytes:
    """A whole HTTP/1.1 answer that closes the connection, for refusals made before (or
    instead of) the application."""
    body = f"{status.value} {status.phrase}\n".encode()
    head = (
        f"HTTP/1.1 {status.value} {status.phrase}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


class Tally:
    """Counts one kind of turned-away connection and logs it at most once per `every`
    seconds with the count since the last line, so a flood costs one line, not one per
    socket. Only the listener's name is logged: nothing the stranger sent."""

    def __init__(
        self,
        logger: logging.Logger,
        message: str,
        listener: str,
        every: float = NOTE_EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._message = message
        self._listener = listener
        self._every = every
        self._clock = clock
        self._count = 0
        self._next_line = 0.0
        self._flush_due = False
        self.total = 0

    def add(self) -> None:
        self._count += 1
        self.total += 1
        wait = self._next_line - self._clock()
        if wait <= 0:
            self.flush()
        elif not self._flush_due:  # a burst that then stops is still reported, once
            self._flush_due = _call_later(wait, self.flush)

    def flush(self) -> None:
        self._flush_due = False
        if not self._count:
            return
        extra = {"listener": self._listener, "count": self._count, "per_seconds": self._every}
        self._logger.warning(self._message, extra=extra)
        self._count = 0
        self._next_line = self._clock() + self._every


def _call_later(delay: float, callback: Callable[[], None]) -> bool:
    """Whether `callback` was scheduled (only from within an event loop)."""
    try:
        asyncio.get_running_loop().call_later(delay, callback)
    except RuntimeError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class Tallies:
    """A listener's turned-away connections, by reason."""

    refused: Tally  # beyond max_connections
    timed_out: Tally  # head, body or write not done in time
    too_large: Tally  # 414 / 431

    @classmethod
    def of(cls, logger: logging.Logger, listener: str) -> Tallies:
        return cls(
            refused=Tally(logger, "HTTP connections refused: listener at its connection cap", listener),
            timed_out=Tally(logger, "HTTP connections closed: request or answer too slow", listener),
            too_large=Tally(logger, "HTTP requests refused: request line or headers too large", listener),
        )
