"""`episodic serve` shortens Python's switch interval so threads handing results back to the
busy event loop (the query embedding, SQLite, gRPC) get the GIL within a fraction of a ms."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from episodic import config
from episodic.cli.serve import hand_over_the_gil_sooner
from tests.unit.test_keys_and_config import parse_flags


@pytest.fixture
def restored_switch_interval() -> Iterator[None]:
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


@pytest.mark.usefixtures("restored_switch_interval")
def test_serve_hands_the_gil_over_every_half_millisecond_by_default() -> None:
    hand_over_the_gil_sooner(config.load({}, parse_flags()))
    assert sys.getswitchinterval() == pytest.approx(0.0005)


@pytest.mark.usefixtures("restored_switch_interval")
def test_the_switch_interval_is_a_setting_in_milliseconds() -> None:
    hand_over_the_gil_sooner(config.load({"EPISODIC_GIL_SWITCH_INTERVAL_MS": "2"}, parse_flags()))
    assert sys.getswitchinterval() == pytest.approx(0.002)


def test_a_switch_interval_too_short_to_get_work_done_is_refused() -> None:
    with pytest.raises(config.ConfigError, match=r"gil_switch_interval_ms: must be at least 0\.05"):
        config.load({}, parse_flags("--gil-switch-interval-ms", "0.001"))
