"""The figures of `episodic-lab eval-knowledge`: nDCG@10 and R@5 of ranked document ids against
a question's gold documents (binary relevance), and the share of the gold documents' answer
words that reach the model in the rendered "[Knowledge]" section."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from episodic.domain.text_analysis import terms

NDCG_AT = 10
RECALL_AT = 5
OVERALL = "overall"


def documents_ranked(document_ids: Iterable[str]) -> list[str]:
    """Ranked chunks' document ids as ranked documents: each at its first (best) chunk."""
    return list(dict.fromkeys(document_ids))


def ndcg_at(ranked: Sequence[str], gold: frozenset[str], k: int = NDCG_AT) -> float:
    """Binary-relevance nDCG@k: each gold document in the top k gains 1/log2(rank + 1), over
    the gain of the gold documents ranked first. `ranked` holds each document once."""
    if not gold:
        return 0.0
    gained = sum(1.0 / math.log2(rank + 1) for rank, d in enumerate(ranked[:k], start=1) if d in gold)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(gold), k) + 1))
    return gained / ideal


def recall_at(ranked: Sequence[str], gold: frozenset[str], k: int = RECALL_AT) -> float:
    """The share of the gold documents among the top k."""
    return len(gold & set(ranked[:k])) / len(gold) if gold else 0.0


def answer_words(texts: Iterable[str]) -> set[str]:
    """The content words of the gold documents' texts: lower-cased (folded), stop words out."""
    return {w for text in texts for w in terms(text)}


def answer_coverage(wanted: set[str], rendered: str) -> float:
    """The share of `wanted` words present in the rendered text (0 when nothing is wanted)."""
    return len(wanted & set(terms(rendered))) / len(wanted) if wanted else 0.0


def rendered_bodies(content: str, spans: Iterable[tuple[int, int]]) -> str:
    """The items' rendered texts within the section's content (the report's spans), without
    its header and "Source:" lines: what coverage reads."""
    return "\n".join(content[start:end] for start, end in spans if end > start)


@dataclass
class Ranks:
    """Sums over questions; `means()` gives nDCG@10 and R@5."""

    count: int = 0
    ndcg: float = 0.0
    recall: float = 0.0

    def add(self, ranked: Sequence[str], gold: frozenset[str]) -> None:
        self.count += 1
        self.ndcg += ndcg_at(ranked, gold)
        self.recall += recall_at(ranked, gold)

    def means(self) -> tuple[float, float]:
        n = max(self.count, 1)
        return self.ndcg / n, self.recall / n


@dataclass
class RankingReport:
    """Ranks per method and group (each conversation, and "overall"), query latencies."""

    by_method: dict[str, dict[str, Ranks]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(Ranks))
    )
    seconds: dict[str, list[float]] = field(default_factory=dict)

    def add(self, method: str, group: str, ranked: Sequence[str], gold: frozenset[str]) -> None:
        self.by_method[method][group].add(ranked, gold)
        self.by_method[method][OVERALL].add(ranked, gold)

    def timed(self, method: str, seconds: float) -> None:
        self.seconds.setdefault(method, []).append(seconds)

    def overall(self, method: str) -> tuple[float, float]:
        return self.by_method[method][OVERALL].means()

    def table(self) -> str:
        lines = [f"{'method':<10} {'group':<10} {'n':>4}  nDCG@{NDCG_AT}  R@{RECALL_AT}"]
        for method, groups in self.by_method.items():
            for group in sorted(groups, key=lambda g: (g == OVERALL, g)):
                r = groups[group]
                ndcg, recall = r.means()
                lines.append(f"{method:<10} {group:<10} {r.count:>4}  {ndcg:>7.3f}  {recall:.3f}")
        return "\n".join(lines)

    def latencies(self) -> str:
        """Per method, the query's p50 and p99 in ms: SearchKnowledge round trips on loopback
        for the server's modes, the in-process scoring for bm25 (no server, no network)."""
        lines = [f"{'method':<10} query ms  p50     p99"]
        for method, seconds in self.seconds.items():
            ordered = sorted(seconds)
            p50, p99 = (ordered[min(int(q * len(ordered)), len(ordered) - 1)] * 1000 for q in (0.5, 0.99))
            lines.append(f"{method:<10}          {p50:6.2f}  {p99:6.2f}")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Seen:
    """What one BuildContext rendered of a question's gold documents."""

    coverage: float  # the share of the gold answer words in the rendered items' texts
    gold_rendered: bool  # a gold document's chunk was rendered (whole or trimmed)
    rendered_items: int
    tokens: int  # the section's tokens


@dataclass
class SeenReport:
    """What reached the model, per group (each conversation, and "overall")."""

    by_group: dict[str, list[Seen]] = field(default_factory=lambda: defaultdict(list))

    def add(self, group: str, seen: Seen) -> None:
        self.by_group[group].append(seen)
        self.by_group[OVERALL].append(seen)

    def overall_coverage(self) -> float:
        return _mean([s.coverage for s in self.by_group[OVERALL]])

    def table(self) -> str:
        lines = [f"{'group':<10} {'n':>4}  answer words  gold rendered  items  tokens"]
        for group in sorted(self.by_group, key=lambda g: (g == OVERALL, g)):
            seen = self.by_group[group]
            lines.append(
                f"{group:<10} {len(seen):>4}  {_mean([s.coverage for s in seen]):>12.3f}  "
                f"{_mean([float(s.gold_rendered) for s in seen]):>13.3f}  "
                f"{_mean([float(s.rendered_items) for s in seen]):>5.1f}  "
                f"{_mean([float(s.tokens) for s in seen]):>6.0f}"
            )
        return "\n".join(lines)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
