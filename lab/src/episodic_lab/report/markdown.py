"""Markdown of the report: GitHub tables, and the way each kind of figure is written in a
cell (milliseconds to a sensible precision, shares as percentages, NaN as "n/a")."""

from __future__ import annotations

import math
from collections.abc import Sequence

MISSING = "n/a"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], names: int = 1) -> str:
    """The first `names` columns (what a row is) aligned left, the others (figures) right."""
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"row {list(row)} has {len(row)} cells, the table {len(headers)} columns")
    rule = [":---" if column < names else "---:" for column in range(len(headers))]
    return "\n".join(_line(cells) for cells in (headers, rule, *rows))


def _line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(_cell(text) for text in cells) + " |"


def _cell(text: str) -> str:
    """A pipe would end the cell, a newline the row."""
    return text.replace("|", "\\|").replace("\n", " ")


def ms(value: float) -> str:
    if not math.isfinite(value):
        return MISSING
    if value < 1:
        return f"{value:.3f}"
    return f"{value:.2f}" if value < 100 else f"{value:,.0f}"


def share(ratio: float) -> str:
    return f"{ratio:.0%}" if math.isfinite(ratio) else MISSING


def count(value: float) -> str:
    return f"{value:,.0f}" if math.isfinite(value) else MISSING


def duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"
