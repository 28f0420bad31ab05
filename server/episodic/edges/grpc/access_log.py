"""The access log: one JSON line per RPC on stderr. It is the hottest log line in the
service, so it bypasses `logging` (record objects, handler locks, a flush per line): the
line is formatted by hand and a background thread writes whatever has queued up.

Each line has a level: DEBUG for health checks and reflection (load balancers probe every
few seconds; written only when the `episodic.access` logger is enabled for DEBUG, i.e.
`--log-level DEBUG`), WARNING for a status the server is at fault for (INTERNAL, UNKNOWN,
DATA_LOSS), INFO for the rest: a caller's NOT_FOUND or ALREADY_EXISTS is an answer, not a
failure of the server, and UNAVAILABLE is what every call of an outage answers (the outage
itself is one WARNING of its own, not one a call). A failed call's line carries its ErrorInfo `reason`
(`EPISODE_NOT_FOUND`, `MEMORY_ID_CONFLICT`, ...: a constant of the error table, never the
message, which may quote what the caller sent)."""

from __future__ import annotations

import json
import logging
import queue
import re
import sys
import threading
import time
from typing import Protocol, TextIO

_STOP = ""
LOGGER = "episodic.access"
QUIET_METHOD_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")
SERVER_FAULTS = frozenset({"INTERNAL", "UNKNOWN", "DATA_LOSS"})
_REASON = re.compile(r"[A-Z][A-Z0-9_]{0,63}")  # errors.py: reasons are UPPER_SNAKE_CASE


class StatusName(str):
    """A status code's name, as `AccessLog.record` takes it, carrying the ErrorInfo reason of
    a failed call (empty when there is none, or it is not an UPPER_SNAKE_CASE constant).
    The reason rides on the name so that wrappers of the log (RPC metrics) pass it through
    unchanged; to them it is the plain name."""

    reason: str

    def __new__(cls, name: str, reason: str = "") -> StatusName:
        made = super().__new__(cls, name)
        made.reason = reason if _REASON.fullmatch(reason) else ""
        return made


def level_of(method: str, code: str) -> str:
    """The line's level (see the module doc)."""
    if code in SERVER_FAULTS:
        return "WARNING"
    return "DEBUG" if method.startswith(QUIET_METHOD_PREFIXES) else "INFO"


class AccessLog(Protocol):
    def record(self, method: str, code: str, duration_ms: float, peer: str, trace_id: str = "") -> None: ...

    def close(self) -> None: ...


class NoAccessLog:
    def record(self, method: str, code: str, duration_ms: float, peer: str, trace_id: str = "") -> None:
        return None

    def close(self) -> None:
        return None


class JsonLinesAccessLog:
    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stderr
        self._logger = logging.getLogger(LOGGER)  # only its level is read: is DEBUG on?
        self._lines: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._write_forever, name="episodic-access-log", daemon=True)
        self._thread.start()

    def record(self, method: str, code: str, duration_ms: float, peer: str, trace_id: str = "") -> None:
        """`trace_id` is hex (from OpenTelemetry) and a reason UPPER_SNAKE_CASE, so neither
        needs JSON escaping. `code` may be a `StatusName`, carrying the reason."""
        level = level_of(method, code)
        if level == "DEBUG" and not self._logger.isEnabledFor(logging.DEBUG):
            return
        reason = code.reason if isinstance(code, StatusName) else ""
        now = time.time()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}+00:00"
        self._lines.put(
            f'{{"time": "{stamp}", "level": "{level}", "logger": "{LOGGER}", "message": "rpc", '
            f'"rpc_method": {json.dumps(method)}, "grpc_code": "{code}", "reason": "{reason}", '
            f'"duration_ms": {duration_ms:.3f}, "peer": {json.dumps(peer)}, "trace_id": "{trace_id}"}}\n'
        )

    def close(self) -> None:
        self._lines.put(_STOP)
        self._thread.join(timeout=5)

    def _write_forever(self) -> None:
        while True:
            lines = [self._lines.get()]
            while not self._lines.empty():
                lines.append(self._lines.get_nowait())
            stop = _STOP in lines
            self._stream.write("".join(line for line in lines if line))
            self._stream.flush()
            if stop:
                return
