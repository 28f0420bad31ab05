"""stdin as lines read on the event loop. The SDK reads stdin in a worker thread, and a read
blocked there cannot be cancelled: a SIGTERM while the host keeps stdin open would never
finish the shutdown. A pipe (what MCP hosts give) is read without a thread instead;
anything else falls back to the SDK's own reader."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

MAX_LINE_BYTES = 64 * 1024 * 1024  # one JSON-RPC message per line


class PipeLines:
    """What the SDK's stdio transport iterates: decoded lines, until end of input."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


def _is_own_pipe(fd: int, other: int) -> bool:
    """A pipe not shared with `other`: made non-blocking for the loop, it must not make the
    other end (stdout, written by the SDK's thread) non-blocking too."""
    try:
        mine, theirs = os.fstat(fd), os.fstat(other)
    except OSError:
        return False
    shared = (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)
    return stat.S_ISFIFO(mine.st_mode) and not shared


@asynccontextmanager
async def stdin_lines() -> AsyncIterator[PipeLines | None]:
    """None: stdin is not a pipe of its own; let the SDK read it."""
    if not _is_own_pipe(sys.stdin.fileno(), sys.stdout.fileno()):
        yield None
        return
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(sys.stdin.fileno(), "rb", closefd=False)
    )
    try:
        yield PipeLines(reader)
    finally:
        transport.close()
