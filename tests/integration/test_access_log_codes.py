"""The access log writes exactly one line per call with the code the client saw, also for
calls the client cancelled or whose deadline passed, whether the handler was computing,
streaming, or waiting to write to a client that stopped reading."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import pytest

from episodic.edges.grpc.interceptors import ErrorInterceptor

SERVICE = "test.Slow"
BIG = b"x" * (1 << 20)  # a client that does not read stops the server's writes at once
CALLS = 10


class Lines:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def record(self, method: str, code: str, duration_ms: float, peer: str, trace_id: str = "") -> None:
        self.lines.append((method.rsplit("/", 1)[1], code))

    def close(self) -> None:
        return None


class Handlers:
    """Slow methods that count how many of their calls have started."""

    def __init__(self) -> None:
        self.started = 0

    async def wait(self, request: bytes, context: Any) -> bytes:
        self.started += 1
        await asyncio.sleep(30)
        return b""

    async def drip(self, request: bytes, context: Any) -> AsyncIterator[bytes]:
        self.started += 1
        while True:
            yield b"."
            await asyncio.sleep(0.02)

    async def flood(self, request: bytes, context: Any) -> AsyncIterator[bytes]:
        self.started += 1
        while True:
            yield BIG

    async def ok(self, request: bytes, context: Any) -> bytes:
        return b"ok"

    def generic(self) -> grpc.GenericRpcHandler[Any, Any]:
        unary, stream = grpc.unary_unary_rpc_method_handler, grpc.unary_stream_rpc_method_handler
        return grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "Wait": unary(self.wait),
                "Ok": unary(self.ok),
                "Drip": stream(self.drip),
                "Flood": stream(self.flood),
            },
        )


@pytest.fixture
async def served() -> AsyncIterator[tuple[grpc.aio.Channel, Handlers, Lines]]:
    lines, handlers = Lines(), Handlers()
    server = grpc.aio.server(interceptors=[ErrorInterceptor(lines)])
    server.add_generic_rpc_handlers((handlers.generic(),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield channel, handlers, lines
    await server.stop(None)


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(400):
        if condition():
            return
        await asyncio.sleep(0.025)
    raise AssertionError("timed out waiting")


async def _ended(call: Any, reads: int) -> grpc.StatusCode:
    """Reads `reads` responses, then stops reading until the call ends."""
    try:
        for _ in range(reads):
            await call.read()
        code: grpc.StatusCode = await call.code()
    except grpc.aio.AioRpcError as err:
        return err.code()
    return code


async def _batch(
    handlers: Handlers, start: Callable[[], Any], reads: int, cancel: bool
) -> list[grpc.StatusCode]:
    """CALLS calls, all begun on the server before any is cancelled (a call cancelled before
    the server begins it is never the server's)."""
    before = handlers.started
    calls = [start() for _ in range(CALLS)]
    ended: list[Awaitable[grpc.StatusCode]] = [_ended(call, reads) for call in calls]
    waiting = asyncio.gather(*ended)
    await _until(lambda: handlers.started == before + CALLS)
    if cancel:
        await asyncio.sleep(0.1)
        for call in calls:
            call.cancel()
    return list(await waiting)


async def test_every_cancelled_or_expired_call_gets_one_line_with_its_true_code(
    served: tuple[grpc.aio.Channel, Handlers, Lines],
) -> None:
    channel, handlers, lines = served
    wait = channel.unary_unary(f"/{SERVICE}/Wait", None, None)
    drip = channel.unary_stream(f"/{SERVICE}/Drip", None, None)
    flood = channel.unary_stream(f"/{SERVICE}/Flood", None, None)
    kinds: list[tuple[str, Callable[[], Any], int, bool]] = [
        ("Wait", lambda: wait(b""), 0, True),
        ("Wait", lambda: wait(b"", timeout=1.5), 0, False),
        ("Drip", lambda: drip(b""), 2, True),
        ("Drip", lambda: drip(b"", timeout=1.5), 2, False),
        ("Flood", lambda: flood(b""), 1, True),  # the server is stuck writing
        ("Flood", lambda: flood(b"", timeout=1.5), 1, False),
    ]
    expected: Counter[tuple[str, str]] = Counter()
    for method, start, reads, cancel in kinds:
        for code in await _batch(handlers, start, reads, cancel):
            expected[(method, code.name)] += 1
    assert await channel.unary_unary(f"/{SERVICE}/Ok", None, None)(b"", timeout=5) == b"ok"
    expected[("Ok", "OK")] += 1

    await _until(lambda: len(lines.lines) >= sum(expected.values()))
    assert Counter(lines.lines) == expected
    assert {code for _, code in expected} == {"CANCELLED", "DEADLINE_EXCEEDED", "OK"}
