"""Settings read once from the environment and command-line flags (flags win). The only
module of the package that reads os.environ: the OTEL_* variables and XDG_CACHE_HOME are
captured with the settings, so nothing else reads the environment either."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence

from episodic.config.concerns import TlsSettings
from episodic.config.files import check_tls
from episodic.config.options import Option, table_of
from episodic.config.settings import OPTIONS, Settings


def from_environment(environ: Mapping[str, str]) -> dict[str, object]:
    """The settings the environment sets, parsed (ConfigError names the variable)."""
    return {o.name: o.value(environ[o.env], o.env) for o in OPTIONS if o.env in environ}


def otel_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The OTEL_* subset, captured with the settings so nothing else reads the environment."""
    return {name: value for name, value in environ.items() if name.startswith("OTEL_")}


def add_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """The flags of the settings `command` uses. Their text is parsed by `load`, like the
    environment's, so a bad value is one ConfigError line, not an argparse usage."""
    for o in OPTIONS:
        if command not in o.commands:
            continue
        text = o.help.replace("%", "%%")  # argparse formats help with %: "15%" broke --help
        if o.kind is bool:
            parser.add_argument(o.flag, action=argparse.BooleanOptionalAction, default=None, help=text)
        else:
            parser.add_argument(o.flag, default=None, help=f"{text} [env {o.env}]")


def from_flags(args: argparse.Namespace) -> dict[str, object]:
    """The settings the command line sets (ConfigError names the flag)."""
    found: dict[str, object] = {}
    for o in OPTIONS:
        given = getattr(args, o.name, None)
        if given is not None:
            found[o.name] = o.value(given, o.flag) if isinstance(given, str) else given
    return found


def load(environ: Mapping[str, str], args: argparse.Namespace) -> Settings:
    values = from_environment(environ) | from_flags(args)
    xdg_cache_home = environ.get("XDG_CACHE_HOME", "")
    settings = Settings(**values, otel_environ=otel_environment(environ), xdg_cache_home=xdg_cache_home)  # type: ignore[arg-type]
    for o in OPTIONS:  # whatever the source, default included
        o.checked(getattr(settings, o.name))
    check_tls(TlsSettings.of(settings))
    return settings


def load_process(args: argparse.Namespace) -> Settings:
    """The settings of this process: its environment, then its command-line flags."""
    return load(os.environ, args)


def address_of_process() -> str:
    """The gRPC address this process's environment names (for probes), else the default."""
    return str(from_environment(os.environ).get("address") or Settings().address)


def api_key_of_process() -> str:
    """The API key a command-line client (`episodic export` / `import`) sends: EPISODIC_API_KEY."""
    return os.environ.get("EPISODIC_API_KEY", "")


def markdown_table(options: Sequence[Option] = OPTIONS) -> str:
    """The configuration table of docs/configuration.md (`episodic config-docs`)."""
    return table_of(options)
