"""Ranking memories: word matches among a candidate pool, cosine of a few unindexed vectors
(an episode's PENDING memories), and the fused order. Pure; linear in the texts ranked."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

from episodic.domain.excerpts import terms
from episodic.domain.recall import Hit, Vector

BM25_K1 = 1.2
BM25_B = 0.75


def word_matches(query: str, texts: Mapping[str, str]) -> list[Hit]:
    """BM25 of each text (by id) against the query's content words, matches only, best first."""
    wanted = set(terms(query))
    if not wanted or not texts:
        return []
    bags = {key: Counter(terms(text)) for key, text in texts.items()}
    mean = sum(sum(b.values()) for b in bags.values()) / len(bags) or 1.0
    frequency = Counter(word for bag in bags.values() for word in wanted & bag.keys())
    hits = []
    for key, bag in bags.items():
        score = sum(
            _term(bag[w], frequency[w], len(bags), sum(bag.values()) / mean) for w in wanted & bag.keys()
        )
        if score > 0:
            hits.append(Hit(key, score))
    return sorted(hits, key=lambda h: (-h.score, h.episode_id))


def _term(count: int, documents_with: int, documents: int, relative_length: float) -> float:
    idf = math.log(1 + (documents - documents_with + 0.5) / (documents_with + 0.5))
    return idf * count * (BM25_K1 + 1) / (count + BM25_K1 * (1 - BM25_B + BM25_B * relative_length))


def cosine_hits(query: Vector, vectors: Mapping[str, Vector]) -> list[Hit]:
    """Cosine similarity to each vector (all unit length, as embedders return them)."""
    hits = [Hit(key, _dot(query, vector)) for key, vector in vectors.items()]
    return sorted(hits, key=lambda h: (-h.score, h.episode_id))


def _dot(a: Vector, b: Vector) -> float:
    return float(sum(x * y for x, y in zip(a, b, strict=False)))


def merged_hits(*rankings: Sequence[Hit]) -> list[Hit]:
    """One ranking of several scored lists on the same scale (a key keeps its best)."""
    best: dict[str, float] = {}
    for hits in rankings:
        for hit in hits:
            best[hit.episode_id] = max(best.get(hit.episode_id, -2.0), hit.score)
    return [Hit(k, s) for k, s in sorted(best.items(), key=lambda item: (-item[1], item[0]))]
