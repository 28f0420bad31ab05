"""`episodic-lab report` writes its figures as GitHub Markdown: tables whose rows line up
with their headers, cells that cannot break the table, and figures written to a sensible
precision, NaN as "n/a"."""

from __future__ import annotations

import math

import pytest

from episodic_lab.report.markdown import count, duration, ms, share, table
from episodic_lab.report.memory import RssCurve


def test_a_table_has_headers_a_rule_and_one_line_per_row() -> None:
    rendered = table(("RPC", "calls/s"), [("Echo", "1,200"), ("AddMessage", "400")])

    assert rendered.splitlines() == [
        "| RPC | calls/s |",
        "| :--- | ---: |",
        "| Echo | 1,200 |",
        "| AddMessage | 400 |",
    ]


def test_names_are_aligned_left_and_figures_right() -> None:
    rule = table(("episodes", "call", "p50 ms", "p99 ms"), [], names=2).splitlines()[1]

    assert rule == "| :--- | :--- | ---: | ---: |"


def test_a_pipe_or_a_newline_in_a_cell_cannot_break_the_table() -> None:
    rendered = table(("failure",), [("RpcError: a | b\nsecond line",)])

    assert rendered.splitlines()[2] == "| RpcError: a \\| b second line |"


def test_a_row_of_the_wrong_width_is_refused() -> None:
    with pytest.raises(ValueError, match="2 cells, the table 3 columns"):
        table(("a", "b", "c"), [("1", "2")])


@pytest.mark.parametrize(
    ("value", "shown"),
    [(0.7564, "0.756"), (19.654, "19.65"), (270.4, "270"), (1234.5, "1,234"), (math.nan, "n/a")],
)
def test_milliseconds_keep_three_significant_figures_or_so(value: float, shown: str) -> None:
    assert ms(value) == shown


def test_shares_counts_and_durations() -> None:
    assert share(0.345) == "34%"
    assert share(math.nan) == "n/a"
    assert count(3964.4) == "3,964"
    assert duration(42.4) == "42 s"
    assert duration(492.0) == "8 min 12 s"


def test_the_rss_slope_runs_from_the_first_point_to_the_last() -> None:
    curve = RssCurve(200, ((0, 300.0), (50, 301.0), (100, 302.0)))

    assert curve.kib_each == pytest.approx(2 * 1024 / 100)
    assert math.isnan(RssCurve(200, ((0, 300.0),)).kib_each)
