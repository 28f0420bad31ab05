"""Settings read once: defaults, then the configuration file (--config / EPISODIC_CONFIG,
episodic.config.config_file), then the environment, then command-line flags (each wins over
the ones before). `add_flags` gives a command its flags, grouped by section, each showing
its default. The only module of the package that reads os.environ: the OTEL_* variables and XDG_CACHE_HOME are
captured with the settings, so nothing else reads the environment either."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence

from episodic.config.concerns import TlsSettings
from episodic.config.config_file import CONFIG_ENV, config_path, read_config_file, template
from episodic.config.files import check_tls
from episodic.config.options import Option, Section, table_of
from episodic.config.settings import OPTIONS, Settings


def from_environment(environ: Mapping[str, str]) -> dict[str, object]:
    """The settings the environment sets, parsed (ConfigError names the variable)."""
    return {o.name: o.value(environ[o.env], o.env) for o in OPTIONS if o.env in environ}


def otel_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The OTEL_* subset, captured with the settings so nothing else reads the environment."""
    return {name: value for name, value in environ.items() if name.startswith("OTEL_")}


class _Help(argparse.HelpFormatter):
    """Help whose flags share one column wide enough for most of them."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=36)


_METAVARS = (("_address", "HOST:PORT"), ("_url", "URL"), ("_file", "FILE"), ("_seconds", "SECONDS"))
_METAVARS_BY_KIND: dict[type, str] = {int: "N", float: "NUMBER", str: "TEXT"}


def _metavar(o: Option) -> str:
    if o.name == "address":
        return "HOST:PORT"
    if o.name.endswith("_bytes"):
        return "BYTES"
    for suffix, metavar in _METAVARS:
        if o.name.endswith(suffix):
            return metavar
    if o.choices:
        return "{" + ",".join(o.choices) + "}"
    return _METAVARS_BY_KIND.get(o.kind, "VALUE")


def add_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """The flags of the settings `command` uses, grouped by section, each with its default,
    and --config. Their text is parsed by `load`, like the environment's, so a bad value is
    one ConfigError line, not an argparse usage."""
    parser.formatter_class = _Help
    if parser.usage is None:  # not every flag: what the command itself needs, then [options]
        needed = [a for a in parser._actions if not a.option_strings or a.required]
        shown = [
            a.metavar or a.dest
            if not a.option_strings
            else f"{a.option_strings[0]} {a.metavar or a.dest.upper()}"
            for a in needed
        ]
        parser.usage = " ".join(["%(prog)s", *map(str, shown), "[--config FILE] [options]"])
    parser.epilog = (
        f"Each setting is read from, in order (the later wins): its default, the file of --config "
        f"or {CONFIG_ENV} (TOML; `episodic config-docs --toml` prints a template), its variable "
        "EPISODIC_<NAME> (--db-pool-size: EPISODIC_DB_POOL_SIZE), its flag. "
        "docs/configuration.md says more of each."
    )
    parser.add_argument(
        "--config", metavar="FILE", default=None, help=f"TOML configuration file [default: ${CONFIG_ENV}]"
    )
    for section in Section:
        members = [o for o in OPTIONS if command in o.commands and o.section is section]
        if not members:
            continue
        group = parser.add_argument_group(f"{section.heading} [{section.value}]")
        for o in members:
            text = f"{o.short_help} [default: {o.shown_default}]".replace(
                "%", "%%"
            )  # argparse formats with %
            if o.kind is bool:
                group.add_argument(o.flag, action=argparse.BooleanOptionalAction, default=None, help=text)
            else:
                group.add_argument(o.flag, default=None, metavar=_metavar(o), help=text)


def from_flags(args: argparse.Namespace) -> dict[str, object]:
    """The settings the command line sets (ConfigError names the flag)."""
    found: dict[str, object] = {}
    for o in OPTIONS:
        given = getattr(args, o.name, None)
        if given is not None:
            found[o.name] = o.value(given, o.flag) if isinstance(given, str) else given
    return found


def from_file(environ: Mapping[str, str], args: argparse.Namespace | None = None) -> dict[str, object]:
    """The settings the configuration file sets: --config's, else EPISODIC_CONFIG's, else none."""
    path = config_path(getattr(args, "config", None), environ)
    return read_config_file(path, OPTIONS) if path else {}


def load(environ: Mapping[str, str], args: argparse.Namespace) -> Settings:
    """Defaults < the configuration file < the environment < flags; every value checked."""
    values = from_file(environ, args) | from_environment(environ) | from_flags(args)
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
    """The gRPC address this process's configuration file or environment names (for probes
    and the commands that call a server), else the default."""
    found = from_file(os.environ) | from_environment(os.environ)
    return str(found.get("address") or Settings().address)


def api_key_of_process() -> str:
    """The API key a command-line client (`episodic export` / `import`) sends: EPISODIC_API_KEY."""
    return os.environ.get("EPISODIC_API_KEY", "")


def markdown_table(options: Sequence[Option] = OPTIONS) -> str:
    """The configuration tables of docs/configuration.md (`episodic config-docs`)."""
    return table_of(options)


def toml_template(options: Sequence[Option] = OPTIONS) -> str:
    """A configuration file of every setting at its default, commented out (`episodic
    config-docs --toml`)."""
    return template(options)
