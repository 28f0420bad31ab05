"""Where a search's time goes: each step SearchEpisodes takes, called directly in this
process (no gRPC, no thread hop for the sync steps), with the same draws of users and
queries as the RPCs. Also how many texts of ALL users a lexical query matches: FTS5 finds
matches first and filters by user after, so that count, not the user's own episode count,
is what the lexical leg pays for."""

from __future__ import annotations

import statistics
from collections.abc import Awaitable
from dataclasses import dataclass

from sqlalchemy import text

from episodic.service.recall import CHUNKS_PER_EPISODE, SearchRequest
from episodic.store import lexical
from episodic_lab.bench_recall.inprocess import InProcessServer
from episodic_lab.bench_recall.latency import AsyncCall, Budget, Figures, SyncCall, timed, timed_sync
from episodic_lab.bench_recall.workload import TOP_K, VARIANTS, Draws, Variant

SEMANTIC_CANDIDATES = TOP_K * CHUNKS_PER_EPISODE  # what RecallService asks the index for
LEXICAL_CANDIDATES = TOP_K * 2
MATCH_COUNT_QUERIES = 20
_COUNT_MATCHES = text("SELECT count(*) FROM digest_fts WHERE digest_fts MATCH :q")


@dataclass(frozen=True, slots=True)
class Stage:
    name: str
    figures: Figures


@dataclass(frozen=True, slots=True)
class MatchCounts:
    """Texts of all users matched by one query (the median and the largest of a sample)."""

    queries: int
    median: float
    largest: int


async def stage_figures(server: InProcessServer, draws: Draws, budget: Budget) -> list[Stage]:
    found: list[Stage] = []
    for name, sync_call in _sync_steps(server, draws).items():
        found.append(Stage(name, await timed_sync(sync_call, budget)))
    for name, async_call in _async_steps(server, draws).items():
        found.append(Stage(name, await timed(async_call, budget)))
    return found


def _sync_steps(server: InProcessServer, draws: Draws) -> dict[str, SyncCall]:
    recall = server.services.recall
    queries = [vector for (vector,) in (recall.embedder.embed([q]) for q in draws.queries)]
    return {
        "embed query (hashing)": lambda n: recall.embedder.embed([draws.query(n)]),
        f"index.search k={SEMANTIC_CANDIDATES}": lambda n: recall.index.search(
            draws.scope(n), queries[n % len(queries)], SEMANTIC_CANDIDATES
        ),
    }


def _async_steps(server: InProcessServer, draws: Draws) -> dict[str, AsyncCall]:
    recall, caller = server.services.recall, server.caller
    digests, agents = recall.digests, recall.agents
    layout = draws.layout

    def candidates(n: int) -> list[str]:
        episodes = layout.episodes_of(draws.users[n % len(draws.users)])
        return [layout.episode_id(e) for e in episodes[:SEMANTIC_CANDIDATES]]

    steps: dict[str, AsyncCall] = {
        "get_agent": lambda n: agents.get_agent(caller.tenant_id, layout.agent_id),
        f"lexical k={LEXICAL_CANDIDATES}": lambda n: digests.lexical(
            draws.scope(n), draws.query(n), LEXICAL_CANDIDATES
        ),
        f"lexical k={LEXICAL_CANDIDATES}, rare words": lambda n: digests.lexical(
            draws.scope(n), draws.query(n, rare_words=True), LEXICAL_CANDIDATES
        ),
        f"ready_among (<={SEMANTIC_CANDIDATES} ids)": lambda n: digests.ready_among(
            draws.scope(n), candidates(n), None, None
        ),
        f"recent k={TOP_K}": lambda n: digests.recent(draws.scope(n), TOP_K, None, None),
        "pending_count": lambda n: digests.pending_count(draws.scope(n)),
    }
    for variant in VARIANTS:
        steps[f"RecallService.search {variant.label}"] = _service_search(server, draws, variant)
    return steps


def _service_search(server: InProcessServer, draws: Draws, variant: Variant) -> AsyncCall:
    search = server.services.recall.search

    def call(n: int) -> Awaitable[object]:
        scope = draws.scope(n)
        query = draws.query(n, variant.rare_words)
        return search(server.caller, SearchRequest(scope.agent_id, scope.user_id, variant.mode, query, TOP_K))

    return call


async def match_counts(server: InProcessServer, draws: Draws, rare_words: bool = False) -> MatchCounts:
    sample = (draws.rare_queries if rare_words else draws.queries)[:MATCH_COUNT_QUERIES]
    counts = []
    async with server.database.engine.connect() as conn:
        for query in sample:
            expression = " OR ".join(f'"{w}"' for w in lexical.terms(query))  # as lexical.search
            counts.append(int(await conn.scalar(_COUNT_MATCHES, {"q": expression}) or 0))
    return MatchCounts(len(counts), statistics.median(counts), max(counts))
