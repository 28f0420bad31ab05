"""Values of recall: episode digests, search requests and the snippets they return,
and the rank fusion of HYBRID search. Pure."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple


class DigestState(enum.StrEnum):
    PENDING = "pending"
    READY = "ready"
    FAILED = "failed"


class SearchMode(enum.StrEnum):
    RECENCY = "recency"
    SEMANTIC = "semantic"
    HYBRID = "hybrid"


class Signal(enum.StrEnum):
    """Which signal matched an episode."""

    RECENCY = "recency"
    SEMANTIC = "semantic"
    LEXICAL = "lexical"


@dataclass(frozen=True, slots=True)
class DigestText:
    """What a summarizer produces for one episode."""

    summary: str
    key_facts: tuple[str, ...] = ()


class Scope(NamedTuple):
    """The unit of isolation of recall: one user of one agent of one tenant. Every
    vector lives in exactly one scope's index. A named tuple: it keys most caches of a
    turn, and hashes without a Python call."""

    tenant_id: str
    agent_id: str
    user_id: str


Vector = Sequence[float]  # adapters pass numpy arrays through unchanged


def vector_key(episode_id: str, chunk: int) -> str:
    return f"{episode_id}#{chunk}"


def episode_of(key: str) -> str:
    return key.rpartition("#")[0]


@dataclass(frozen=True, slots=True)
class Hit:
    """One ranked candidate from one signal: higher score is better."""

    episode_id: str
    score: float


@dataclass(frozen=True, slots=True)
class Snippet:
    episode_id: str
    started_at: datetime
    ended_at: datetime | None
    summary: str
    key_facts: tuple[str, ...]
    score: float
    signals: tuple[Signal, ...] = field(default_factory=tuple)
    excerpts: tuple[str, ...] = ()  # verbatim messages that matched this turn's query, in order


RRF_K = 10  # measured better than the customary 60 on LoCoMo dev (few candidates per scope)


def reciprocal_rank_fusion(
    rankings: Mapping[Signal, Sequence[Hit]],
    k: int = RRF_K,
    limit: int | None = None,
    weights: Mapping[Signal, float] | None = None,
) -> list[tuple[Hit, tuple[Signal, ...]]]:
    """Fuses ranked lists: score = sum of weight/(k + rank) over the lists an episode is in
    (`weights` per signal, 1 for those it leaves out), best first, ties by key. With `limit`,
    the first `limit` of them: a large agent's knowledge search fuses ~100 candidates for 5
    hits, and a Hit for each was half of the fusion's time (~140 -> ~60 µs with the native
    sort below)."""
    scores: dict[str, float] = {}
    signals: dict[str, tuple[Signal, ...]] = {}
    for signal, hits in rankings.items():
        weight = 1.0 if weights is None else weights.get(signal, 1.0)
        for rank, hit in enumerate(hits, start=k + 1):
            key = hit.episode_id
            if key in scores:
                scores[key] += weight / rank
                signals[key] += (signal,)
            else:
                scores[key] = weight / rank
                signals[key] = (signal,)
    fused = sorted([(-score, key) for key, score in scores.items()])  # best first, ties by key
    return [(Hit(key, -negated), signals[key]) for negated, key in fused[:limit]]


def fuse_with_passages(
    rankings: Mapping[Signal, Sequence[Hit]],
    passages: Mapping[str, float],
    k: int = RRF_K,
    weights: Mapping[Signal, float] | None = None,
) -> list[tuple[Hit, tuple[Signal, ...]]]:
    """`reciprocal_rank_fusion` with one more ranking: the best-passage scores of the fused
    head's episodes (those whose messages were read). An episode whose passage matched counts
    as a lexical match."""
    matched = sorted(((e, x) for e, x in passages.items() if x > 0), key=lambda p: (-p[1], p[0]))
    extra = _rrf_scores([[Hit(e, x) for e, x in matched]], k)
    rescored = [
        (
            Hit(hit.episode_id, hit.score + extra.get(hit.episode_id, 0.0)),
            _with_lexical(s, hit.episode_id in extra),
        )
        for hit, s in reciprocal_rank_fusion(rankings, k, weights=weights)
    ]
    return sorted(rescored, key=lambda pair: (-pair[0].score, pair[0].episode_id))


def _with_lexical(signals: tuple[Signal, ...], matched: bool) -> tuple[Signal, ...]:
    return (*signals, Signal.LEXICAL) if matched and Signal.LEXICAL not in signals else signals


def _rrf_scores(rankings: Iterable[Sequence[Hit]], k: int) -> dict[str, float]:
    scores: dict[str, float] = {}
    for hits in rankings:
        for rank, hit in enumerate(hits, start=1):
            scores[hit.episode_id] = scores.get(hit.episode_id, 0.0) + 1.0 / (k + rank)
    return scores


@dataclass(frozen=True, slots=True)
class Digest:
    """The recall record of one closed episode."""

    tenant_id: str
    episode_id: str
    agent_id: str
    user_id: str
    state: DigestState
    started_at: datetime
    ended_at: datetime
    updated_at: datetime
    next_attempt_at: datetime
    summary: str = ""
    key_facts: tuple[str, ...] = ()
    embedding_model: str = ""
    attempts: int = 0
    last_error: str = ""

    @property
    def scope(self) -> Scope:
        return Scope(self.tenant_id, self.agent_id, self.user_id)
