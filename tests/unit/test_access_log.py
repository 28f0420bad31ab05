"""The access log writes one parseable JSON object per RPC, off the event loop."""

from __future__ import annotations

import io
import json

from episodic.edges.grpc.access_log import JsonLinesAccessLog


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


def test_the_line_carries_the_trace_id_of_the_rpc() -> None:
    stream = io.StringIO()
    log = JsonLinesAccessLog(stream)
    log.record("/episodic.v1.DiagnosticsService/Echo", "OK", 0.5, "ipv4:127.0.0.1:5", "ab" * 16)
    log.record("/grpc.health.v1.Health/Check", "OK", 0.1, "ipv4:127.0.0.1:5")  # not traced
    log.close()
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [e["trace_id"] for e in lines] == ["ab" * 16, ""]
