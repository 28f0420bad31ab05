"""The time a question points at: "last week", "yesterday", "in May", "3 days ago", "in 2024",
"on 8 May 2023", "October 13, 2023", resolved against now into a period of whole days. Recall
then also ranks the episodes that ended in that period, newest first. A month or a day named
without its year is its latest occurrence not after today, and says so (`any_year`): recall
may move it back to the latest year its candidates were in. English only; one pass of one
regex, so linear in the query; the first phrase found wins."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

_MONTHS = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
)  # fmt: skip
_MONTH = "|".join(_MONTHS)  # "May" alone is a verb too: a month needs "in" or a year
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}
_ORDINAL = r"(?:st|nd|rd|th)"
_PHRASE = re.compile(
    r"\b(?:"
    # a dated day: "on 8 May", "13th of October, 2023", "May 23, 2023", "on October 13th"
    r"(?:(?:on )?(?P<dd_day>[0-3]?\d)" + _ORDINAL + r"?(?: of)? (?P<dd_month>" + _MONTH + r")"
    r"(?:,? (?P<dd_year>(?:19|20)\d\d))?)"
    r"|(?:(?P<md_on>on )?(?P<md_month>" + _MONTH + r") (?P<md_day>[0-3]?\d)(?P<md_ordinal>" + _ORDINAL + r")?"
    r"(?:,? (?P<md_year>(?:19|20)\d\d))?)"
    r"|(?P<day>today|yesterday)"
    r"|(?:(?P<which>last|this|previous) (?P<span>week|weekend|month|year))"
    r"|(?:(?P<count>\d{1,2}|a|an|one|two|three|four|five|six|seven) (?P<unit>day|week|month|year)s? ago)"
    r"|(?:(?:last|on) (?P<weekday>" + "|".join(_WEEKDAYS) + r"))"
    r"|(?:(?:in|during) (?P<month>" + _MONTH + r")(?:,? (?P<month_year>(?:19|20)\d\d))?)"
    r"|(?:(?P<dated_month>" + _MONTH + r"),? (?P<dated_year>(?:19|20)\d\d))"
    r"|(?:(?:in|during) (?P<year>(?:19|20)\d\d))"
    r")\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Period:
    """[start, end): whole days, in now's time zone; equal when they cover the same days.
    `any_year`: a month or day named without its year, here at its latest occurrence not
    after today."""

    start: datetime
    end: datetime
    any_year: bool = field(default=False, compare=False)

    def years_back(self, years: int) -> Period:
        """The same days `years` earlier (29 February falls back to the 28th)."""
        return Period(_back(self.start, years), _back(self.end, years), self.any_year)


def _back(when: datetime, years: int) -> datetime:
    try:
        return when.replace(year=when.year - years)
    except ValueError:  # 29 February
        return when.replace(year=when.year - years, day=28)


def period_in(query: str, now: datetime) -> Period | None:
    found = _PHRASE.search(query)
    if found is None:
        return None
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    g = {k: v.lower() for k, v in found.groupdict().items() if v}
    if "dd_day" in g or "md_day" in g:
        return _dated(today, g)
    if "day" in g:
        return _days(today - timedelta(days=0 if g["day"] == "today" else 1), 1)
    if "span" in g:
        return _span(today, g["span"], back=0 if g["which"] == "this" else 1)
    if "unit" in g:
        count = int(g["count"]) if g["count"].isdigit() else _COUNTS[g["count"]]
        return _ago(today, count, g["unit"])
    if "weekday" in g:
        back = (today.weekday() - _WEEKDAYS.index(g["weekday"]) - 1) % 7 + 1
        return _days(today - timedelta(days=back), 1)
    if "month" in g:
        return _month(today, _MONTHS.index(g["month"]) + 1, g.get("month_year"))
    if "dated_month" in g:
        return _month(today, _MONTHS.index(g["dated_month"]) + 1, g["dated_year"])
    return _year(today, int(g["year"]))


def _dated(today: datetime, g: dict[str, str]) -> Period | None:
    if "dd_day" in g:
        return _dated_day(today, g["dd_month"], int(g["dd_day"]), g.get("dd_year"))
    if not ("md_on" in g or "md_ordinal" in g or "md_year" in g):  # "May 5 of us come?"
        return None
    return _dated_day(today, g["md_month"], int(g["md_day"]), g.get("md_year"))


def _dated_day(today: datetime, month_name: str, day: int, year: str | None) -> Period | None:
    """A day of a month; without a year, its latest occurrence not after today."""
    month = _MONTHS.index(month_name) + 1
    try:
        if year:
            return _days(today.replace(year=int(year), month=month, day=day), 1)
        dated = today.replace(month=month, day=day)
        if dated > today:
            dated = _back(dated, 1)
    except ValueError:  # "31 June", "0 May"
        return None
    found = _days(dated, 1)
    return Period(found.start, found.end, any_year=True)


def _days(start: datetime, count: int) -> Period:
    return Period(start, start + timedelta(days=count))


def _span(today: datetime, span: str, back: int) -> Period:
    if span == "weekend":  # the latest Saturday and Sunday (the one before, if today is in it)
        since = (today.weekday() - 5) % 7 + (7 if back and today.weekday() >= 5 else 0)
        return _days(today - timedelta(days=since), 2)
    if span == "week":
        return _days(today - timedelta(days=today.weekday() + 7 * back), 7)
    if span == "month":
        return _month_of(_months_back(today, back))
    return _year(today, today.year - back)


def _ago(today: datetime, count: int, unit: str) -> Period:
    if unit == "day":
        return _days(today - timedelta(days=count), 1)
    if unit == "week":  # the week that holds the day `count` weeks ago
        day = today - timedelta(weeks=count)
        return _days(day - timedelta(days=day.weekday()), 7)
    if unit == "month":
        return _month_of(_months_back(today, count))
    return _year(today, today.year - count)


def _month(today: datetime, month: int, year: str | None) -> Period:
    """A month without a year is its latest occurrence not after this month."""
    chosen = int(year) if year else today.year - (1 if month > today.month else 0)
    found = _month_of(today.replace(year=chosen, month=month, day=1))
    return found if year else Period(found.start, found.end, any_year=True)


def _months_back(today: datetime, count: int) -> datetime:
    index = today.year * 12 + today.month - 1 - count
    return today.replace(year=index // 12, month=index % 12 + 1, day=1)


def _month_of(first: datetime) -> Period:
    after = first.replace(year=first.year + first.month // 12, month=first.month % 12 + 1)
    return Period(first, after)


def _year(today: datetime, year: int) -> Period:
    first = today.replace(year=year, month=1, day=1)
    return Period(first, first.replace(year=year + 1))
