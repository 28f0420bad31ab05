"""UTC columns read back from SQLite (store/schema.py UtcDateTime): the fast parse gives what
SQLAlchemy's own would, and round trips what SQLAlchemy writes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import sqlite

from episodic.store.schema import UtcDateTime

_MOMENTS = [
    datetime(2026, 12, 1, 10, 11, 12, 123456, tzinfo=UTC),
    datetime(2026, 12, 1, 10, 11, 12, tzinfo=UTC),
    datetime(1970, 1, 1, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    datetime(2024, 2, 29, 23, 0, 0, 1, tzinfo=timezone(timedelta(hours=-5))),
]


def _processors() -> tuple[object, object]:
    dialect = sqlite.dialect()
    column = UtcDateTime()
    return column._cached_bind_processor(dialect), column._cached_result_processor(dialect, None)


@pytest.mark.parametrize("moment", _MOMENTS)
def test_what_sqlalchemy_writes_reads_back_as_the_same_utc_moment(moment: datetime) -> None:
    bind, result = _processors()
    stored = bind(UtcDateTime().process_bind_param(moment, sqlite.dialect()))  # type: ignore[operator]
    read = result(stored)  # type: ignore[operator]
    assert read == moment
    assert read.tzinfo is UTC


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        ("2026-12-01 10:11:12.123456", datetime(2026, 12, 1, 10, 11, 12, 123456, tzinfo=UTC)),
        ("2026-12-01 10:11:12", datetime(2026, 12, 1, 10, 11, 12, tzinfo=UTC)),
        ("2026-12-01T10:11:12", datetime(2026, 12, 1, 10, 11, 12, tzinfo=UTC)),
        ("2026-12-01", datetime(2026, 12, 1, tzinfo=UTC)),
        ("2026-12-01 12:11:12+02:00", datetime(2026, 12, 1, 10, 11, 12, tzinfo=UTC)),
        (None, None),
    ],
)
def test_other_texts_sqlite_may_hold_are_read_as_utc(stored: str | None, expected: datetime | None) -> None:
    _, result = _processors()
    assert result(stored) == expected  # type: ignore[operator]


def test_a_real_sqlite_column_round_trips_through_the_fast_parse() -> None:
    engine = sa.create_engine("sqlite://")
    table = sa.Table("t", sa.MetaData(), sa.Column("at", UtcDateTime()))
    table.metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(table.insert(), [{"at": m} for m in _MOMENTS])
        read = conn.execute(sa.select(table.c.at)).scalars().all()
        before = conn.execute(sa.select(table.c.at).where(table.c.at < _MOMENTS[1])).scalars().all()
    assert read == _MOMENTS
    assert all(r.tzinfo is UTC for r in read)
    assert before == [_MOMENTS[2], _MOMENTS[4]]  # stored text still orders as time does
