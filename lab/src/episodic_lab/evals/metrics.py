"""Recall@k and MRR per category, from ranked session ids."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

CUTOFFS = (1, 3, 5)


@dataclass
class Scores:
    """Sums over questions; `row()` gives the means."""

    count: int = 0
    recall: dict[int, float] = field(default_factory=lambda: dict.fromkeys(CUTOFFS, 0.0))
    reciprocal_rank: float = 0.0

    def add(self, ranked: Sequence[str], evidence: frozenset[str]) -> None:
        self.count += 1
        for k in CUTOFFS:
            self.recall[k] += len(evidence & set(ranked[:k])) / len(evidence)
        first = next((i for i, s in enumerate(ranked, start=1) if s in evidence), None)
        self.reciprocal_rank += 1.0 / first if first else 0.0

    def row(self) -> list[float]:
        n = max(self.count, 1)
        return [self.recall[k] / n for k in CUTOFFS] + [self.reciprocal_rank / n]


def _categories() -> dict[str, Scores]:
    return defaultdict(Scores)


@dataclass
class Report:
    """Scores per method and category ("overall" included)."""

    by_method: dict[str, dict[str, Scores]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(Scores))
    )
    seconds: dict[str, list[float]] = field(default_factory=dict)

    def add(self, method: str, category: str, ranked: Sequence[str], evidence: frozenset[str]) -> None:
        self.by_method[method][category].add(ranked, evidence)
        self.by_method[method]["overall"].add(ranked, evidence)

    def table(self) -> str:
        lines = [f"{'method':<10} {'category':<12} {'n':>4}  R@1    R@3    R@5    MRR"]
        for method, categories in self.by_method.items():
            for category in sorted(categories, key=lambda c: (c == "overall", c)):
                s = categories[category]
                figures = "  ".join(f"{x:.3f}" for x in s.row())
                lines.append(f"{method:<10} {category:<12} {s.count:>4}  {figures}")
        return "\n".join(lines)

    def timed(self, method: str, seconds: float) -> None:
        self.seconds.setdefault(method, []).append(seconds)

    def latencies(self) -> str:
        """Per method, the query's p50 and p99 in ms: SearchEpisodes round trips on loopback
        for the server's modes, the in-process scoring for bm25 (no server, no network)."""
        lines = [f"{'method':<10} query ms  p50     p99"]
        for method, seconds in self.seconds.items():
            ordered = sorted(seconds)
            p50, p99 = (ordered[min(int(q * len(ordered)), len(ordered) - 1)] * 1000 for q in (0.5, 0.99))
            lines.append(f"{method:<10}          {p50:6.2f}  {p99:6.2f}")
        return "\n".join(lines)

    def overall(self, method: str) -> list[float]:
        return self.by_method[method]["overall"].row()
