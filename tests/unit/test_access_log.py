"""The access log writes one parseable JSON object per RPC, off the event loop, at a level that
says whose fault a failure is, with the failure's reason; health probes only at DEBUG."""

from __future__ import annotations

import io
import json
import logging

import pytest

from episodic.edges.grpc.access_log import JsonLinesAccessLog, StatusName


def test_each_rpc_becomes_one_json_line_with_its_status() -> None:
    stream = io.StringIO()
    log = JsonLinesAccessLog(stream)
    log.record('/episodic.v1.EpisodeService/AddMessage"', "INVALID_ARGUMENT", 1.23456, "ipv4:127.0.0.1:5")
    log.record("/episodic.v1.DiagnosticsService/Echo", "OK", 0.5, "ipv6:[::1]:7")
    log.close()
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(e["rpc_method"], e["grpc_code"]) for e in lines] == [
        ('/episodic.v1.EpisodeService/AddMessage"', "INVALID_ARGUMENT"),
        ("/episodic.v1.DiagnosticsService/Echo", "OK"),
    ]
    assert lines[0]["duration_ms"] == 1.235 and lines[0]["logger"] == "episodic.access"


def test_the_line_carries_the_trace_id_of_the_rpc(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="episodic.access")  # health checks are DEBUG lines
    stream = io.StringIO()
    log = JsonLinesAccessLog(stream)
    log.record("/episodic.v1.DiagnosticsService/Echo", "OK", 0.5, "ipv4:127.0.0.1:5", "ab" * 16)
    log.record("/grpc.health.v1.Health/Check", "OK", 0.1, "ipv4:127.0.0.1:5")  # not traced
    log.close()
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [e["trace_id"] for e in lines] == ["ab" * 16, ""]


def test_a_failed_call_carries_its_reason_and_only_server_faults_warn() -> None:
    stream = io.StringIO()
    log = JsonLinesAccessLog(stream)
    log.record("/episodic.v1.EpisodeService/GetEpisode", StatusName("NOT_FOUND", "EPISODE_NOT_FOUND"), 1, "p")
    log.record("/episodic.v1.EpisodeService/AddMessage", StatusName("INTERNAL", "INTERNAL"), 1, "p")
    log.record("/episodic.v1.EpisodeService/AddMessage", StatusName("UNAVAILABLE", "UNAVAILABLE"), 1, "p")
    log.record("/episodic.v1.EpisodeService/AddMessage", StatusName("OK"), 1, "p")
    log.record("/episodic.v1.EpisodeService/AddMessage", "CANCELLED", 1, "p")  # a plain name: no reason
    log.close()
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(e["grpc_code"], e["level"], e["reason"]) for e in lines] == [
        ("NOT_FOUND", "INFO", "EPISODE_NOT_FOUND"),
        ("INTERNAL", "WARNING", "INTERNAL"),
        ("UNAVAILABLE", "INFO", "UNAVAILABLE"),  # an outage warns once, on its own line
        ("OK", "INFO", ""),
        ("CANCELLED", "INFO", ""),
    ]


def test_a_reason_that_is_not_a_constant_is_left_out() -> None:
    """Reasons are UPPER_SNAKE_CASE constants of the error table; anything else (text that
    might quote a caller) never reaches the line."""
    assert StatusName("NOT_FOUND", 'mary@example.com "x"').reason == ""
    assert StatusName("NOT_FOUND", "MEMORY_NOT_FOUND") == "NOT_FOUND"


def test_health_and_reflection_are_debug_lines_written_only_when_debug_is_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stream = io.StringIO()
    log = JsonLinesAccessLog(stream)
    caplog.set_level(logging.INFO, logger="episodic.access")
    log.record("/grpc.health.v1.Health/Check", "OK", 0.1, "p")
    log.record("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", "OK", 0.1, "p")
    caplog.set_level(logging.DEBUG, logger="episodic.access")
    log.record("/grpc.health.v1.Health/Check", "OK", 0.1, "p")
    log.record("/grpc.health.v1.Health/Check", "INTERNAL", 0.1, "p")  # a fault is never quiet
    log.close()
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(e["rpc_method"], e["level"]) for e in lines] == [
        ("/grpc.health.v1.Health/Check", "DEBUG"),
        ("/grpc.health.v1.Health/Check", "WARNING"),
    ]
