"""While a turn's query is still being embedded, "[Known Facts]" reads the user's profile
(which needs no vector) before its match waits for the vector; what it renders is the same,
and profile memories are noted as recalled only when the turn uses the profile."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from episodic.domain.memories import Memory, MemoryHit, MemoryKind, MemoryOrigin, MemoryState, Source
from episodic.domain.model import MemoryConfig
from episodic.domain.recall import Scope, SearchMode, Vector
from episodic.service.memory_search import MemoryQuery
from episodic.service.turn_searches import TurnQuery, TurnSearches

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def memory(n: int) -> Memory:
    return Memory(
        "t", f"m{n}", "a", "u", f"The user likes tea number {n}.", MemoryKind.PREFERENCE,
        Source(MemoryOrigin.EXTRACTED), MemoryState.PROMOTED, T0, T0,
    )  # fmt: skip


class Ranking:
    """Memories matched by meaning (`matches` of them) and the profile; records what it was asked."""

    def __init__(self, matches: int) -> None:
        self.matches = matches
        self.asked: list[tuple[SearchMode, bool]] = []  # (mode, marked)
        self.marked: list[str] = []

    async def ranked(
        self,
        scope: Scope,
        q: MemoryQuery,
        mode: SearchMode,
        top_k: int,
        batch: Any = None,
        *,
        mark: bool = True,
    ) -> list[MemoryHit]:
        self.asked.append((mode, mark))
        if mode is SearchMode.RECENCY:
            hits = [MemoryHit(memory(100 + i), 0.0) for i in range(top_k)]
        else:
            hits = [MemoryHit(memory(i), 0.9) for i in range(min(self.matches, top_k))]
        if mark:
            self.marked += [h.memory.memory_id for h in hits]
        return hits

    async def recalled(self, scope: Scope, hits: Sequence[MemoryHit]) -> None:
        self.marked += [h.memory.memory_id for h in hits]

    def may_find_by_meaning(self, scope: Scope) -> bool:
        return True


class Queries:
    def __init__(self, embedding: bool) -> None:
        self.embedding = embedding

    def prefetch(self, text: str, tenant_id: str = "") -> None:
        return None

    def under_way(self, text: str) -> bool:
        return self.embedding

    async def of(self, text: str, tenant_id: str = "") -> Vector:
        return [1.0]


async def known_facts(matches: int, embedding: bool) -> tuple[list[str], Ranking]:
    ranking = Ranking(matches)
    unused: Any = None  # the parts known facts does not touch
    searches = TurnSearches(
        past=unused, memo=unused, transcripts=unused, memories=ranking, memory_store=unused,
        sessions=unused, queries=Queries(embedding), knowledge=unused, reads=unused, earlier=unused,
    )  # fmt: skip
    ws = SimpleNamespace(episode=SimpleNamespace(tenant_id="t", agent_id="a", user_id="u", episode_id="ep"))
    config = MemoryConfig(memory_top_k=3)
    q = TurnQuery.of("", "What tea do I like?")
    facts = await searches._known_facts(ws, config, q, [], None)  # type: ignore[arg-type]
    return [f.memory_id for f in facts], ranking


@pytest.mark.parametrize("matches", [0, 1, 3])
async def test_reading_the_profile_while_the_query_embeds_renders_the_same_facts(matches: int) -> None:
    early, _ = await known_facts(matches, embedding=True)
    late, _ = await known_facts(matches, embedding=False)
    assert early == late


async def test_a_profile_read_early_and_used_is_noted_as_recalled_once() -> None:
    facts, ranking = await known_facts(1, embedding=True)
    assert ranking.asked == [(SearchMode.RECENCY, False), (SearchMode.HYBRID, True)]
    assert ranking.marked == ["m0"] + [f"m{100 + i}" for i in range(12)]
    assert facts[0] == "m0" and len(facts) == 3


async def test_a_profile_read_early_but_not_needed_is_never_noted_as_recalled() -> None:
    _, ranking = await known_facts(3, embedding=True)
    assert ranking.asked == [(SearchMode.RECENCY, False), (SearchMode.HYBRID, True)]
    assert ranking.marked == ["m0", "m1", "m2"]


async def test_with_the_vector_ready_the_profile_is_read_only_when_the_match_leaves_room() -> None:
    _, full = await known_facts(3, embedding=False)
    _, short = await known_facts(1, embedding=False)
    assert full.asked == [(SearchMode.HYBRID, True)]
    assert short.asked == [(SearchMode.HYBRID, True), (SearchMode.RECENCY, True)]
