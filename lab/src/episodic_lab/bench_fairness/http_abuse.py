"""Tenant A against the inspector's HTTP listener: "where did it go?" searches over a long
episode, 8 in flight (inspector-searches), and 1,100 slowloris sockets that send a request
line and headers one byte every few seconds and never finish (slowloris)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from contextlib import suppress
from urllib.parse import quote

from episodic_lab.bench_fairness.hammer import STOP_GRACE_SECONDS
from episodic_lab.bench_fairness.plan import Plan, Tally

HOST = "127.0.0.1"
SEARCHES_IN_FLIGHT = 8
SEARCH_TIMEOUT_SECONDS = 60.0
REFUSED = (429, 503)  # the inspector's "retry in a few seconds" and a listener at its cap
SLOW_SOCKETS = 1_100
SLOW_OPEN_BATCH = 100  # connects at once: a burst past the listen backlog would be dropped
SLOW_BYTE_EVERY_SECONDS = 3.0
# Never completes: the header value goes on for as long as the phase lasts.
SLOW_REQUEST = b"GET /api/session HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 10_000


async def inspector_searches(plan: Plan, started: Callable[[], None]) -> Tally:
    tally, deadline = Tally(), time.monotonic() + plan.seconds
    path = f"/api/episodes/{plan.where_episode}/where?phrase={quote(plan.where_phrase)}"
    started()
    workers = [asyncio.create_task(_searcher(plan, path, deadline, tally)) for _ in range(SEARCHES_IN_FLIGHT)]
    _finished, pending = await asyncio.wait(workers, timeout=plan.seconds + STOP_GRACE_SECONDS)
    for task in pending:
        task.cancel()
    await asyncio.gather(*workers, return_exceptions=True)
    return tally


async def _searcher(plan: Plan, path: str, deadline: float, tally: Tally) -> None:
    while time.monotonic() < deadline:
        try:
            status, retry_after = await asyncio.wait_for(_get(plan, path), SEARCH_TIMEOUT_SECONDS)
        except (OSError, TimeoutError, ValueError) as exc:
            tally.error(f"{type(exc).__name__}: {exc}")
            continue
        if status == 200:
            tally.done += 1
        elif status in REFUSED:
            tally.refused += 1
            if plan.honour_retry and retry_after > 0:
                await asyncio.sleep(min(retry_after, max(0.0, deadline - time.monotonic())))
        else:
            tally.error(f"HTTP {status}")


async def _get(plan: Plan, path: str) -> tuple[int, float]:
    """One GET on a connection of its own; the status and Retry-After (0 if none)."""
    reader, writer = await asyncio.open_connection(HOST, plan.inspector_port)
    try:
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nAuthorization: Bearer {plan.api_key}\r\n"
            "Connection: close\r\n\r\n"
        )
        writer.write(request.encode())
        await writer.drain()
        head, _separator, _body = (await reader.read(-1)).partition(b"\r\n\r\n")
    finally:
        writer.close()
        with suppress(OSError):
            await writer.wait_closed()
    lines = head.decode("latin-1").split("\r\n")
    return int(lines[0].split()[1]), _retry_after(lines[1:])


def _retry_after(header_lines: list[str]) -> float:
    for line in header_lines:
        name, _colon, value = line.partition(":")
        if name.strip().lower() == "retry-after" and value.strip().isdigit():
            return float(value.strip())
    return 0.0


async def slowloris(plan: Plan, started: Callable[[], None]) -> Tally:
    """done: sockets still open at the end; refused: sockets the server closed (answered or
    not); errors: connects that failed."""
    tally, deadline = Tally(), time.monotonic() + plan.seconds
    started()
    answered: list[int] = []
    tasks: list[asyncio.Task[bool]] = []
    for start in range(0, SLOW_SOCKETS, SLOW_OPEN_BATCH):
        batch = [
            _drip(plan.inspector_port, deadline, tally, answered)
            for _ in range(min(SLOW_OPEN_BATCH, SLOW_SOCKETS - start))
        ]
        tasks += [asyncio.create_task(drip) for drip in batch]
        await asyncio.sleep(0.05)
    closed = await asyncio.gather(*tasks)
    tally.refused = sum(closed)
    tally.done = SLOW_SOCKETS - tally.refused - tally.errors
    tally.notes["sockets_closed_by_server"] = tally.refused
    tally.notes["answered_503"] = answered.count(503)
    tally.notes["answered_other"] = len(answered) - answered.count(503)
    return tally


async def _drip(port: int, deadline: float, tally: Tally, answered: list[int]) -> bool:
    """Sends the request a byte at a time until the deadline; True if the server closed."""
    try:
        reader, writer = await asyncio.open_connection(HOST, port)
    except OSError as exc:
        tally.error(f"connect: {exc}")
        return False
    try:
        return await _drip_until_closed(reader, writer, deadline, answered)
    finally:
        writer.close()
        with suppress(OSError):
            await writer.wait_closed()


async def _drip_until_closed(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, deadline: float, answered: list[int]
) -> bool:
    reading = asyncio.create_task(reader.read(4096))
    for byte in itertools.cycle(SLOW_REQUEST):
        try:
            writer.write(bytes([byte]))
            await writer.drain()
        except OSError:
            reading.cancel()
            return True
        wait = min(SLOW_BYTE_EVERY_SECONDS, deadline - time.monotonic())
        if wait <= 0:
            break
        done, _pending = await asyncio.wait([reading], timeout=wait)
        if done:
            _note_answer(reading, answered)
            return True
    reading.cancel()
    return False


def _note_answer(reading: asyncio.Task[bytes], answered: list[int]) -> None:
    """The status of what the server sent before closing, if anything."""
    with suppress(OSError, ValueError, IndexError, asyncio.CancelledError):
        first = reading.result().split(b"\r\n", 1)[0].split()
        if first:
            answered.append(int(first[1]))
