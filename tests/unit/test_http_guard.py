"""The HTTP listeners' shared bounds: which heads are too large (414 for the request line,
431 for the headers, judged as soon as the bytes so far show it), turned-away connections
logged once per interval with a count, asyncio's accept failures thinned the same way, and
the open-file limit raised at start."""

from __future__ import annotations

import asyncio
import logging
import resource
from http import HTTPStatus

import pytest

from episodic.bootstrap.fd_limit import ACCEPT_FAILED, AcceptFailureFilter, raise_open_files_limit
from episodic.edges.http.guard import (
    MAX_HEADER_BYTES,
    MAX_REQUEST_LINE_BYTES,
    Tally,
    head_problem,
    plain_answer,
)


@pytest.mark.parametrize(
    ("head", "problem"),
    [
        (b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", None),
        (b"GET / HTTP/1.1\r\n\r\n", None),
        (b"GET /", None),  # partial, still small
        (b"\r\nGET / HTTP/1.1\r\n", None),  # an empty line before the request is allowed
        (b"GET /" + b"a" * MAX_REQUEST_LINE_BYTES, HTTPStatus.REQUEST_URI_TOO_LONG),  # partial already
        (b"GET /" + b"a" * MAX_REQUEST_LINE_BYTES + b" HTTP/1.1\r\n\r\n", HTTPStatus.REQUEST_URI_TOO_LONG),
        (b"GET / HTTP/1.1\r\nX: " + b"b" * MAX_HEADER_BYTES, HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE),
        (b"GET / HTTP/1.1\r\nX: " + b"b" * (MAX_HEADER_BYTES - 3) + b"\r\n\r\n", None),
        (b"GET / HTTP/1.1\r\n\r\n" + b"body" * MAX_HEADER_BYTES, None),  # the body is not the head
    ],
)
def test_head_problem(head: bytes, problem: HTTPStatus | None) -> None:
    assert head_problem(head) == problem


def test_plain_answer_is_a_whole_response_that_closes() -> None:
    answer = plain_answer(HTTPStatus.SERVICE_UNAVAILABLE)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
    assert b"Connection: close" in head and f"Content-Length: {len(body)}".encode() in head


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_tally_logs_once_per_interval_with_the_count(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    tally = Tally(logging.getLogger("test.tally"), "refused", "inspector_address", every=10.0, clock=clock)
    with caplog.at_level(logging.WARNING, "test.tally"):
        for _ in range(1000):
            tally.add()
        clock.now += 10.0
        tally.add()
    counts = [r.__dict__["count"] for r in caplog.records]
    assert counts == [1, 1000]  # the first at once, then everything since in one line
    assert tally.total == 1001


async def test_a_burst_that_stops_is_still_reported(caplog: pytest.LogCaptureFixture) -> None:
    # the tally's clock stands still, so however slowly the burst runs it is one burst; the
    # loop's timer (due in 0.05 s) reports the rest before the sleep's (0.2 s) wakes the test
    tally = Tally(
        logging.getLogger("test.tally"), "refused", "metrics_address", every=0.05, clock=lambda: 0.0
    )
    with caplog.at_level(logging.WARNING, "test.tally"):
        for _ in range(50):
            tally.add()
        await asyncio.sleep(0.2)
    assert [r.__dict__["count"] for r in caplog.records] == [1, 49]


def test_accept_failures_are_thinned_to_one_line_per_interval() -> None:
    clock = Clock()
    thinning = AcceptFailureFilter(every=10.0, clock=clock)

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, msg, None, None)

    passed = [thinning.filter(record(f"{ACCEPT_FAILED}\nexception: ...")) for _ in range(500)]
    assert passed.count(True) == 1
    assert thinning.filter(record("something else"))
    clock.now += 10.0
    later = record(f"{ACCEPT_FAILED}\nexception: ...")
    assert thinning.filter(later)
    assert "499 more" in later.getMessage()


def test_the_open_file_limit_is_raised_to_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        if hard != resource.RLIM_INFINITY and hard > 256:
            resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        raised, _ = raise_open_files_limit()
        now_soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        assert raised == now_soft
        if hard != resource.RLIM_INFINITY:
            assert now_soft == hard
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
