"""Answer-word coverage of a text, and the per-category figures of `eval-recall
--what-the-model-sees`. Answers and texts are read the same way: lower-case words without
the summarizer's stop words."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from episodic.summarize.text import STOPWORDS
from episodic_lab.evals.bm25 import tokens

# LoCoMo categories 1, 2 and 4 have a checkable gold answer; 3 (open-domain) asks for
# inference and 5 (adversarial) has none, so coverage leaves them out.
ANSWERABLE = frozenset({"1", "2", "4", "multi-hop", "temporal", "single-hop"})
COVERED_AT = 0.5
METHODS = ("rendered", "bm25_raw", "ceiling")


def words(text: str) -> set[str]:
    return {w for w in tokens(text) if w not in STOPWORDS}


def coverage(answer_words: set[str], text: str) -> float:
    """The share of the answer's words present in text."""
    return len(answer_words & words(text)) / len(answer_words) if answer_words else 0.0


@dataclass(frozen=True, slots=True)
class Asked:
    """One question's outcome. `coverage` is empty when the question is not answerable."""

    question_id: str
    category: str
    evidence_rendered: bool
    recall_tokens: int
    recall_chars: int
    coverage: dict[str, float]


def percentile(values: Sequence[int], p: float) -> float:
    """Nearest rank."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[max(math.ceil(p * len(ordered)) - 1, 0)])


@dataclass(frozen=True, slots=True)
class Cover:
    mean: float
    covered: float  # the share of questions covered at >= COVERED_AT


@dataclass(frozen=True, slots=True)
class Summary:
    questions: int
    evidence_rendered: float
    answerable: int
    coverage: dict[str, Cover | None]  # by method; None when no question is answerable
    recall_tokens_mean: float
    recall_tokens_p50: float
    recall_tokens_p90: float


def summarize(asked: Sequence[Asked]) -> Summary:
    n = max(len(asked), 1)
    scored = [a for a in asked if a.coverage]
    spent = [a.recall_tokens for a in asked]
    cover: dict[str, Cover | None] = {}
    for method in METHODS:
        values = [a.coverage[method] for a in scored]
        covered = sum(v >= COVERED_AT for v in values)
        cover[method] = Cover(sum(values) / len(values), covered / len(values)) if values else None
    return Summary(
        questions=len(asked),
        evidence_rendered=sum(a.evidence_rendered for a in asked) / n,
        answerable=len(scored),
        coverage=cover,
        recall_tokens_mean=sum(spent) / n,
        recall_tokens_p50=percentile(spent, 0.5),
        recall_tokens_p90=percentile(spent, 0.9),
    )


@dataclass
class ContextReport:
    """Outcomes per category ("overall" included)."""

    by_category: dict[str, list[Asked]] = field(default_factory=lambda: defaultdict(list))

    def add(self, asked: Asked) -> None:
        self.by_category[asked.category].append(asked)
        self.by_category["overall"].append(asked)

    def summaries(self) -> dict[str, Summary]:
        order = sorted(self.by_category, key=lambda c: (c == "overall", c))
        return {c: summarize(self.by_category[c]) for c in order}

    def table(self) -> str:
        head = f"{'category':<12} {'n':>4} {'evid.rend':>9} {'n cov':>5}"
        for method in ("rendered", "bm25@chars", "ceiling"):
            head += f" | {method:>10} mean  >=.5"
        lines = [head + " | recall tokens mean   p50   p90"]
        for category, s in self.summaries().items():
            row = f"{category:<12} {s.questions:>4} {s.evidence_rendered:>9.3f} {s.answerable:>5}"
            for method in METHODS:
                c = s.coverage[method]
                row += f" | {c.mean:>15.3f} {c.covered:>5.3f}" if c else f" | {'-':>15} {'-':>5}"
            row += f" | {s.recall_tokens_mean:>18.0f} {s.recall_tokens_p50:>5.0f} {s.recall_tokens_p90:>5.0f}"
            lines.append(row)
        return "\n".join(lines)
