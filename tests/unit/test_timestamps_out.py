"""Times leave as protobuf Timestamps exactly as Timestamp.FromDatetime would write them."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

from google.protobuf import timestamp_pb2

from episodic.edges.grpc.convert import time_out


def from_datetime(value: datetime) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(value)
    return ts


def test_a_time_leaves_as_from_datetime_writes_it_before_and_after_the_epoch_in_any_zone() -> None:
    rng = random.Random(3)
    edges = [
        datetime(1970, 1, 1, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, 500_000, tzinfo=UTC),
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
        datetime(2026, 11, 28, 12, 0, 0, 1),  # naive: UTC
    ]
    drawn = [
        datetime(1970, 1, 1, tzinfo=timezone(timedelta(minutes=rng.randrange(-900, 900, 15))))
        + timedelta(microseconds=rng.randrange(-(10**16), 10**16))
        for _ in range(500)
    ]
    for value in edges + drawn:
        assert time_out(value) == from_datetime(value), value
