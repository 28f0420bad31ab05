"""A gRPC client that never reads: raw HTTP/2 on a socket, advertising a zero flow-control
window (SETTINGS_INITIAL_WINDOW_SIZE = 0), so the server may send headers but not one byte
of any response body. It answers the server's SETTINGS and PINGs like a live peer, so
keepalive does not close the connection for it: only the server's own caps can. The
fairness bench and tests/chaos/test_stalled_clients.py both drive it."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable, Sequence
from contextlib import suppress

from google.protobuf.message import Message

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0x0, 0x1, 0x3, 0x4, 0x6, 0x7
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
SETTINGS_INITIAL_WINDOW_SIZE = 0x4


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", kind, flags, stream_id) + payload


def _hpack_int(value: int) -> bytes:
    """An HPACK integer with a 7-bit prefix (RFC 7541 §5.1); the H (Huffman) bit stays 0."""
    if value < 127:
        return bytes([value])
    out, value = bytearray([127]), value - 127
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    return bytes(out) + bytes([value])


def hpack_literal(name: str, value: str) -> bytes:
    """Literal header field without indexing, new name (RFC 7541 §6.2.2): no table state."""
    raw_name, raw_value = name.encode(), value.encode()
    return b"\x00" + _hpack_int(len(raw_name)) + raw_name + _hpack_int(len(raw_value)) + raw_value


class StallingClient:
    """One connection; `call` starts a unary-request RPC whose response is never read."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, authority: str) -> None:
        self._reader, self._writer, self._authority = reader, writer, authority
        self._next_stream = 1
        self.started = 0  # response headers: the server rendered the response and waits to send it
        self.refused = 0  # trailers-only answers (e.g. RESOURCE_EXHAUSTED), no body to hold
        self.reset = 0  # RST_STREAMs: streams the server refused or gave up on
        self.goaway = False
        self._changed = asyncio.Event()
        self._answering = asyncio.create_task(self._answer())

    @classmethod
    async def connect(cls, host: str, port: int) -> StallingClient:
        reader, writer = await asyncio.open_connection(host, port)
        window_zero = struct.pack(">HI", SETTINGS_INITIAL_WINDOW_SIZE, 0)
        writer.write(PREFACE + frame(SETTINGS, 0, 0, window_zero))
        await writer.drain()
        return cls(reader, writer, f"{host}:{port}")

    async def call(self, method: str, request: Message, metadata: Sequence[tuple[str, str]] = ()) -> None:
        stream_id, self._next_stream = self._next_stream, self._next_stream + 2
        fields = (
            (":method", "POST"),
            (":scheme", "http"),
            (":path", method),
            (":authority", self._authority),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            *metadata,
        )
        headers = b"".join(hpack_literal(k, v) for k, v in fields)
        body = request.SerializeToString()
        message = b"\x00" + struct.pack(">I", len(body)) + body
        self._writer.write(frame(HEADERS, END_HEADERS, stream_id, headers))
        self._writer.write(frame(DATA, END_STREAM, stream_id, message))
        await self._writer.drain()

    async def wait_until(self, condition: Callable[[], bool]) -> None:
        """Until the frames received so far satisfy `condition`."""
        while not condition():
            self._changed.clear()
            await self._changed.wait()

    async def close(self) -> None:
        self._answering.cancel()
        with suppress(asyncio.CancelledError):
            await self._answering
        self._writer.close()
        with suppress(OSError):
            await self._writer.wait_closed()

    async def _answer(self) -> None:
        """Acks SETTINGS and PINGs; reads (and drops) whatever else arrives."""
        with suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await self._reader.readexactly(9)
                length = int.from_bytes(head[:3], "big")
                kind, flags = head[3], head[4]
                payload = await self._reader.readexactly(length)
                if kind == SETTINGS and not flags & ACK:
                    self._writer.write(frame(SETTINGS, ACK, 0))
                elif kind == PING and not flags & ACK:
                    self._writer.write(frame(PING, ACK, 0, payload))
                self._count(kind, flags)
                self._changed.set()

    def _count(self, kind: int, flags: int) -> None:
        if kind == HEADERS and flags & END_STREAM:
            self.refused += 1
        elif kind == HEADERS:
            self.started += 1
        elif kind == RST_STREAM:
            self.reset += 1
        elif kind == GOAWAY:
            self.goaway = True
