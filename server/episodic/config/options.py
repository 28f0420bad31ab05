"""The options framework: a setting declared once, as a field made by `setting(...)` (its
default and type, its help, the commands that take it as a flag, the check its value must
pass), and what turns text into values (parsers) and refuses values that cannot be used
(checks). Its environment variable (EPISODIC_<NAME>) and flag (--<name>) follow from its
name. Which settings there are is `episodic.config.settings`'s."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from episodic.domain.model import PiiPolicy

# Which subcommands take a setting as a flag: `episodic <command> --help` lists only its own.
# The environment is read whole either way; a variable a command does not use is ignored.
ENGINE = frozenset({"serve", "mcp", "reindex"})  # what the memory engine needs, served or not
BACKUP = frozenset({"backup", "restore"})  # the operator's copies of a SQLite database
DATABASE = ENGINE | {"migrate", "model-call"} | BACKUP  # every command that opens the database
CALLERS = frozenset({"serve", "mcp"})  # who may call and how callers are held back
GRPC = frozenset({"serve"})  # the gRPC listener itself
MCP = frozenset({"mcp"})

T = TypeVar("T")
E = TypeVar("E", bound=enum.Enum)


class ConfigError(ValueError):
    """A setting has a value that cannot be used; the message names it."""


# --- parsers: the text of a variable or flag -> the setting's value (ValueError says why) ---


def parse_bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"not a boolean: {raw!r}")


def choice(*allowed: E) -> Callable[[str], E]:
    """One of `allowed`, named by its value in any case; nothing else (not even spaces)."""

    def parse(raw: str) -> E:
        for value in allowed:
            if raw.casefold() == str(value.value).casefold():
                return value
        raise ValueError(f"{raw!r} is not one of {', '.join(str(v.value) for v in allowed)}")

    return parse


def _integer(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{raw!r} is not a whole number") from None


def _number(raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{raw!r} is not a number") from None


def _parser_for(default: object) -> Callable[[str], Any]:
    if isinstance(default, bool):
        return parse_bool
    if isinstance(default, enum.Enum):
        return choice(*type(default))
    if isinstance(default, int):
        return _integer
    if isinstance(default, float):
        return _number
    return str


# --- checks: a value that parses but cannot be used (ValueError says why) ---


def at_least(low: float) -> Callable[[float], None]:
    def check(value: float) -> None:
        if not value >= low:  # also refuses NaN
            raise ValueError(f"must be at least {low}")

    return check


def more_than_zero(smallest: float = 0.0) -> Callable[[float], None]:
    """More than 0, and at least `smallest`: durations that become whole milliseconds for gRPC
    (where 0 would mean no limit) pass 0.001."""

    def check(value: float) -> None:
        if not (value > 0 and value >= smallest):  # also refuses NaN
            raise ValueError("must be more than 0")

    return check


def host_port(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"want HOST:PORT, got {address!r}")
    if int(port) > 65535:
        raise ValueError(f"port {port} is out of range (0-65535; 0 picks a free port)")
    return host.strip("[]"), int(port)


def check_address(value: str) -> None:
    host_port(value)


def check_optional_address(value: str) -> None:
    if value:
        host_port(value)


def check_trace_url(template: str) -> None:
    if template and (not template.startswith(("http://", "https://")) or "{trace_id}" not in template):
        raise ValueError(
            "want an http(s) URL containing {trace_id}, e.g. http://localhost:16686/trace/{trace_id}"
        )


def per_tenant(raw: str, parse: Callable[[str], T]) -> dict[str, T]:
    """`tenant=value,tenant=value` -> {tenant: parse(value)}."""
    found: dict[str, T] = {}
    for entry in filter(None, (e.strip() for e in raw.split(","))):
        tenant, sep, value = entry.partition("=")
        if not sep or not tenant.strip():
            raise ValueError(f"{entry!r} is not tenant=value")
        found[tenant.strip()] = parse(value.strip())
    return found


def days(raw: str) -> int:
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{raw!r} is not a number of days, at least 1")
    return int(raw)


server_pii_policy = choice(PiiPolicy.OFF, PiiPolicy.REDACT)  # inherit is an agent's, not the server's


def check_tenant_days(raw: str) -> None:
    per_tenant(raw, days)


def check_tenant_pii_policies(raw: str) -> None:
    per_tenant(raw, server_pii_policy)


# --- the declaration ---

_OPTION = "episodic.option"  # the metadata key of a setting's Option


@dataclass(frozen=True, slots=True)
class Option:
    """A setting's outside names, default, parser and check: one per field of Settings."""

    name: str
    default: Any
    help: str
    commands: frozenset[str]
    parse: Callable[[str], Any]  # the text of its variable or flag -> its value
    check: Callable[[Any], None] | None  # its value -> ValueError if it cannot be used

    @property
    def env(self) -> str:
        return "EPISODIC_" + self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def kind(self) -> type:
        return type(self.default)

    def value(self, raw: str, source: str) -> Any:
        """`raw` parsed; ConfigError names `source` (the variable or flag)."""
        try:
            return self.parse(raw)
        except ValueError as exc:
            raise ConfigError(f"{source}: {exc}") from exc

    def checked(self, value: object) -> None:
        if self.check is None:
            return
        try:
            self.check(value)
        except ValueError as exc:
            raise ConfigError(f"{self.name}: {exc}") from exc


def setting(
    default: T,
    help: str,
    *,
    commands: frozenset[str] = ENGINE,
    check: Callable[[T], None] | None = None,
    parse: Callable[[str], T] | None = None,
) -> T:
    """A field of Settings that is also a setting; its name comes from the field's."""
    option = Option("", default, help, commands, parse or _parser_for(default), check)
    return dataclasses.field(default=default, metadata={_OPTION: option})


def options_of(settings: type) -> tuple[Option, ...]:
    """The Option of each field of the dataclass `settings` made by `setting`, named by it."""
    return tuple(
        dataclasses.replace(f.metadata[_OPTION], name=f.name)
        for f in dataclasses.fields(settings)
        if _OPTION in f.metadata
    )


def named(name: str, parse: Callable[..., T], *args: Any) -> T:
    """`parse(*args)`; a ValueError becomes a ConfigError naming setting `name`."""
    try:
        return parse(*args)
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from exc


def split_address(name: str, address: str) -> tuple[str, int]:
    """HOST:PORT of setting `name` as (host without IPv6 brackets, port); the one parser of
    every listening address."""
    return named(name, host_port, address)


def table_of(options: Sequence[Option]) -> str:
    """The Markdown table of `options`: flag, variable, default, meaning."""
    rows = ["| flag | environment | default | meaning |", "| --- | --- | --- | --- |"]
    for o in options:
        default = "off" if o.default is False else f"`{o.default}`" if o.default != "" else "(empty)"
        rows.append(f"| `{o.flag}` | `{o.env}` | {default} | {o.help} |")
    return "\n".join(rows) + "\n"
