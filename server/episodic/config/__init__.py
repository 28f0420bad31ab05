"""Settings, read once from a configuration file, the environment and command-line flags
(each wins over the one before), by job:

- `options`: the framework: a setting declared once (`setting(...)`: default, help, the
  commands that take it as a flag, its check), parsers and checks, the Markdown table;
- `settings`: the one flat table of settings (`Settings`, `OPTIONS`), which is also the
  source of docs/configuration.md (`episodic config-docs`); `choices`: the settings' enums;
- `loading`: file + environment + flags -> `Settings`, the flags grouped by section in
  --help; the only module that reads os.environ;
- `config_file`: the TOML configuration file (--config / EPISODIC_CONFIG) and its template;
- `concerns`: the small view of the settings each edge and factory takes;
- `files`: the files settings name (TLS PEM, API keys), read once at start-up;
- `values`: the domain's values (limits, shares, retention caps, PII policies).

The names most callers need are here too."""

from episodic.config.choices import EmbedderKind, ExtractorKind, LogLevel, SummarizerKind
from episodic.config.files import TlsMaterial, read_named_file
from episodic.config.loading import (
    add_flags,
    address_of_process,
    api_key_of_process,
    load,
    load_process,
    markdown_table,
    toml_template,
)
from episodic.config.options import (
    ConfigError,
    Option,
    split_address,
)
from episodic.config.settings import OPTIONS, Settings

__all__ = [
    "OPTIONS",
    "ConfigError",
    "EmbedderKind",
    "ExtractorKind",
    "LogLevel",
    "Option",
    "Settings",
    "SummarizerKind",
    "TlsMaterial",
    "add_flags",
    "address_of_process",
    "api_key_of_process",
    "load",
    "load_process",
    "markdown_table",
    "read_named_file",
    "split_address",
    "toml_template",
]
