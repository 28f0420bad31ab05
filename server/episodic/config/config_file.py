"""The configuration file: TOML, named by `--config FILE` or EPISODIC_CONFIG. A key is a
setting's name as `episodic config-docs` spells it (`db_pool_size`), at the top level or in
the table of its section (`[database]`); its value is TOML's own type: a boolean for a
switch, an integer for a count, a number for seconds, a string for everything else (a
choice in any case, as on the command line). Defaults < this file < the environment <
flags. A key no setting has, a setting in another section's table, or a value of the wrong
type is a ConfigError naming the file and the key. `template()` is `episodic config-docs
--toml`: every setting at its default, commented out, under its section."""

from __future__ import annotations

import enum
import json
import textwrap
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from episodic.config.options import ConfigError, Option, Section

CONFIG_ENV = "EPISODIC_CONFIG"
WIDTH = 92


def config_path(flag: str | None, environ: Mapping[str, str]) -> str:
    """The file --config names, else EPISODIC_CONFIG's, else "" (none)."""
    return flag or environ.get(CONFIG_ENV, "")


def read_config_file(path: str, options: Sequence[Option]) -> dict[str, object]:
    """The settings `path` sets, each of its setting's type (ConfigError names file and key)."""
    try:
        with Path(path).open("rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"config file {path}: cannot be read: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path}: not valid TOML: {exc}") from exc
    by_name = {o.name: o for o in options}
    found: dict[str, object] = {}
    for key, where, value in _entries(data):
        option = by_name.get(key)
        if option is None:
            raise ConfigError(
                f"config file {path}: unknown setting {where!r} (`episodic config-docs` lists them)"
            )
        if "." in where and where.split(".")[0] != option.section:
            raise ConfigError(f"config file {path}: {where}: {key} belongs in [{option.section}]")
        if key in found:
            raise ConfigError(f"config file {path}: {key} is set twice")
        found[key] = _typed(option, value, f"config file {path}: {where}")
    return found


def _entries(data: Mapping[str, object]) -> Iterable[tuple[str, str, object]]:
    """(setting name, where in the file, value): top-level keys, and the keys of the tables
    named by a section."""
    sections = {s.value for s in Section}
    for key, value in data.items():
        if key in sections and isinstance(value, dict):
            for name, inner in value.items():
                yield name, f"{key}.{name}", inner
        else:
            yield key, key, value


def _typed(option: Option, value: object, source: str) -> object:
    default = option.default
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{source}: want true or false, got {value!r}")
    if isinstance(default, int) and not isinstance(default, enum.Enum):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{source}: want a whole number, got {value!r}")
    if isinstance(default, float):
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise ConfigError(f"{source}: want a number, got {value!r}")
    if isinstance(value, str):
        return option.value(value, source)  # a choice, or text: parsed as a variable is
    raise ConfigError(f"{source}: want a string, got {value!r}")


# --- the template (`episodic config-docs --toml`) ---------------------------------------------


def template(options: Sequence[Option]) -> str:
    """Every setting at its default, commented out, under its section's table: loaded as it
    is it sets nothing; each line uncommented sets the default."""
    lines = [
        "# Episodic configuration file (TOML): `episodic serve --config FILE`, or EPISODIC_CONFIG=FILE.",
        "# Every setting is shown at its default, commented out: uncomment what you change.",
        "# Environment variables (EPISODIC_<NAME>) override this file, and flags override both.",
        "# A key may also stand at the top level; in a table, only its own section's.",
    ]
    for section in Section:
        members = [o for o in options if o.section is section]
        if not members:
            continue
        lines += ["", f"[{section.value}]  # {section.heading}"]
        for o in members:
            lines += ["", *textwrap.wrap(o.help, WIDTH - 2, initial_indent="# ", subsequent_indent="# ")]
            lines.append(f"# {o.name} = {toml_value(o.default)}")
    return "\n".join(lines) + "\n"


def toml_value(value: object) -> str:
    """`value` as TOML writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return json.dumps(str(value.value))
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value))  # a JSON string is a TOML basic string
