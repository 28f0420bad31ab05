"""The access log: one JSON line per RPC on stderr. It is the hottest log line in the
service, so it bypasses `logging` (record objects, handler locks, a flush per line): the
line is formatted by hand and a background thread writes whatever has queued up."""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
from typing import Protocol, TextIO

_STOP = ""


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
        self._lines: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._write_forever, name="episodic-access-log", daemon=True)
        self._thread.start()

    def record(self, method: str, code: str, duration_ms: float, peer: str, trace_id: str = "") -> None:
        """`trace_id` is hex (from OpenTelemetry), so it needs no JSON escaping."""
        now = time.time()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}+00:00"
        self._lines.put(
            f'{{"time": "{stamp}", "level": "INFO", "logger": "episodic.access", "message": "rpc", '
            f'"rpc_method": {json.dumps(method)}, "grpc_code": "{code}", '
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
