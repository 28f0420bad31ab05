"""The `Leadership` port on PostgreSQL: once-per-cluster jobs are led by whichever replica
holds a session-level advisory lock per job.

One dedicated asyncpg connection per process (outside the pool, so a lock never pins a
pooled connection, and a pool recycling its connections never drops a lock). The lock
lives as long as that session: PostgreSQL frees it when the holder's process dies or its
connection is lost (TCP keepalives below bound how long a vanished host keeps it), and
another replica takes it at its next tick. No wall clock is consulted, so replicas whose
clocks disagree cannot both lead. A holder that loses its connection stops leading at
once and competes again after reconnecting. The jobs are idempotent, so the brief overlap
a network partition can cause (the old holder mid-sweep) costs duplicate work, never data.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Any

import asyncpg
from sqlalchemy.engine import URL

from episodic.store.database import DRIVER_FAULTS, asyncpg_connect_args

log = logging.getLogger(__name__)
CONNECT_SECONDS = 5.0
QUERY_SECONDS = 5.0  # a check that hangs (half-open connection) counts as lost
# Server side: a holder whose host vanished without closing its socket is dropped (and its
# locks freed) after about idle + interval * count seconds, not after the kernel's 2 hours.
KEEPALIVES = {"tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "3"}


def lock_key(job: str) -> int:
    """A stable signed 64-bit advisory-lock key per job (the same in every replica and
    release; Python's hash() is salted per process)."""
    digest = hashlib.sha256(f"episodic:{job}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class PgLeadership:
    """Advisory locks on one dedicated connection, (re)connected on demand by `holds`."""

    def __init__(self, url: URL) -> None:
        self._connect_args = asyncpg_connect_args(url)
        self._conn: Any = None
        self._held: set[str] = set()
        self._guard = asyncio.Lock()  # one query at a time on the connection

    @property
    def held(self) -> frozenset[str]:
        """The jobs this replica leads, as of its last check."""
        return frozenset(self._held)

    async def holds(self, job: str) -> bool:
        async with self._guard:
            try:
                return await self._holds(job)
            except DRIVER_FAULTS:
                await self._lost()
                return False

    async def close(self) -> None:
        """Ends the session, which frees every lock: another replica leads from its next tick."""
        async with self._guard:
            await self._drop_connection()
            if self._held:
                log.info("gave up leading", extra={"jobs": sorted(self._held)})
            self._held.clear()

    async def _holds(self, job: str) -> bool:
        conn = await self._connection()
        if job in self._held:
            await asyncio.wait_for(conn.fetchval("SELECT 1"), QUERY_SECONDS)  # still our session
            return True
        took = await asyncio.wait_for(
            conn.fetchval("SELECT pg_try_advisory_lock($1)", lock_key(job)), QUERY_SECONDS
        )
        if took:
            self._held.add(job)
            log.info("leading a cluster job", extra={"job": job})
        return bool(took)

    async def _connection(self) -> Any:
        if self._conn is None or self._conn.is_closed():
            if self._conn is not None:  # closed under us: its session, and locks, are gone
                await self._lost()
            self._conn = await asyncpg.connect(
                **self._connect_args, timeout=CONNECT_SECONDS, server_settings=KEEPALIVES
            )
        return self._conn

    async def _lost(self) -> None:
        if self._held:  # info: an outage is reported once, by the store's health
            log.info("lost the lead: leadership connection lost", extra={"jobs": sorted(self._held)})
        self._held.clear()
        await self._drop_connection()

    async def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            await asyncio.wait_for(conn.close(), 2)
        except DRIVER_FAULTS:
            conn.terminate()
