"""The operator's command line, parsed in process: an unknown command is refused (exit 2)
while no command or flags only still mean serve; `--help` groups the flags by section, each
with its default; `model-call` defaults its tenant in dev mode; a TOML configuration file
(--config / EPISODIC_CONFIG) sits between the defaults and the environment, refuses what it
cannot use by file and key, and `config-docs --toml` prints a template that loads back to
the defaults."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import pytest

from episodic import config
from episodic.cli import main as cli
from episodic.cli.main import COMMANDS, main
from episodic.cli.model_call import tenant_of
from episodic.config.options import Section


def parse_flags(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    config.add_flags(parser, "serve")
    return parser.parse_args(list(argv))


def settings_fields(settings: config.Settings) -> dict[str, object]:
    return {o.name: getattr(settings, o.name) for o in config.OPTIONS}


@pytest.fixture(autouse=True)
def no_episodic_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("EPISODIC_")]:
        monkeypatch.delenv(name)


pytestmark = pytest.mark.usefixtures("restored_logging")  # main() sets up logging


# --- commands ---------------------------------------------------------------------------------


def test_a_first_word_that_is_no_command_is_refused_naming_the_commands(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["erse", "--user", "mary"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("episodic: unknown command 'erse' (commands: serve, migrate")
    assert all(command in err for command in COMMANDS) and err.count("\n") == 1


@pytest.mark.parametrize("argv", [[], ["--address", "127.0.0.1:1"], ["--insecure-dev"]])
def test_no_command_or_flags_only_still_serve(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    served: list[argparse.Namespace] = []

    def serve(args: argparse.Namespace) -> int:
        served.append(args)
        return 0

    monkeypatch.setattr(cli, "_serve", serve)
    assert main(argv) == 0
    assert served and served[0].command == "serve"


def test_erase_has_its_own_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["erase", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: episodic erase") and "--user USER" in out and "--agent AGENT" in out


def test_the_top_level_help_lists_erase(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "erase everything held about one user" in capsys.readouterr().out


# --- grouped help -----------------------------------------------------------------------------


def test_serve_help_groups_the_flags_by_section_each_with_its_default(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "usage: episodic serve [--config FILE] [options]"
    assert len(lines) < 215, len(lines)  # was 429, with no default shown; ~3 lines a flag
    for section in Section:
        assert (f"[{section.value}]:" in out) is (section is not Section.MCP)  # mcp's own flags
    flat = re.sub(r"\s+", " ", out)
    assert "--address HOST:PORT HOST:PORT the gRPC server listens on [default: 127.0.0.1:50051]" in flat
    assert "--db-pool-size N Database connections for reads [default: 8]" in flat
    assert "--access-log, --no-access-log One JSON line per RPC on stderr [default: on]" in flat
    assert "[default: $XDG_CACHE_HOME/episodic/models, else ~/.cache/episodic/models]" in flat
    assert "None" not in out
    shown = {o.flag for o in config.OPTIONS if "serve" in o.commands}
    assert flat.count("[default: ") >= len(shown)
    assert all(f"{flag} " in flat or f"{flag}," in flat for flag in shown)


def test_a_commands_usage_keeps_what_it_needs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["model-call", "--help"])
    assert capsys.readouterr().out.startswith("usage: episodic model-call CALL_ID [--config FILE] [options]")


# --- model-call in dev mode -------------------------------------------------------------------


def test_model_call_defaults_to_the_dev_tenant_in_dev_mode() -> None:
    dev = config.load({"EPISODIC_INSECURE_DEV": "true", "EPISODIC_DEV_TENANT": "mine"}, parse_flags())
    assert tenant_of(dev, None) == "mine"
    assert tenant_of(dev, "acme") == "acme"
    with pytest.raises(config.ConfigError, match="--tenant is required"):
        tenant_of(config.load({}, parse_flags()), None)


def test_model_call_without_a_tenant_outside_dev_mode_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'none.db'}"
    assert main(["model-call", "mc_1", "--database-url", url]) == 2
    assert capsys.readouterr().err == (
        "episodic: model-call: --tenant is required (or --insecure-dev: the dev tenant's calls)\n"
    )


# --- the configuration file -------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "episodic.toml"
    path.write_text(text)
    return str(path)


def test_defaults_then_file_then_environment_then_flags(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[server]\naddress = "127.0.0.1:1"\nshutdown_grace_seconds = 3\n'
        "[database]\ndb_pool_size = 2\ndb_writers = 3\n"
        "[callers]\ninsecure_dev = true\n",
    )
    environ = {"EPISODIC_DB_POOL_SIZE": "4", "EPISODIC_DB_WRITERS": "5"}
    settings = config.load(environ, parse_flags("--config", path, "--db-writers", "6"))
    assert settings.max_content_bytes == config.Settings().max_content_bytes  # default: nobody set it
    assert settings.address == "127.0.0.1:1"  # file over default
    assert settings.shutdown_grace_seconds == 3.0 and isinstance(settings.shutdown_grace_seconds, float)
    assert settings.insecure_dev is True
    assert settings.db_pool_size == 4  # environment over file
    assert settings.db_writers == 6  # flag over environment and file


def test_a_switch_the_file_turns_on_a_flag_turns_off(tmp_path: Path) -> None:
    path = write(tmp_path, "access_log = false\n[callers]\ninsecure_dev = true\n")
    settings = config.load({}, parse_flags("--config", path, "--no-insecure-dev", "--access-log"))
    assert settings.insecure_dev is False and settings.access_log is True


def test_the_file_may_be_named_by_the_environment_and_the_flag_wins(tmp_path: Path) -> None:
    by_variable = write(tmp_path, "db_pool_size = 2\n")
    by_flag = tmp_path / "other.toml"
    by_flag.write_text("db_pool_size = 3\n")
    environ = {"EPISODIC_CONFIG": by_variable}
    assert config.load(environ, parse_flags()).db_pool_size == 2
    assert config.load(environ, parse_flags("--config", str(by_flag))).db_pool_size == 3


def test_a_choice_in_the_file_takes_any_case_and_a_bad_one_is_named(tmp_path: Path) -> None:
    settings = config.load({}, parse_flags("--config", write(tmp_path, '[models]\nembedder = "Hashing"\n')))
    assert settings.embedder is config.EmbedderKind.HASHING
    with pytest.raises(config.ConfigError) as refused:
        config.load({}, parse_flags("--config", write(tmp_path, 'summarizer = "gpt"\n')))
    assert str(refused.value).endswith("episodic.toml: summarizer: 'gpt' is not one of extractive, openai")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[server]\nadress = "x:1"\n', "unknown setting 'server.adress'"),
        ("colour = 1\n", "unknown setting 'colour'"),
        ("[nowhere]\ndb_pool_size = 1\n", "unknown setting 'nowhere'"),
        ("[server]\ndb_pool_size = 1\n", "server.db_pool_size: db_pool_size belongs in [database]"),
        ('db_pool_size = "8"\n', "db_pool_size: want a whole number, got '8'"),
        ("db_pool_size = 8.5\n", "db_pool_size: want a whole number, got 8.5"),
        (
            "[server]\nshutdown_grace_seconds = true\n",
            "server.shutdown_grace_seconds: want a number, got True",
        ),
        ('access_log = "yes"\n', "access_log: want true or false, got 'yes'"),
        ("[server]\naddress = 50051\n", "server.address: want a string, got 50051"),
        ("db_pool_size = 1\n[database]\ndb_pool_size = 2\n", "db_pool_size is set twice"),
        ("db_pool_size = \n", "not valid TOML"),
        ("db_pool_size = 0\n", "db_pool_size: must be at least 1"),
    ],
)
def test_what_the_file_cannot_set_is_named_by_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(config.ConfigError) as refused:
        config.load({}, parse_flags("--config", path))
    assert message in str(refused.value)
    if "must be at least" not in message:  # a check names the setting, whatever its source
        assert str(refused.value).startswith(f"config file {path}: ")


def test_a_bad_file_stops_the_command_with_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "[server]\nport = 1\n")
    assert main(["serve", "--config", path]) == 2
    assert capsys.readouterr().err == (
        f"episodic: config file {path}: unknown setting 'server.port' (`episodic config-docs` lists them)\n"
    )
    assert main(["migrate", "--config", str(tmp_path / "missing.toml")]) == 2
    assert "cannot be read" in capsys.readouterr().err


def test_the_template_loads_back_to_the_defaults_commented_or_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config-docs", "--toml"]) == 0
    template = capsys.readouterr().out
    assert template == config.toml_template()
    defaults = settings_fields(config.Settings())
    as_printed = config.load({}, parse_flags("--config", write(tmp_path, template)))
    assert settings_fields(as_printed) == defaults
    uncommented = re.sub(r"^# (\w+ = )", r"\1", template, flags=re.M)
    assert uncommented.count("\n# ") < template.count("\n# ")
    every_key = config.load({}, parse_flags("--config", write(tmp_path, uncommented)))
    assert settings_fields(every_key) == defaults
    assert all(f"\n{o.name} = " in uncommented for o in config.OPTIONS)


def test_every_setting_has_a_section_and_the_docs_a_table_per_section() -> None:
    table = config.markdown_table()
    for section in Section:
        assert f"#### `[{section.value}]`" in table
    assert all(isinstance(o.section, Section) for o in config.OPTIONS)


def test_the_commands_that_call_a_server_find_its_address_in_the_file_unless_the_variable_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EPISODIC_CONFIG", write(tmp_path, '[server]\naddress = "127.0.0.1:7001"\n'))
    assert config.address_of_process() == "127.0.0.1:7001"
    monkeypatch.setenv("EPISODIC_ADDRESS", "127.0.0.1:7002")
    assert config.address_of_process() == "127.0.0.1:7002"
