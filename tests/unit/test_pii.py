"""PII detection and redaction: each kind is replaced by its typed placeholder, lookalikes that fail
their checksum are left alone, and redacting is idempotent."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from episodic.domain.model import JsonValue
from episodic.domain.pii import Finding, PiiKind, find_pii, redact, redact_json

LABELLED = Path(__file__).parents[1] / "data" / "pii_labelled.jsonl"

ONE_OF_EACH = {
    PiiKind.EMAIL: ("Write to jane.doe@example.com today", "Write to [EMAIL] today"),
    PiiKind.PHONE: ("Call +44 20 7946 0958 after six", "Call [PHONE] after six"),
    PiiKind.CARD: ("Card 4111 1111 1111 1111, exp 12/29", "Card [CARD], exp 12/29"),
    PiiKind.IBAN: ("IBAN GB82 WEST 1234 5698 7654 32 please", "IBAN [IBAN] please"),
    PiiKind.SSN: ("My SSN is 536-22-1847.", "My SSN is [SSN]."),
    PiiKind.IP: ("Login from 203.0.113.42 failed", "Login from [IP] failed"),
    PiiKind.SECRET: ("export AWS_KEY=AKIAIOSFODNN7EXAMPLE now", "export AWS_KEY=[SECRET] now"),
}


@pytest.mark.parametrize("kind", list(PiiKind))
def test_each_kind_is_replaced_by_its_typed_placeholder(kind: PiiKind) -> None:
    text, expected = ONE_OF_EACH[kind]
    assert redact(text).text == expected
    assert kind.placeholder == f"[{kind.value}]"


def test_findings_give_the_kind_and_span() -> None:
    text = "mail bob@example.org or ring 415-555-0143"
    assert find_pii(text) == [Finding(PiiKind.EMAIL, 5, 20), Finding(PiiKind.PHONE, 29, 41)]


def test_redaction_counts_what_it_replaced_by_kind() -> None:
    redaction = redact("a@example.com, b@example.com and 198.51.100.7")
    assert redaction.counts == {PiiKind.EMAIL: 2, PiiKind.IP: 1}


def test_text_without_pii_comes_back_unchanged_with_no_counts() -> None:
    text = "The meeting moved to 2024-03-14 at 12:30; version 1.2.3.4 ships then."
    assert redact(text).text == text
    assert redact(text).counts == {}


@pytest.mark.parametrize("number", ["4111 1111 1111 1112", "4242424242424241", "3782 822463 10006"])
def test_card_numbers_failing_luhn_are_left_alone(number: str) -> None:
    assert find_pii(f"Card {number} was rejected") == []


def test_a_luhn_valid_number_no_card_issuer_uses_is_left_alone() -> None:
    assert find_pii("Reference 9999 9999 9999 9995") == []


@pytest.mark.parametrize(
    "iban", ["GB82 WEST 1234 5698 7654 33", "DE89370400440532013001", "XX82WEST12345698765432"]
)
def test_ibans_with_a_wrong_checksum_length_or_country_are_left_alone(iban: str) -> None:
    assert find_pii(f"Pay {iban} today") == []


def test_an_iban_is_found_with_or_without_spaces_and_in_lower_case() -> None:
    for iban in ("DE89 3704 0044 0532 0130 00", "DE89370400440532013000", "de89 3704 0044 0532 0130 00"):
        assert redact(f"to {iban}, thanks").text == "to [IBAN], thanks"


@pytest.mark.parametrize("ssn", ["000-12-3456", "666-12-3456", "912-70-1234", "123-00-4567", "123-45-0000"])
def test_ssns_never_issued_are_left_alone(ssn: str) -> None:
    assert find_pii(f"SSN {ssn}") == []


def test_nine_bare_digits_are_an_ssn_only_after_an_ssn_cue() -> None:
    assert redact("SSN: 536221847").text == "SSN: [SSN]"
    assert find_pii("Order 536221847 shipped") == []


def test_an_assigned_secret_keeps_its_key_name() -> None:
    assert redact('password="Tr0ub4dor&3" api_key=ad84173581569969e58b081006f7e3df').text == (
        'password="[SECRET]" api_key=[SECRET]'
    )


def test_placeholders_and_defaults_in_assignments_are_not_secrets() -> None:
    for text in ("password=changeme", "api_key=<YOUR_API_KEY>", "token: ${NPM_TOKEN}", "secret=true"):
        assert find_pii(text) == []


def test_a_private_key_is_redacted_through_its_end_line() -> None:
    block = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMx\n-----END RSA PRIVATE KEY-----"
    assert redact(f"key:\n{block}\nbye").text == "key:\n[SECRET]\nbye"


def test_a_secret_wins_over_the_card_number_that_is_its_value() -> None:
    assert redact('password="4111 1111 1111 1111"').counts == {PiiKind.SECRET: 1}


def test_loopback_and_unspecified_addresses_are_not_flagged() -> None:
    assert find_pii("bind 0.0.0.0:8080, then curl 127.0.0.1 and ::1") == []


def test_versions_times_and_namespaces_are_not_ip_addresses() -> None:
    assert find_pii("v1.2.3.4 at 12:30:45 in Foo::Bar, OID 1.3.6.1.4.1") == []


def test_json_redaction_redacts_every_string_and_keeps_keys() -> None:
    value: JsonValue = {
        "jane@example.com": {"phones": ["+1 415 555 0199", 42, None], "ok": True},
        "note": "card 4242 4242 4242 4242",
    }
    assert redact_json(value) == {
        "jane@example.com": {"phones": ["[PHONE]", 42, None], "ok": True},
        "note": "card [CARD]",
    }


def test_placeholders_themselves_are_never_flagged() -> None:
    placeholders = " ".join(kind.placeholder for kind in PiiKind)
    assert find_pii(placeholders) == []
    assert find_pii("api_key=[SECRET] Authorization: Bearer [SECRET] password: [SECRET]") == []


def test_redacting_the_labelled_set_twice_equals_redacting_it_once() -> None:
    lines = LABELLED.read_text(encoding="utf-8").splitlines()
    for text in lines + [json.loads(line)["text"] for line in lines]:  # as JSON and as plain text
        once = redact(text).text
        assert redact(once).text == once, text


VALUES = ["jane@example.com", "+44 20 7946 0958", "(415) 555-0187", "4111 1111 1111 1111", "536-22-1847"]
VALUES += [
    "GB82 WEST 1234 5698 7654 32",
    "203.0.113.42",
    "2001:db8::1",
    "AKIAIOSFODNN7EXAMPLE",
    "Tr0ub4dor&3",
]
CONTEXT = ["password=", "api_key=", "token: ", "Bearer ", "SSN: ", "version ", "[EMAIL]", "[SECRET]", "12"]
CONTEXT += [" ", "\n", "-", ".", ":", "@", "(", ")", "'", ",", "1", "0", "a", "Z", "v", "=", "+"]


@given(st.lists(st.sampled_from(VALUES + CONTEXT), max_size=8).map("".join))  # up to 8 glued: _MAX_PASSES
def test_redacting_glued_values_twice_equals_redacting_once(text: str) -> None:
    once = redact(text).text
    assert redact(once).text == once


def test_a_value_glued_to_another_is_redacted_too() -> None:
    assert redact("jane@example.com+44 20 7946 0958").text == "[EMAIL][PHONE]"


def test_a_card_read_as_part_of_the_address_after_it_is_redacted_once_the_address_is() -> None:
    chatter = "Nothing to see in this sentence. " * 60  # the card is far from the start of the text
    redaction = redact(f"{chatter}Maestro 6304 0000 0000 0000 10.255.255.254 is the gateway. {chatter}")
    assert redaction.text == f"{chatter}Maestro [CARD] [IP] is the gateway. {chatter}"
    assert redaction.counts == {PiiKind.CARD: 1, PiiKind.IP: 1}


@given(st.text(alphabet=st.sampled_from("0123456789 .-:+()@abcdefxyzAKIA=_\n"), max_size=80))
def test_findings_are_ordered_and_never_overlap(text: str) -> None:
    findings = find_pii(text)
    assert all(0 <= f.start < f.end <= len(text) for f in findings)
    assert all(a.end <= b.start for a, b in pairwise(findings))
