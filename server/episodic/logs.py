"""Structured logs: one JSON object per line on stderr, with any `extra` fields. A progress
bar on the same terminal (episodic.progress) steps aside for each line."""

from __future__ import annotations

import json
import logging
import sys
import traceback
from datetime import UTC, datetime
from typing import TextIO

from episodic import progress

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info and record.exc_info[1] is not None:
            entry.update(describe_exception(record.exc_info[1]))
        return json.dumps(entry, default=str)


def describe_exception(exc: BaseException) -> dict[str, object]:
    """Types and code locations only. Exception messages are never logged: a driver's
    message can quote SQL parameters, a validation message a piece of user content."""
    types: list[str] = []
    frames: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(types) < 8:
        types.append(f"{type(current).__module__}.{type(current).__qualname__}")
        current = current.__cause__ or current.__context__
    for frame in traceback.extract_tb(exc.__traceback__):
        frames.append(f"{frame.filename}:{frame.lineno} in {frame.name}")
    return {"error_type": " <- ".join(types), "stack": frames}


class JsonLineHandler(logging.StreamHandler[TextIO]):
    """Writes each record on a line of its own, never inside a progress bar's line."""

    def emit(self, record: logging.LogRecord) -> None:
        with progress.suspended():
            super().emit(record)


def configure_logging(level: str) -> None:
    handler = JsonLineHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
