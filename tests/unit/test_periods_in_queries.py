"""The time a question points at, resolved against now into whole days."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from episodic.domain.when import Period, period_in

NOW = datetime(2026, 3, 18, 15, 30, tzinfo=UTC)  # a Wednesday


def day(month: int, d: int, year: int = 2026) -> datetime:
    return datetime(year, month, d, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("what did I say yesterday?", day(3, 17), day(3, 18)),
        ("anything today", day(3, 18), day(3, 19)),
        ("the recipe from last week", day(3, 9), day(3, 16)),
        ("This week's plan", day(3, 16), day(3, 23)),
        ("where did we go last weekend", day(3, 14), day(3, 16)),
        ("what happened last month", day(2, 1), day(3, 1)),
        ("goals for this year", day(1, 1), day(1, 1, 2027)),
        ("the trip 3 days ago", day(3, 15), day(3, 16)),
        ("two weeks ago we talked", day(3, 2), day(3, 9)),
        ("a month ago", day(2, 1), day(3, 1)),
        ("what did I cook last Friday", day(3, 13), day(3, 14)),
        ("on Wednesday", day(3, 11), day(3, 12)),  # today is Wednesday: the one before
        ("the talk in May", day(5, 1, 2025), day(6, 1, 2025)),  # no May yet this year
        ("in February", day(2, 1), day(3, 1)),
        ("during March 2024", day(3, 1, 2024), day(4, 1, 2024)),
        ("October, 2023 was busy", day(10, 1, 2023), day(11, 1, 2023)),
        ("the concert in 2022", day(1, 1, 2022), day(1, 1, 2023)),
        ("twelve months ago", None, None),  # not a count we read: no period
        ("May I ask about the marathon?", None, None),  # "May" alone is a verb
        ("", None, None),
        ("我上周说了什么", None, None),
    ],
)
def test_a_phrase_of_time_resolves_to_whole_days(query: str, start: datetime, end: datetime) -> None:
    expected = Period(start, end) if start else None
    assert period_in(query, NOW) == expected


def test_the_last_month_of_a_year_wraps_back_and_forth() -> None:
    january = datetime(2026, 1, 5, tzinfo=UTC)
    assert period_in("last month", january) == Period(day(12, 1, 2025), day(1, 1))
    assert period_in("in December", january) == Period(day(12, 1, 2025), day(1, 1))


def test_resolving_is_linear_in_the_query() -> None:
    def seconds(n: int) -> float:  # this thread's CPU time: a busy machine does not count
        query = "last lastweek in in 20 may " * n
        started = time.thread_time()
        period_in(query, NOW)
        return time.thread_time() - started

    seconds(10)
    assert seconds(16_000) < 40 * max(seconds(1_000), 1e-4)  # 16x the text, generous slack
