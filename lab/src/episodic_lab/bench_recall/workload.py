"""What the client sends: Echo (the baseline, with a short chat turn's bytes) and
SearchEpisodes in each mode, top_k 5, each call for a random user with a query of a few
words drawn like the corpus's (HYBRID also with rare words only, to show what the common
ones cost the lexical leg). Users and queries are drawn before timing starts."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from episodic.domain.recall import Scope, SearchMode
from episodic_client import AsyncEpisodicClient
from episodic_client.v1 import episode_service_pb2
from episodic_lab.bench.workloads import ECHO_PAYLOAD
from episodic_lab.bench_recall import BenchRecallError
from episodic_lab.bench_recall.latency import AsyncCall
from episodic_lab.bench_recall.layout import Layout
from episodic_lab.bench_recall.words import Lexicon

TOP_K = 5


@dataclass(frozen=True, slots=True)
class Variant:
    """A mode, and whether its queries leave the common words out."""

    mode: SearchMode
    rare_words: bool = False

    @property
    def label(self) -> str:
        return self.mode.value + (", rare words" if self.rare_words else "")


VARIANTS = (
    Variant(SearchMode.SEMANTIC),
    Variant(SearchMode.HYBRID),
    Variant(SearchMode.HYBRID, rare_words=True),
    Variant(SearchMode.RECENCY),
)


@dataclass(frozen=True, slots=True)
class Draws:
    """The user and the query of call number i (warm-up calls included)."""

    layout: Layout
    users: tuple[int, ...]
    queries: tuple[str, ...]
    rare_queries: tuple[str, ...]

    @classmethod
    def of(cls, layout: Layout, lexicon: Lexicon, count: int, seed: int) -> Draws:
        rng = np.random.default_rng(seed)
        users = tuple(rng.integers(0, layout.users, count).tolist())
        queries = tuple(lexicon.query(rng) for _ in range(count))
        return cls(layout, users, queries, tuple(lexicon.query(rng, rare=True) for _ in range(count)))

    def scope(self, number: int) -> Scope:
        return self.layout.scope(self.users[number % len(self.users)])

    def query(self, number: int, rare_words: bool = False) -> str:
        queries = self.rare_queries if rare_words else self.queries
        return queries[number % len(queries)]


def echo_call(client: AsyncEpisodicClient) -> AsyncCall:
    async def call(_number: int) -> object:
        return await client.echo(ECHO_PAYLOAD)

    return call


def search_call(client: AsyncEpisodicClient, draws: Draws, variant: Variant) -> AsyncCall:
    async def call(number: int) -> object:
        return await search(client, draws, variant, number)

    return call


async def search(
    client: AsyncEpisodicClient, draws: Draws, variant: Variant, number: int
) -> episode_service_pb2.SearchEpisodesResponse:
    """Call number i's search; the mode travels by its short name ("hybrid"), as the client takes it."""
    scope, query = draws.scope(number), draws.query(number, variant.rare_words)
    return await client.search_episodes(
        scope.agent_id, scope.user_id, query, mode=variant.mode.value, top_k=TOP_K
    )


async def check_answers(client: AsyncEpisodicClient, draws: Draws) -> None:
    """Every mode must find episodes in the corpus as built: a bench of empty answers
    (times stored in a format reads do not match, say) would measure nothing."""
    for variant in VARIANTS:
        response = await search(client, draws, variant, 0)
        wanted = min(TOP_K, len(draws.layout.episodes_of(draws.users[0])))
        if len(response.snippets) != wanted or response.pending_digests:
            raise BenchRecallError(
                f"{variant.label} search found {len(response.snippets)} episodes (wanted {wanted}) "
                f"and {response.pending_digests} pending digests"
            )
