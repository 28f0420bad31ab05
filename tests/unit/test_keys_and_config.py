"""API key configuration and settings: hashes only, flags over environment."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from episodic import config
from episodic.bootstrap.adapters import build_extractor
from episodic.cli.main import main
from episodic.config.concerns import ModelSettings, TlsSettings
from episodic.config.files import TlsMaterial, tls_material
from episodic.domain.model import Caller, PiiPolicy
from episodic.edges.keys import KeyConfigError, KeyRing, config_line, hash_key, new_key
from episodic.embed.factory import KINDS
from episodic.summarize.openai_memories import OpenAiMemoryExtractor


def test_a_configured_key_maps_to_its_tenant_and_only_its_hash_is_kept() -> None:
    key = new_key()
    ring = KeyRing.parse(f"# staging\n{config_line('acme', key)}\n")
    caller = ring.caller_for(key)
    assert caller is not None and caller.tenant_id == "acme"
    assert key not in repr(ring) and hash_key(key) in ring.callers_by_hash
    assert caller.agents is None, "a key without an agent list may use every agent"


def test_unknown_keys_map_to_nobody() -> None:
    assert KeyRing.parse(config_line("acme", new_key())).caller_for("epk_guess") is None


def test_comma_separated_entries_are_accepted() -> None:
    text = f"{config_line('a', 'k1')},{config_line('b', 'k2')}"
    assert len(KeyRing.parse(text)) == 2


@pytest.mark.parametrize("entry", ["acme=plaintext", "acme=sha256:abc", "bad tenant!=sha256:" + "0" * 64])
def test_malformed_key_entries_are_refused(entry: str) -> None:
    with pytest.raises(KeyConfigError):
        KeyRing.parse(entry)


def test_a_key_can_be_restricted_to_a_list_of_agents() -> None:
    key = new_key()
    line = config_line("acme", key, ["support-bot", "sales.bot"])
    assert line.endswith(";agents=support-bot|sales.bot")
    caller = KeyRing.parse(line).caller_for(key)
    assert caller is not None and caller.agents == frozenset({"support-bot", "sales.bot"})


def test_restricted_and_unrestricted_entries_mix_in_one_comma_separated_list() -> None:
    text = f"{config_line('a', 'k1', ['x', 'y'])}, {config_line('a', 'k2')}\n"
    ring = KeyRing.parse(text)
    assert [ring.caller_for(k) for k in ("k1", "k2")] == [
        Caller("a", frozenset({"x", "y"}), writes_knowledge=False),
        Caller("a", None, writes_knowledge=False),
    ]


def test_only_a_key_whose_entry_says_so_may_write_knowledge() -> None:
    text = "\n".join(
        [
            config_line("a", "reader"),
            config_line("a", "writer", knowledge_write=True),
            config_line("a", "agent-writer", ["x"], knowledge_write=True),
        ]
    )
    ring = KeyRing.parse(text)
    assert [ring.caller_for(k) for k in ("reader", "writer", "agent-writer")] == [
        Caller("a", None, writes_knowledge=False),
        Caller("a", None, writes_knowledge=True),
        Caller("a", frozenset({"x"}), writes_knowledge=True),
    ]
    assert config_line("a", "writer", knowledge_write=True).endswith(";knowledge=write")
    with pytest.raises(KeyConfigError):
        KeyRing.parse(config_line("a", "k") + ";knowledge=delete")


def test_an_agent_list_tolerates_spaces_around_its_separators() -> None:
    entry = f"acme=sha256:{hash_key('k')} ; agents = x | y"
    assert KeyRing.parse(entry).caller_for("k") == Caller(
        "acme", frozenset({"x", "y"}), writes_knowledge=False
    )


@pytest.mark.parametrize("agents", ["", "x||y", "bad agent", "x|-leading-dash", "x;agents=y"])
def test_malformed_agent_lists_are_refused_and_named(agents: str) -> None:
    with pytest.raises(KeyConfigError, match=r"agent|API key entry"):
        KeyRing.parse(f"acme=sha256:{hash_key('k')};agents={agents}")


def parse_flags(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    config.add_flags(parser, "serve")
    return parser.parse_args(list(argv))


def test_flags_override_the_environment() -> None:
    env = {"EPISODIC_ADDRESS": "0.0.0.0:1", "EPISODIC_INSECURE_DEV": "true"}
    settings = config.load(env, parse_flags("--address", "127.0.0.1:2"))
    assert settings.address == "127.0.0.1:2" and settings.insecure_dev is True


def test_bad_values_name_the_setting() -> None:
    with pytest.raises(config.ConfigError, match="EPISODIC_MAX_CONTENT_BYTES"):
        config.load({"EPISODIC_MAX_CONTENT_BYTES": "lots"}, parse_flags())
    with pytest.raises(config.ConfigError, match="address"):
        config.load({}, parse_flags("--address", "nowhere"))


def test_the_configuration_doc_lists_every_setting() -> None:
    table = config.markdown_table()
    assert all(f"`{o.env}`" in table for o in config.OPTIONS)


def test_the_operator_docs_carry_the_current_configuration_table() -> None:
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    assert config.markdown_table() in doc, "regenerate the table with `episodic config-docs`"


@pytest.mark.parametrize(
    ("flags", "missing"),
    [
        (("--tls-cert-file", "server.pem"), "tls_key_file"),
        (("--tls-key-file", "server.key"), "tls_cert_file"),
        (("--tls-client-ca-file", "ca.pem"), "tls_client_ca_file"),
    ],
)
def test_half_a_tls_setup_is_refused_naming_what_is_missing(flags: tuple[str, ...], missing: str) -> None:
    with pytest.raises(config.ConfigError, match=missing):
        config.load({}, parse_flags(*flags))


def tls_of(settings: config.Settings) -> TlsMaterial | None:
    return tls_material(TlsSettings.of(settings))


def test_tls_files_are_read_once_and_an_unreadable_one_is_named(tmp_path: Path) -> None:
    cert, key = b"-----BEGIN CERTIFICATE-----\n", b"-----BEGIN PRIVATE KEY-----\n"
    (tmp_path / "cert.pem").write_bytes(cert)
    (tmp_path / "key.pem").write_bytes(key)
    env = {
        "EPISODIC_TLS_CERT_FILE": str(tmp_path / "cert.pem"),
        "EPISODIC_TLS_KEY_FILE": str(tmp_path / "key.pem"),
    }
    assert tls_of(config.load(env, parse_flags())) == TlsMaterial(cert, key, None)
    missing_ca = parse_flags("--tls-client-ca-file", str(tmp_path / "absent.pem"))
    with pytest.raises(config.ConfigError, match="tls_client_ca_file: cannot read"):
        tls_of(config.load(env, missing_ca))


def test_a_certificate_and_key_given_the_wrong_way_round_are_refused(tmp_path: Path) -> None:
    (tmp_path / "cert.pem").write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    (tmp_path / "key.pem").write_bytes(b"-----BEGIN EC PRIVATE KEY-----\n")
    swapped = parse_flags(
        "--tls-cert-file", str(tmp_path / "key.pem"), "--tls-key-file", str(tmp_path / "cert.pem")
    )
    with pytest.raises(config.ConfigError, match=r"tls_cert_file: .* holds no PEM"):
        tls_of(config.load({}, swapped))


def test_without_tls_files_the_server_speaks_plaintext() -> None:
    assert tls_of(config.load({}, parse_flags())) is None


def test_boolean_settings_can_be_switched_off_by_flag() -> None:
    settings = config.load({"EPISODIC_ACCESS_LOG": "true"}, parse_flags("--no-access-log"))
    assert settings.access_log is False


def test_each_command_takes_only_the_flags_of_the_settings_it_uses() -> None:
    migrate = argparse.ArgumentParser()
    config.add_flags(migrate, "migrate")
    flags = {a.dest for a in migrate._actions} - {"help"}
    assert flags == {"config", "database_url", "db_pool_size", "log_level"}
    serve = argparse.ArgumentParser()
    config.add_flags(serve, "serve")
    assert {"address", "tls_cert_file", "embedder"} <= {a.dest for a in serve._actions}


def test_a_choice_is_named_in_any_case_and_becomes_its_typed_value() -> None:
    env = {"EPISODIC_EXTRACTOR": "OpenAI", "EPISODIC_LOG_LEVEL": "debug", "EPISODIC_PII_POLICY": "REDACT"}
    settings = config.load(env, parse_flags("--embedder", "Hashing"))
    assert settings.extractor is config.ExtractorKind.OPENAI
    assert settings.log_level is config.LogLevel.DEBUG
    assert settings.pii_policy is PiiPolicy.REDACT
    assert settings.embedder is config.EmbedderKind.HASHING


def test_extractor_openai_in_another_case_builds_the_openai_extractor_off_the_summary_pool() -> None:
    env = {
        "EPISODIC_EXTRACTOR": "OpenAI",
        "EPISODIC_SUMMARIZER_URL": "http://localhost:1/v1",
        "EPISODIC_SUMMARIZER_MODEL": "m",
    }
    settings = config.load(env, parse_flags())
    assert isinstance(build_extractor(ModelSettings.of(settings)), OpenAiMemoryExtractor)
    assert settings.extractor == config.ExtractorKind.OPENAI  # what decides the pool, too


@pytest.mark.parametrize(
    ("environ", "flags", "line"),
    [
        ({}, ("--summarizer", " openai"), "--summarizer: ' openai' is not one of extractive, openai"),
        ({"EPISODIC_SUMMARIZER": "gpt"}, (), "EPISODIC_SUMMARIZER: 'gpt' is not one of extractive, openai"),
        (
            {"EPISODIC_EMBEDDER": "bert"},
            (),
            "EPISODIC_EMBEDDER: 'bert' is not one of minilm, minilm-fp32, openai, hashing",
        ),
        ({}, ("--extractor", ""), "--extractor: '' is not one of extractive, openai"),
        ({"EPISODIC_PII_POLICY": "inherit"}, (), "EPISODIC_PII_POLICY: 'inherit' is not one of off, redact"),
        (
            {},
            ("--log-level", "loud"),
            "--log-level: 'loud' is not one of DEBUG, INFO, WARNING, ERROR, CRITICAL",
        ),
        ({}, ("--db-pool-size", "many"), "--db-pool-size: 'many' is not a whole number"),
        ({"EPISODIC_DB_POOL_SIZE": "0"}, (), "db_pool_size: must be at least 1"),
        (
            {"EPISODIC_PII_TENANT_POLICIES": "acme=maybe"},
            (),
            "pii_tenant_policies: 'maybe' is not one of off, redact",
        ),
        ({"EPISODIC_RETENTION_TENANT_DAYS": "acme"}, (), "retention_tenant_days: 'acme' is not tenant=value"),
    ],
)
def test_a_bad_value_is_one_configuration_error_naming_the_setting_and_its_choices(
    environ: dict[str, str], flags: tuple[str, ...], line: str
) -> None:
    with pytest.raises(config.ConfigError) as refused:
        config.load(environ, parse_flags(*flags))
    assert str(refused.value) == line


def test_a_bad_choice_on_the_command_line_is_one_line_and_exit_code_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EPISODIC_SUMMARIZER", raising=False)
    assert main(["serve", "--summarizer", " openai"]) == 2
    err = capsys.readouterr().err
    assert err == "episodic: --summarizer: ' openai' is not one of extractive, openai\n"


def test_each_setting_is_declared_once_with_its_variable_and_flag_from_its_name() -> None:
    read_at_start = {"otel_environ", "xdg_cache_home"}  # the environment's, not settings
    fields = [f.name for f in dataclasses.fields(config.Settings) if f.name not in read_at_start]
    assert [o.name for o in config.OPTIONS] == fields
    assert all(o.env == "EPISODIC_" + o.name.upper() for o in config.OPTIONS)


def test_the_embedder_choices_are_the_kinds_the_factory_builds() -> None:
    assert tuple(config.EmbedderKind) == KINDS


@pytest.mark.parametrize("command", ["serve", "migrate", "reindex", "mcp", "keygen", "healthcheck"])
def test_every_commands_help_prints(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """argparse formats help text with %: a setting's "15%" once broke `episodic serve --help`."""
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    assert "usage: episodic" in capsys.readouterr().out
