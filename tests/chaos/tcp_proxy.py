"""A TCP proxy the test can cut and restore, or freeze and thaw: an outage, or a hung
database, behind it, without touching the shared database server."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field


@dataclass
class CuttableProxy:
    """Forwards 127.0.0.1:`port` to 127.0.0.1:`target_port`. `cut()` refuses new
    connections and drops open ones (as a stopped server or a pulled cable would);
    `restore()` listens again on the same port. `freeze()` makes it a black hole, as a
    SIGSTOPped server is: connections stay open and new ones are accepted, but no byte is
    forwarded either way until `thaw()`, which passes on everything held back."""

    target_port: int
    port: int = 0
    _server: asyncio.Server | None = None
    _open: set[asyncio.StreamWriter] = field(default_factory=set)
    _flowing: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self._flowing.set()

    def freeze(self) -> None:
        self._flowing.clear()

    def thaw(self) -> None:
        self._flowing.set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._forward, "127.0.0.1", self.port, reuse_address=True)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def cut(self) -> None:
        server, self._server = self._server, None
        for writer in list(self._open):
            writer.transport.abort()
        self._open.clear()
        if server is not None:
            server.close()
            await server.wait_closed()

    async def restore(self) -> None:
        await self.start()

    async def _forward(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self._open.add(client_w)
        await self._flowing.wait()  # a frozen server accepts (its kernel does) but never answers
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            client_w.transport.abort()
            return
        self._open.update((client_w, server_w))
        try:
            await asyncio.gather(
                _pipe(client_r, server_w, self._flowing), _pipe(server_r, client_w, self._flowing)
            )
        finally:
            for writer in (client_w, server_w):
                self._open.discard(writer)
                writer.transport.abort()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, flowing: asyncio.Event) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(65536):
            await flowing.wait()
            writer.write(data)
            await writer.drain()
    writer.transport.abort()
