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

from episodic.store.database import DRIVER_FAULTS, asyncpg_connect_args

log = logging.getLogger(__name__)
Callback = Callable[[str], None]
MAX_PAYLOAD = 7000  # PostgreSQL refuses payloads of 8,000 bytes or more
RECONNECT_SECONDS = (0.2, 0.5, 1.0, 2.0, 5.0)
QUEUED_NOTIFIES = 10_000  # beyond this, new ones are dropped: listeners poll anyway
CONNECT_SECONDS = 10.0


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
        self._connect_args = asyncpg_connect_args(url)
        self._subscribers: dict[str, list[Callback]] = {}
        self._outbox: asyncio.Queue[tuple[str, str]] = asyncio.Queue(QUEUED_NOTIFIES)
        self._task: asyncio.Task[None] | None = None
        self.reconnects = 0  # connections made after the first: listeners use it to re-poll
        self.refused = 0  # connection attempts that failed (no server, or none in the wanted role)

    def subscribe(self, channel: str, callback: Callback) -> None:
        if self._task is not None:
            raise RuntimeError("subscribe before start(): channels are LISTENed on connect")
        self._subscribers.setdefault(channel, []).append(callback)

    def notify(self, channel: str, payload: str) -> None:
        if len(payload.encode()) > MAX_PAYLOAD:
            raise ValueError(f"notification payload over {MAX_PAYLOAD} bytes")
        with contextlib.suppress(asyncio.QueueFull):
            self._outbox.put_nowait((channel, payload))

    @property
    def running(self) -> bool:
        """The connection's keeper is alive (it ends only when stopped)."""
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="episodic-signals")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        """Never ends until cancelled: whatever ends a connection, another is made, after a
        back-off while the database refuses."""
        failures = 0
        while True:
            conn = await self._connect()
            if conn is None:
                self.refused += 1
                await asyncio.sleep(RECONNECT_SECONDS[min(failures, len(RECONNECT_SECONDS) - 1)])
                failures += 1
                continue
            try:
                await self._serve(conn, first=failures == 0 and self.reconnects == 0)
            except DRIVER_FAULTS:
                # INFO: the database fault itself is logged once, by the store's health
                log.info("signal connection lost; reconnecting")
            except Exception:  # a bug must not end wake-ups for good: log it, reconnect
                log.exception("signal connection failed; reconnecting")
            finally:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(conn.close(), 2)
            failures = 0
            self.reconnects += 1
            await asyncio.sleep(RECONNECT_SECONDS[0])

    async def _connect(self) -> Any:
        """A connection to a server the URL's rules accept, or None (logged at DEBUG: an
        outage is reported by the store's health; a bug in the URL by the pool's start)."""
        try:
            return await asyncpg.connect(**self._connect_args, timeout=CONNECT_SECONDS)
        except DRIVER_FAULTS as exc:
            log.debug("signal connection refused", extra={"error_type": type(exc).__name__})
        except Exception:
            log.exception("signal connection failed")
        return None

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
