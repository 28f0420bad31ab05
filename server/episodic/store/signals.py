"""The `Signals` port: wake-ups between replicas.

PostgreSQL: one dedicated asyncpg connection per process (outside the pool, so a LISTEN
never holds a pooled connection) that LISTENs on every subscribed channel and sends
NOTIFYs; it reconnects with back-off when the database goes away. A notification may be
lost (a reconnect, a crash between COMMIT and NOTIFY): listeners poll too, so a lost one
costs latency, never a change.
SQLite (one process): notifications go straight to this process's subscribers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import asyncpg
from sqlalchemy.engine import URL

from episodic.store.database import asyncpg_dsn

log = logging.getLogger(__name__)
Callback = Callable[[str], None]
MAX_PAYLOAD = 7000  # PostgreSQL refuses payloads of 8,000 bytes or more
RECONNECT_SECONDS = (0.2, 0.5, 1.0, 2.0, 5.0)
QUEUED_NOTIFIES = 10_000  # beyond this, new ones are dropped: listeners poll anyway


class LocalSignals:
    """In-process delivery, for the single-process SQLite deployment and for tests."""

    def __init__(self) -> None:
        self._subscribers: dict[str, list[Callback]] = {}

    def subscribe(self, channel: str, callback: Callback) -> None:
        self._subscribers.setdefault(channel, []).append(callback)

    def notify(self, channel: str, payload: str) -> None:
        for callback in list(self._subscribers.get(channel, ())):
            asyncio.get_running_loop().call_soon(callback, payload)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


class PgSignals:
    """LISTEN/NOTIFY on one dedicated connection, kept open by a background task."""

    def __init__(self, url: URL) -> None:
        self._dsn = asyncpg_dsn(url)
        self._subscribers: dict[str, list[Callback]] = {}
        self._outbox: asyncio.Queue[tuple[str, str]] = asyncio.Queue(QUEUED_NOTIFIES)
        self._task: asyncio.Task[None] | None = None
        self.reconnects = 0  # connections made after the first: listeners use it to re-poll

    def subscribe(self, channel: str, callback: Callback) -> None:
        if self._task is not None:
            raise RuntimeError("subscribe before start(): channels are LISTENed on connect")
        self._subscribers.setdefault(channel, []).append(callback)

    def notify(self, channel: str, payload: str) -> None:
        if len(payload.encode()) > MAX_PAYLOAD:
            raise ValueError(f"notification payload over {MAX_PAYLOAD} bytes")
        with contextlib.suppress(asyncio.QueueFull):
            self._outbox.put_nowait((channel, payload))

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="episodic-signals")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        attempt = 0
        while True:
            try:
                conn = await asyncpg.connect(self._dsn, timeout=10)
            except (OSError, asyncpg.PostgresError, TimeoutError):
                await asyncio.sleep(RECONNECT_SECONDS[min(attempt, len(RECONNECT_SECONDS) - 1)])
                attempt += 1
                continue
            try:
                await self._serve(conn, first=attempt == 0 and self.reconnects == 0)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
                # INFO: the database fault itself is logged once, by the store's health
                log.info("signal connection lost; reconnecting")
            finally:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(conn.close(), 2)
            attempt = 0
            self.reconnects += 1
            await asyncio.sleep(RECONNECT_SECONDS[0])

    async def _serve(self, conn: Any, *, first: bool) -> None:
        lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def on_lost(_conn: Any) -> None:
            if not lost.done():
                lost.set_result(None)

        conn.add_termination_listener(on_lost)
        for channel in self._subscribers:
            await conn.add_listener(channel, self._deliver)
        if not first:  # whatever was sent while we were away is lost: wake every listener
            for channel in self._subscribers:
                self._deliver(conn, 0, channel, "")
        while not lost.done():
            sending: asyncio.Future[tuple[str, str]] = asyncio.ensure_future(self._outbox.get())
            waiting: list[asyncio.Future[Any]] = [sending, lost]
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if not sending.done():
                sending.cancel()
                return
            channel, payload = sending.result()
            await conn.execute("SELECT pg_notify($1, $2)", channel, payload)

    def _deliver(self, _conn: Any, _pid: int, channel: str, payload: str) -> None:
        for callback in self._subscribers.get(channel, ()):
            try:
                callback(payload)
            except Exception:  # one listener's bug must not silence the others
                log.exception("signal listener failed", extra={"channel": channel})
