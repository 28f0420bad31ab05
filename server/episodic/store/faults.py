"""Database faults as errors of our tree, and the store's health.

Infrastructure failures (the database cannot be reached, the connection dropped, the pool
is exhausted, the disk is full) are not bugs: callers get UNAVAILABLE or RESOURCE_EXHAUSTED
with a retry hint, not INTERNAL. `classify` is the one table from driver exceptions to our
errors; `StoreHealth` remembers whether the database currently answers, logs one line per
change (never per call) and probes until it answers again, so health recovers without
traffic.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL

from episodic.errors import EpisodicError, ResourceExhausted, Unavailable
from episodic.store.pg_url import servers_of

log = logging.getLogger("episodic.store")

# SQLite result codes (sqlite3.Error.sqlite_errorname) and PostgreSQL SQLSTATEs.
_SQLITE_FULL = frozenset({"SQLITE_FULL"})
_SQLITE_UNAVAILABLE_PREFIXES = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_CANTOPEN", "SQLITE_IOERR")
_PG_FULL = frozenset({"53100"})  # disk_full
_PG_UNAVAILABLE_PREFIXES = ("08", "57P", "53", "3D000")  # connection, shutdown, resources, no database
# read_only_sql_transaction: the server is a standby (or was demoted), so it refuses writes
# ("cannot execute INSERT in a read-only transaction", "cannot execute NOTIFY during
# recovery"): the primary is elsewhere or not promoted yet.
_PG_WRONG_ROLE = frozenset({"25006"})
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_PG_LOCK_CONFLICTS = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure
# query_canceled (statement_timeout), lock_not_available (lock_timeout): the server gave up
# on a statement in time; the caller may retry, but the database does answer.
_PG_TIMED_OUT = frozenset({"57014", "55P03"})


class Fault(Enum):
    UNAVAILABLE = "unavailable"
    STORAGE_FULL = "storage_full"


def classify(exc: BaseException) -> Fault | None:
    """What kind of outage `exc` (or an exception it was raised from) is; None for
    anything else (a bug, a constraint violation), which callers handle as before."""
    for cause in _chain(exc):
        fault = _fault_of(cause)
        if fault is not None:
            return fault
    return None


def is_lock_conflict(exc: BaseException) -> bool:
    """PostgreSQL chose this transaction as a deadlock's victim (or could not serialize it):
    nothing was written, and running it again succeeds once the other one has committed.
    Replicas whose batches mix appends and model calls can meet like this."""
    return any(getattr(cause, "sqlstate", None) in _PG_LOCK_CONFLICTS for cause in _chain(exc))


def is_wrong_role(exc: BaseException) -> bool:
    """A standby refused a write (read_only_sql_transaction): the primary is elsewhere."""
    return any(getattr(cause, "sqlstate", None) in _PG_WRONG_ROLE for cause in _chain(exc))


def answered_in_time(exc: BaseException) -> bool:
    """The server itself ended the statement at its statement or lock timeout: UNAVAILABLE
    for this call, but no outage (health stays as it is)."""
    return any(getattr(cause, "sqlstate", None) in _PG_TIMED_OUT for cause in _chain(exc))


def no_answer(exc: BaseException) -> bool:
    """The client gave up waiting (a statement past its timeout, a connect that never
    completed): the database is hung or unreachable, not refusing."""
    return any(isinstance(cause, TimeoutError) for cause in _chain(exc))


def as_error(fault: Fault) -> EpisodicError:
    """The error a caller sees. The message is ours: driver messages can carry SQL
    parameters, so they are never passed on."""
    if fault is Fault.STORAGE_FULL:
        return ResourceExhausted(
            "the database's storage is full; retry after an operator frees space", reason="STORAGE_FULL"
        )
    return Unavailable("the database is unavailable; retry shortly", reason="DATABASE_UNAVAILABLE")


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 16:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _fault_of(exc: BaseException) -> Fault | None:
    if isinstance(exc, sqlite3.Error):
        return _sqlite_fault(getattr(exc, "sqlite_errorname", ""))
    sqlstate = getattr(exc, "sqlstate", None)
    if isinstance(sqlstate, str):
        return _pg_fault(sqlstate)
    if isinstance(exc, OSError):
        return Fault.STORAGE_FULL if exc.errno in _FULL_ERRNOS else Fault.UNAVAILABLE
    if isinstance(exc, sa_exc.TimeoutError | sa_exc.DisconnectionError | sa_exc.InterfaceError):
        return Fault.UNAVAILABLE
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return Fault.UNAVAILABLE
    return _asyncpg_fault(exc)


def _sqlite_fault(name: str) -> Fault | None:
    if name in _SQLITE_FULL:
        return Fault.STORAGE_FULL
    return Fault.UNAVAILABLE if name.startswith(_SQLITE_UNAVAILABLE_PREFIXES) else None


def _pg_fault(sqlstate: str) -> Fault | None:
    if sqlstate in _PG_FULL:
        return Fault.STORAGE_FULL
    if sqlstate in _PG_TIMED_OUT or sqlstate in _PG_WRONG_ROLE:
        return Fault.UNAVAILABLE
    return Fault.UNAVAILABLE if sqlstate.startswith(_PG_UNAVAILABLE_PREFIXES) else None


def _asyncpg_fault(exc: BaseException) -> Fault | None:
    """asyncpg's client-side errors (a closed or lost connection; no server of the URL in
    the role target_session_attrs asks for, as between a primary's loss and a standby's
    promotion) carry no SQLSTATE."""
    module = type(exc).__module__
    if module.startswith("asyncpg") and type(exc).__name__ in {
        "ConnectionDoesNotExistError",
        "InterfaceError",
        "InternalClientError",
        "TargetServerAttributeNotMatched",
    }:
        return Fault.UNAVAILABLE
    return None


Probe = Callable[[Fault], Awaitable[None]]
_FAULT = "database fault: calls answer %s until it clears"
_HUNG = "database hung (no answer in time): calls answer %s until it answers"


@dataclass(slots=True)
class StoreHealth:
    """Whether the database answers. Stores report every call's outcome here; while a
    fault is set a probe runs every `probe_seconds` until the database answers, then the
    fault clears. Listeners hear each change once (the gRPC health service follows)."""

    probe_seconds: float = 1.0
    fault: Fault | None = None
    _probe: Probe | None = None
    _since: float = 0.0
    _recovered: float = 0.0  # when the last fault cleared (time.monotonic())
    _wrong_role: bool = False  # a standby refused a write: its answers to reads clear nothing
    _listeners: list[Callable[[bool], None]] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    @property
    def healthy(self) -> bool:
        return self.fault is None

    def set_probe(self, probe: Probe) -> None:
        self._probe = probe

    def listen(self, listener: Callable[[bool], None]) -> None:
        self._listeners.append(listener)

    def failed(self, fault: Fault, exc: BaseException, *, started: float | None = None) -> None:
        """`started`: when the failed call began. One that began before the database last
        answered again is stale (a statement sent while it hung, timing out just after): it
        says nothing of now."""
        if started is not None and started < self._recovered:
            return
        self._wrong_role = self._wrong_role or is_wrong_role(exc)
        if self.fault is fault:
            return
        was_healthy, self.fault, self._since = self.fault is None, fault, time.monotonic()
        log.warning(
            _HUNG if no_answer(exc) else _FAULT,
            "RESOURCE_EXHAUSTED" if fault is Fault.STORAGE_FULL else "UNAVAILABLE",
            extra={"fault": fault.value, "error_type": _type_name(exc)},
        )
        if was_healthy:
            self._tell(False)
        self._start_probing()

    def succeeded(self, *, wrote: bool) -> None:
        """A read clears only an outage; storage stays full, and a standby reached in the
        primary's place stays read-only, until a write succeeds."""
        if self.fault is None or (not wrote and (self.fault is Fault.STORAGE_FULL or self._wrong_role)):
            return
        self._recovered, self._wrong_role = time.monotonic(), False
        down = self._recovered - self._since
        self.fault = None
        log.info("database answers again", extra={"down_seconds": round(down, 3)})
        self._tell(True)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _tell(self, healthy: bool) -> None:
        for listener in self._listeners:
            listener(healthy)

    def _start_probing(self) -> None:
        if self._probe is None or (self._task is not None and not self._task.done()):
            return
        self._task = asyncio.get_running_loop().create_task(self._probe_until_clear(self._probe))

    async def _probe_until_clear(self, probe: Probe) -> None:
        while self.fault is not None:
            await asyncio.sleep(self.probe_seconds)
            fault = self.fault
            if fault is None:
                return
            try:
                await probe(fault)
            except Exception as exc:  # still down: the change was logged once already
                log.debug("database probe failed", extra={"error_type": _type_name(exc)})
                continue
            self.succeeded(wrote=True)


def _type_name(exc: BaseException) -> str:
    return f"{type(exc).__module__}.{type(exc).__qualname__}"


def startup_failure(exc: BaseException, url: URL) -> str | None:
    """One line for an operator whose server cannot open its database: what is wrong and
    what to do. None when `exc` is not a failure to reach or open the database."""
    where = _where(url)
    for cause in _chain(exc):
        message = _startup_line(cause, url, where)
        if message is not None:
            return message
    return None


def _startup_line(exc: BaseException, url: URL, where: str) -> str | None:
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate == "3D000":
        return (
            f'database "{url.database}" does not exist on {where}: create it '
            f"(e.g. createdb {url.database}) or fix database_url"
        )
    if isinstance(sqlstate, str) and sqlstate.startswith("28"):
        return (
            f"the database at {where} refused user {url.username!r}: check database_url's user and password"
        )
    if type(exc).__name__ == "TargetServerAttributeNotMatched":
        wanted = url.query.get("target_session_attrs", "any")
        return (
            f"no server at {where} is {wanted} (target_session_attrs): is the primary lost "
            "with no standby promoted yet? promote one, or fix database_url"
        )
    if isinstance(sqlstate, str) and sqlstate in _PG_WRONG_ROLE:
        return (
            f"the database at {where} is a standby (read-only): point database_url at the primary, "
            "or name every server with target_session_attrs=read-write"
        )
    if isinstance(exc, sqlite3.Error) and getattr(exc, "sqlite_errorname", "") == "SQLITE_CANTOPEN":
        return _sqlite_cannot_open(url)
    if isinstance(exc, ConnectionRefusedError):
        return (
            f"cannot connect to the database at {where}: connection refused; "
            "is it running, and is database_url right?"
        )
    if isinstance(exc, TimeoutError):
        return f"cannot connect to the database at {where}: timed out; is the host reachable?"
    if isinstance(exc, OSError):
        reason = exc.strerror or type(exc).__name__
        return f"cannot connect to the database at {where}: {reason}; check database_url"
    return None


def _sqlite_cannot_open(url: URL) -> str:
    path = Path(url.database or "")
    if not path.parent.is_dir():
        return (
            f"cannot open the SQLite database {path}: the directory {path.parent} does not exist; "
            "create it or fix database_url"
        )
    return f"cannot open the SQLite database {path}: check that {path.parent} is writable by this user"


def sqlite_path_problem(url: URL) -> str | None:
    """Checked before the first connection: aiosqlite's failed connect leaves a thread
    that outlives the event loop and prints its own traceback."""
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    path = Path(url.database or "")
    if path.exists() or (path.parent.is_dir() and os.access(path.parent, os.W_OK)):
        return None
    return _sqlite_cannot_open(url)


def _where(url: URL) -> str:
    if url.get_backend_name() == "sqlite":
        return str(url.database)
    return servers_of(url)
