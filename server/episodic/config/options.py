"""The options framework: a setting declared once, as a field made by `setting(...)` (its
default and type, its help, the commands that take it as a flag, the check its value must
pass), and what turns text into values (parsers) and refuses values that cannot be used
(checks). Its environment variable (EPISODIC_<NAME>) and flag (--<name>) follow from its
name. Which settings there are is `episodic.config.settings`'s."""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from episodic.domain.model import PiiPolicy

# Which subcommands take a setting as a flag: `episodic <command> --help` lists only its own.
# The environment is read whole either way; a variable a command does not use is ignored.
ENGINE = frozenset({"serve", "mcp", "reindex"})  # what the memory engine needs, served or not
BACKUP = frozenset({"backup", "restore"})  # the operator's copies of a SQLite database
DATABASE = ENGINE | {"migrate", "model-call"} | BACKUP  # every command that opens the database
CALLERS = frozenset({"serve", "mcp"})  # who may call and how callers are held back
DEV_MODE = CALLERS | {"model-call"}  # whether calls without a key are the dev tenant's
GRPC = frozenset({"serve"})  # the gRPC listener itself
MCP = frozenset({"mcp"})

T = TypeVar("T")
E = TypeVar("E", bound=enum.Enum)


class ConfigError(ValueError):
    """A setting has a value that cannot be used; the message names it."""


class Section(enum.StrEnum):
    """The concern a setting belongs to: its group in `--help`, its table in a config file
    (`[server]`, ...) and in docs/configuration.md. Declared in the order they are shown."""

    SERVER = "server"
    DATABASE = "database"
    CALLERS = "callers"
    TLS = "tls"
    CONNECTIONS = "connections"
    REQUESTS = "requests"
    SHARES = "shares"
    WATCH = "watch"
    CACHES = "caches"
    MODELS = "models"
    RETENTION = "retention"
    PRIVACY = "privacy"
    REPLICAS = "replicas"
    HTTP = "http"
    MCP = "mcp"

    @property
    def heading(self) -> str:
        return _SECTION_HEADINGS[self]


_SECTION_HEADINGS = {
    Section.SERVER: "the server: its address, logs and shutdown",
    Section.DATABASE: "the database",
    Section.CALLERS: "who may call: API keys, dev mode",
    Section.TLS: "TLS of the gRPC listener",
    Section.CONNECTIONS: "gRPC connections and messages",
    Section.REQUESTS: "what one request may hold",
    Section.SHARES: "each tenant's share",
    Section.WATCH: "WatchEpisode",
    Section.CACHES: "RAM held for what SQL keeps",
    Section.MODELS: "models: embedder, summarizer, memory extractor",
    Section.RETENTION: "retention and background sweeps",
    Section.PRIVACY: "PII redaction",
    Section.REPLICAS: "replicas: the change feed",
    Section.HTTP: "HTTP listeners: inspector, metrics",
    Section.MCP: "episodic mcp",
}


# --- parsers: the text of a variable or flag -> the setting's value (ValueError says why) ---


def parse_bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"not a boolean: {raw!r}")


class Choice(Generic[E]):
    """Parses one of `allowed`, named by its value in any case; nothing else (not even
    spaces). `allowed` is also what --help shows."""

    def __init__(self, *allowed: E) -> None:
        self.allowed = allowed

    def __call__(self, raw: str) -> E:
        for value in self.allowed:
            if raw.casefold() == str(value.value).casefold():
                return value
        raise ValueError(f"{raw!r} is not one of {', '.join(str(v.value) for v in self.allowed)}")


def choice(*allowed: E) -> Callable[[str], E]:
    """One of `allowed`, named by its value in any case; nothing else (not even spaces)."""
    return Choice(*allowed)


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
_EXAMPLE = "\x00eg "  # "e.g. " while a help's first sentence is found: not a sentence's end


@dataclass(frozen=True, slots=True)
class Option:
    """A setting's outside names, default, parser and check: one per field of Settings."""

    name: str
    default: Any
    help: str
    commands: frozenset[str]
    section: Section
    parse: Callable[[str], Any]  # the text of its variable or flag -> its value
    check: Callable[[Any], None] | None  # its value -> ValueError if it cannot be used
    brief: str = ""  # its line in --help, when the help's first clause is too long for one
    shown: str = ""  # what an empty default means, when it means more than nothing

    @property
    def short_help(self) -> str:
        """One line for --help: `brief`, else the help's first clause without its asides."""
        if self.brief:
            return self.brief
        text = re.sub(r"\s+\([^()]*\)", "", self.help).replace("e.g. ", _EXAMPLE)
        first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0].rstrip(".").split("; ")[0]
        return re.split(rf",? {_EXAMPLE}", first, maxsplit=1)[0].replace(_EXAMPLE, "e.g. ")

    @property
    def choices(self) -> tuple[str, ...]:
        """The values a choice takes (as --help shows them), else ()."""
        if isinstance(self.parse, Choice):
            return tuple(str(v.value) for v in self.parse.allowed)
        if isinstance(self.default, enum.Enum):
            return tuple(str(v.value) for v in type(self.default))
        return ()

    @property
    def shown_default(self) -> str:
        """The default as --help, the docs and a config file's template show it."""
        if self.shown:
            return self.shown
        if isinstance(self.default, bool):
            return "on" if self.default else "off"
        if isinstance(self.default, enum.Enum):
            return str(self.default.value)
        return str(self.default) if self.default != "" else "(empty)"

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
    section: Section,
    commands: frozenset[str] = ENGINE,
    check: Callable[[T], None] | None = None,
    parse: Callable[[str], T] | None = None,
    brief: str = "",
    shown: str = "",
) -> T:
    """A field of Settings that is also a setting; its name comes from the field's. `brief`
    is its line in --help when the first clause of `help` is too long for one; `shown`, what
    an empty default means, when it means more than nothing."""
    parse = parse or _parser_for(default)
    option = Option("", default, help, commands, section, parse, check, brief, shown)
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
    """The Markdown tables of `options`, one per section (its config file table): flag,
    variable, default, meaning."""
    out: list[str] = []
    for section in Section:
        members = [o for o in options if o.section is section]
        if not members:
            continue
        if out:
            out.append("")
        out += [f"#### `[{section.value}]`: {section.heading}", ""]
        out += ["| flag | environment | default | meaning |", "| --- | --- | --- | --- |"]
        for o in members:
            default = o.shown_default if o.kind is bool or o.default == "" else f"`{o.shown_default}`"
            if o.default == "" and o.shown:
                default = "(empty)"  # the meaning says what empty means
            out.append(f"| `{o.flag}` | `{o.env}` | {default} | {o.help} |")
    return "\n".join(out) + "\n"
