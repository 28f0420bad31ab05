"""A plain Okapi BM25 over raw session text: the baseline recall must beat."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class Bm25:
    def __init__(self, documents: Sequence[str], k1: float = 1.5, b: float = 0.75) -> None:
        self._docs = [Counter(tokens(d)) for d in documents]
        self._lengths = [sum(d.values()) for d in self._docs]
        self._average = sum(self._lengths) / max(len(self._docs), 1)
        frequency = Counter(term for d in self._docs for term in d)
        n = len(self._docs)
        self._idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in frequency.items()}
        self._k1, self._b = k1, b

    def scores(self, query: str) -> list[float]:
        terms = tokens(query)
        return [
            self._score(doc, length, terms) for doc, length in zip(self._docs, self._lengths, strict=True)
        ]

    def _score(self, doc: Counter[str], length: int, terms: list[str]) -> float:
        norm = self._k1 * (1 - self._b + self._b * length / self._average)
        return sum(
            self._idf.get(t, 0.0) * doc[t] * (self._k1 + 1) / (doc[t] + norm) for t in terms if t in doc
        )
