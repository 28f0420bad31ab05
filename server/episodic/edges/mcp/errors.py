"""Every failure of a tool call becomes one MCP tool error (an `isError` result the model
can read and correct), never a crash: Episodic's errors by the one table of codes
(`episodic.api.status`), argument-schema failures as INVALID_ARGUMENT naming the argument,
anything else as INTERNAL without its text (it stays in the server's log, as types only)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from types import MappingProxyType

from mcp.types import CallToolResult, TextContent
from pydantic import ValidationError

from episodic.edges.grpc.status import retry_delay_for, status_code_for
from episodic.errors import EpisodicError, FieldViolation, InvalidArgument
from episodic.logs import describe_exception

log = logging.getLogger("episodic.mcp")

INTERNAL = "INTERNAL"
NO_RENAMES: Mapping[str, str] = MappingProxyType({})
_NOTHING_MORE: Mapping[str, object] = MappingProxyType({})


def invalid_arguments(error: ValidationError) -> InvalidArgument:
    """Pydantic's findings as field violations: where and what, never the rejected value."""
    violations = [
        FieldViolation(_location(detail["loc"]) or "arguments", _problem(detail["type"], detail["msg"]))
        for detail in error.errors(include_url=False, include_input=False, include_context=False)
    ]
    return InvalidArgument(violations)


def _location(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _problem(kind: str, message: str) -> str:
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not an argument of this tool"
    return message[:1].lower() + message[1:]


def tool_error(error: Exception, renames: Mapping[str, str] = NO_RENAMES) -> CallToolResult:
    """`renames` maps the service's field names (proto paths such as `message.content`) to
    the tool's argument names, by prefix."""
    if not isinstance(error, EpisodicError):
        log.error("unexpected error in an MCP tool call", extra=describe_exception(error))
        return _result(INTERNAL, "INTERNAL", "internal error; see the server's log")
    code = status_code_for(error).name
    body: dict[str, object] = {}
    message = error.message
    if isinstance(error, InvalidArgument):
        violations = [
            FieldViolation(_renamed(v.field, renames), _reworded(v.description, renames))
            for v in error.violations
        ]
        body["fields"] = [{"field": v.field, "description": v.description} for v in violations]
        message = "invalid arguments: " + "; ".join(f"{v.field}: {v.description}" for v in violations)
    delay = retry_delay_for(error)
    if delay is not None:
        body["retry_after_seconds"] = round(delay, 3)
        message += f" (retry in {delay:.3g} s)"
    return _result(code, error.reason, message, body)


def _renamed(field: str, renames: Mapping[str, str]) -> str:
    for prefix, name in renames.items():
        if field == prefix or field.startswith(prefix + ".") or field.startswith(prefix + "["):
            rest = field[len(prefix) :].lstrip(".")
            return f"{name}.{rest}" if name and rest else (name or rest or field)
    return field


def _reworded(description: str, renames: Mapping[str, str]) -> str:
    """A description that names another field ("... when append_user_message is set")."""
    for name, renamed in renames.items():
        if renamed and name.isidentifier():
            description = re.sub(rf"\b{name}\b", renamed, description)
    return description


def _result(
    code: str, reason: str, message: str, extra: Mapping[str, object] = _NOTHING_MORE
) -> CallToolResult:
    error = {"code": code, "reason": reason, "message": message, **extra}
    return CallToolResult(
        content=[TextContent(type="text", text=f"{code}: {message}")],
        structured_content={"error": error},
        is_error=True,
    )


def as_text(data: Mapping[str, object]) -> str:
    return json.dumps(data, ensure_ascii=False, default=str)
