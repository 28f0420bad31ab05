"""The metrics listener against bad input: garbled requests, a scraper that never finishes
its request while another scrapes, and a port another process holds."""

from __future__ import annotations

import asyncio
import socket

import pytest

from episodic.config import ConfigError
from episodic.telemetry.metrics import build_metrics
from episodic.telemetry.metrics_endpoint import MetricsEndpoint


async def exchange(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return answer


async def test_a_garbled_request_gets_400_and_the_listener_keeps_serving() -> None:
    endpoint = MetricsEndpoint(build_metrics("127.0.0.1:0", {}))
    await endpoint.open("127.0.0.1:0")
    try:
        assert (await exchange(endpoint.port, b"HELLO\r\n\r\n")).startswith(b"HTTP/1.1 400 ")
        assert (await exchange(endpoint.port, b"GET /metrics\r\n\r\n")).startswith(b"HTTP/1.1 400 ")
        too_long = b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 100_000 + b"\r\n\r\n"
        assert (await exchange(endpoint.port, too_long)).startswith(b"HTTP/1.1 431 ")
        answer = await exchange(endpoint.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200 ")
    finally:
        await endpoint.close()


async def test_a_stalled_scraper_does_not_hold_up_another() -> None:
    endpoint = MetricsEndpoint(build_metrics("127.0.0.1:0", {}))
    await endpoint.open("127.0.0.1:0")
    try:
        _, stalled = await asyncio.open_connection("127.0.0.1", endpoint.port)
        stalled.write(b"GET /metrics HTTP/1.1\r\n")  # and never the blank line
        await stalled.drain()
        answer = await exchange(endpoint.port, b"GET /metrics HTTP/1.1\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200 ")
        stalled.close()
    finally:
        await endpoint.close()


async def test_a_taken_port_is_refused_naming_the_setting() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(ConfigError, match=r"^metrics_address: cannot listen on 127\.0\.0\.1:\d+"):
            await MetricsEndpoint(build_metrics(address, {})).open(address)
