"""Row counts as `episodic backup` and `episodic restore` print them: one aligned line each."""

from __future__ import annotations


def count_lines(counts: dict[str, int]) -> list[str]:
    width = max((len(name) for name in counts), default=0)
    return [f"    {name:<{width}}  {n:>10,}" for name, n in counts.items()]
