"""API key configuration and settings: hashes only, flags over environment."""

from __future__ import annotations

import argparse

import pytest

from episodic import config
from episodic.keys import KeyConfigError, KeyRing, config_line, hash_key, new_key


def test_a_configured_key_maps_to_its_tenant_and_only_its_hash_is_kept() -> None:
    key = new_key()
    ring = KeyRing.parse(f"# staging\n{config_line('acme', key)}\n")
    caller = ring.caller_for(key)
    assert caller is not None and caller.tenant_id == "acme"
    assert key not in repr(ring) and hash_key(key) in ring.tenants_by_hash


def test_unknown_keys_map_to_nobody() -> None:
    assert KeyRing.parse(config_line("acme", new_key())).caller_for("epk_guess") is None


def test_comma_separated_entries_are_accepted() -> None:
    text = f"{config_line('a', 'k1')},{config_line('b', 'k2')}"
    assert len(KeyRing.parse(text)) == 2


@pytest.mark.parametrize("entry", ["acme=plaintext", "acme=sha256:abc", "bad tenant!=sha256:" + "0" * 64])
def test_malformed_key_entries_are_refused(entry: str) -> None:
    with pytest.raises(KeyConfigError):
        KeyRing.parse(entry)


def parse_flags(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    config.add_flags(parser)
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


def test_boolean_settings_can_be_switched_off_by_flag() -> None:
    settings = config.load({"EPISODIC_ACCESS_LOG": "true"}, parse_flags("--no-access-log"))
    assert settings.access_log is False
