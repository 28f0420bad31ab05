"""Logs on stderr, with any `extra` fields: one JSON object per line, or, when stderr is a
terminal, one readable line (`12:04:31.207 INFO  episodic.server  serving  port=50051 ...`).
Containers, CI and anything reading a pipe or a file get JSON. A progress bar on the same
terminal (episodic.progress) steps aside for each line.

Our loggers (`episodic.*`) log at the configured level; every other library's only from
WARNING up (or the configured level, if higher): their INFO chatter (the ONNX quantizer,
migrations' steps) says nothing an operator acts on."""

from __future__ import annotations

import json
import logging
import sys
import traceback
from datetime import UTC, datetime
from typing import TextIO

from episodic import progress

OUR_LOGGERS = "episodic"
THIRD_PARTY_FLOOR = logging.WARNING

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(extra_fields(record))
        if record.exc_info and record.exc_info[1] is not None:
            entry.update(describe_exception(record.exc_info[1]))
        return json.dumps(entry, default=str)


def extra_fields(record: logging.LogRecord) -> dict[str, object]:
    """The `extra` fields of a record (what is not a standard LogRecord attribute)."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD}


class HumanFormatter(logging.Formatter):
    """One line for a person at a terminal: local time, level, logger, message, then the
    `extra` fields as key=value; an exception as its types and frames (never its message,
    as in JSON), one frame a line."""

    def format(self, record: logging.LogRecord) -> str:
        moment = datetime.fromtimestamp(record.created).strftime("%H:%M:%S.%f")[:-3]
        fields = extra_fields(record)
        if record.exc_info and record.exc_info[1] is not None:
            fields.update(describe_exception(record.exc_info[1]))
        stack = fields.pop("stack", None)
        line = f"{moment} {record.levelname:<5} {record.name}  {record.getMessage()}"
        if fields:
            line += "  " + " ".join(f"{key}={_readable(value)}" for key, value in fields.items())
        if isinstance(stack, list):
            line += "".join(f"\n    at {frame}" for frame in stack)
        return line


def _readable(value: object) -> str:
    """Bare when unambiguous (no space, quote or =), else quoted as JSON."""
    if isinstance(value, str):
        bare = value and not any(c.isspace() or c in "\"'=" for c in value)
        return value if bare else json.dumps(value, ensure_ascii=False)
    return json.dumps(value, default=str, ensure_ascii=False)


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


def configure_logging(level: str, *, stream: TextIO | None = None, human: bool | None = None) -> None:
    """Every record to `stream` (default stderr): readable lines when `human`, JSON when not,
    and when `human` is None, readable exactly when the stream is a terminal. `episodic.*` at
    `level`, other libraries from WARNING up (or `level`, if higher)."""
    target = stream if stream is not None else sys.stderr
    handler = JsonLineHandler(target)
    readable = is_terminal(target) if human is None else human
    handler.setFormatter(HumanFormatter() if readable else JsonFormatter())
    wanted = logging.getLevelNamesMapping()[level.upper()]
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(max(wanted, THIRD_PARTY_FLOOR))
    logging.getLogger(OUR_LOGGERS).setLevel(wanted)


def is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or detached stream
        return False
