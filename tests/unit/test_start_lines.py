"""What a start says: the open-file limit only at DEBUG unless it had to be raised, and the
one "serving" line naming where gRPC (the bound port), the inspector and metrics listen and
the database without its password."""

from __future__ import annotations

import logging
import resource

import pytest

from episodic.bootstrap import fd_limit
from episodic.cli.serve import serving_fields
from episodic.config import Settings


def limit_records(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, soft: int, hard: int
) -> list[logging.LogRecord]:
    monkeypatch.setattr(resource, "getrlimit", lambda _which: (soft, hard))
    monkeypatch.setattr(resource, "setrlimit", lambda _which, _limits: None)
    caplog.set_level(logging.DEBUG, logger="episodic.server")
    fd_limit.raise_open_files_limit()
    return [r for r in caplog.records if r.getMessage() == "open-file limit"]


def test_a_limit_already_at_its_hardest_is_a_debug_line(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    (record,) = limit_records(caplog, monkeypatch, 4096, 4096)
    assert record.levelno == logging.DEBUG


def test_a_raised_limit_is_said_at_info(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    (record,) = limit_records(caplog, monkeypatch, 1024, 4096)
    assert record.levelno == logging.INFO
    assert (record.__dict__["soft_before"], record.__dict__["soft"]) == (1024, 4096)


def test_an_unlimited_hard_limit_is_raised_and_said(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    (record,) = limit_records(caplog, monkeypatch, 1024, resource.RLIM_INFINITY)
    assert record.levelno == logging.INFO and record.__dict__["hard"] == "unlimited"


def test_the_serving_line_says_where_everything_listens_without_the_password() -> None:
    settings = Settings(
        address="0.0.0.0:0",
        inspector_address="127.0.0.1:8080",
        metrics_address="127.0.0.1:9090",
        database_url="postgresql://episodic:s3cret@db:5432/episodic",
    )
    fields = serving_fields(settings, 43210, "tls")
    assert list(fields)[:5] == ["grpc", "transport", "inspector", "metrics", "database"]
    assert fields["grpc"] == "0.0.0.0:43210" and fields["port"] == 43210
    assert fields["inspector"] == "http://127.0.0.1:8080/"
    assert fields["metrics"] == "http://127.0.0.1:9090/metrics"
    assert fields["database"] == "postgresql+asyncpg://episodic:***@db:5432/episodic"
    assert "s3cret" not in repr(fields)


def test_listeners_that_are_off_are_not_named() -> None:
    fields = serving_fields(Settings(address="[::1]:50051"), 50051, "plaintext")
    assert fields["grpc"] == "[::1]:50051" and "inspector" not in fields and "metrics" not in fields
