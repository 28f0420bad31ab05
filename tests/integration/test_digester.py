"""The digester: resumable from SQL, retries failures visibly, and the index it feeds
can always be loaded again from SQL; the idle reaper closes forgotten episodes."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update

from episodic.domain import digests as rules
from episodic.domain.model import CloseReason, EpisodeState, NewMessage, Role
from episodic.domain.recall import DigestState, Scope
from episodic.embed import make_embedder
from episodic.index import FaissVectorIndex
from episodic.state.index_cache import ResidentScopes, WholeIndex
from episodic.state.visibility import Visibility
from episodic.store import schema
from episodic.store.digests import SqlDigestStore
from episodic.store.episodes import SqlEpisodeStore
from episodic.store.vector_sources import SqlDigestVectors, SqlMemoryVectors
from episodic.summarize import make_summarizer
from episodic.workers.digester import Digester, DigestPace
from episodic.workers.reaper import IdleReaper
from tests.conftest import unique
from tests.integration.conftest import Stack


class HashingDouble:
    """Embeds like the hashing embedder; subclasses add what a test needs around it."""

    def __init__(self) -> None:
        self._inner = make_embedder("hashing")

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def dimension(self) -> int:
        return self._inner.dimension


class FlakyEmbedder(HashingDouble):
    """Fails the first `failures` calls that embed `marker`, then embeds like the hashing
    embedder (other tests' digests may pass through: the digester serves every tenant)."""

    def __init__(self, failures: int, marker: str) -> None:
        super().__init__()
        self.failures = failures
        self.marker = marker

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.failures > 0 and any(self.marker in t for t in texts):
            self.failures -= 1
            raise ConnectionError("embedding endpoint unreachable")
        return self._inner.embed(texts)


def digester_for(
    stack: Stack, embedder: object, now: datetime, index: FaissVectorIndex | None = None
) -> Digester:
    """A digester of its own "process": its own index, behind its own change owner."""
    return Digester(
        store=SqlDigestStore(stack.database, stack.writer),
        summarizer=make_summarizer("extractive"),
        embedder=embedder,  # type: ignore[arg-type]
        changes=Visibility(index=WholeIndex(index if index is not None else FaissVectorIndex(256))),
        clock=lambda: now,
    )


async def closed_episode(stack: Stack, marker: str = "Porto") -> tuple[str, Scope]:
    episode_id = await stack.new_episode()
    episodes = stack.services.episodes
    await episodes.add_message(
        stack.caller, episode_id, NewMessage(Role.USER, f"I moved to {marker} in June")
    )
    episode = await episodes.close_episode(stack.caller, episode_id)
    return episode_id, Scope(stack.caller.tenant_id, episode.agent_id, episode.user_id)


async def test_a_failing_digest_is_retried_with_back_off_and_shows_failed(stack: Stack) -> None:
    marker = unique("Atlantis")
    episode_id, _ = await closed_episode(stack, marker)
    now = datetime.now(UTC) + timedelta(seconds=1)
    embedder = FlakyEmbedder(failures=3, marker=marker)
    states = []
    for attempt in range(4):
        await back_off_elapsed(stack, episode_id)
        digester = digester_for(stack, embedder, now + timedelta(minutes=15 * attempt))
        await digester.run_once()
        digest = await digester.store.get(stack.caller.tenant_id, episode_id)
        assert digest is not None
        states.append((digest.state, digest.attempts))
    assert states == [
        (DigestState.PENDING, 1),
        (DigestState.PENDING, 2),
        (DigestState.FAILED, 3),
        (DigestState.READY, 4),
    ]


async def back_off_elapsed(stack: Stack, episode_id: str) -> None:
    """Makes the digest due: on PostgreSQL due times count on the database's clock (so
    replicas' clocks cannot disagree about them), which a test cannot move forward."""
    d = schema.digests
    stmt = update(d).where(d.c.tenant_id == stack.caller.tenant_id, d.c.episode_id == episode_id)
    past = stmt.values(next_attempt_at=datetime.now(UTC) - timedelta(seconds=1))
    await stack.writer.run(lambda conn: conn.execute(past))


async def test_pending_digests_survive_a_restart_and_the_index_is_rebuilt_from_sql(stack: Stack) -> None:
    episode_id, scope = await closed_episode(stack)
    now = datetime.now(UTC) + timedelta(seconds=1)
    index = FaissVectorIndex(256)
    first = digester_for(stack, make_embedder("hashing"), now, index)  # a "process" that digests, then dies
    assert await first.run_once() >= 1
    source = SqlDigestVectors(stack.database, "hashing-256")
    restarted = ResidentScopes(
        FaissVectorIndex(256), source, dimension=256, max_bytes=1 << 30, lock=asyncio.Lock()
    )
    await restarted.ensure(scope)  # a new process loads the scope from SQL on first use
    assert len(restarted.keys(scope)) >= 1 and restarted.keys(scope) == index.keys(scope)
    assert {k.rpartition("#")[0] for k in restarted.keys(scope)} == {episode_id}


async def test_a_scopes_digest_vectors_read_in_pages_are_the_whole_scope(stack: Stack) -> None:
    """How a scope too large for the index cache is searched (state/index_cache.py)."""
    _episode_id, scope = await closed_episode(stack)
    digester = digester_for(stack, make_embedder("hashing"), datetime.now(UTC) + timedelta(seconds=1))
    assert await digester.run_once() >= 1
    source = SqlDigestVectors(stack.database, "hashing-256")
    whole, _ = await source.scope_vectors(scope)
    paged: list[str] = []
    after = ""
    while True:
        keys, vectors = await source.scope_vector_page(scope, after, 1)
        assert len(keys) == len(vectors) <= 1
        paged += keys
        if not keys:
            break
        after = keys[-1]
    assert whole and sorted(paged) == sorted(whole) and len(set(paged)) == len(paged)
    upto, _ = await source.scope_vectors_upto(scope, len(whole) + 1)
    assert sorted(upto) == sorted(whole) and len((await source.scope_vectors_upto(scope, 1))[0]) == 1
    memories = SqlMemoryVectors(stack.database, "hashing-256")
    assert await memories.scope_vector_page(scope, "", 10) == ([], [])
    assert await memories.scope_vector_page(scope, "m-1", 10) == ([], [])
    assert await memories.scope_vectors_upto(scope, 10) == ([], [])


async def test_a_claimed_digest_is_not_taken_twice_while_its_lease_runs(stack: Stack) -> None:
    await closed_episode(stack)
    store = SqlDigestStore(stack.database, stack.writer)
    now = datetime.now(UTC) + timedelta(seconds=1)
    first = await store.claim_due(now, 10, timedelta(minutes=5))
    again = await store.claim_due(now, 10, timedelta(minutes=5))
    assert len(first) >= 1 and not {d.episode_id for d in first} & {d.episode_id for d in again}


async def test_idle_episodes_are_closed_with_reason_idle_timeout(stack: Stack) -> None:
    idle_id = await stack.new_episode()
    episodes = SqlEpisodeStore(stack.database, stack.writer, lambda: datetime.now(UTC))
    later = datetime.now(UTC) + timedelta(hours=2)  # past the default 30 min idle timeout
    woken: list[bool] = []
    reaper = IdleReaper(
        episodes=episodes,
        service=stack.services.episodes,
        clock=lambda: later,
        on_closed=lambda: woken.append(True),
    )
    assert await reaper.sweep() >= 1
    episode = await stack.services.episodes.get_episode(stack.caller, idle_id)
    assert episode.state is EpisodeState.CLOSED and episode.close_reason is CloseReason.IDLE_TIMEOUT
    assert episode.ended_at == episode.last_activity_at and woken
    assert episode.digest is not None and episode.digest.state is DigestState.PENDING


async def test_search_while_digests_are_pending_returns_only_ready_ones_and_says_so(stack: Stack) -> None:
    from episodic.domain.recall import SearchMode
    from episodic.service.recall import SearchRequest

    _episode_id, scope = await closed_episode(stack)  # nothing digests it: no digester runs here
    request = SearchRequest(scope.agent_id, scope.user_id, SearchMode.HYBRID, "Porto")
    result = await stack.services.recall.search(stack.caller, request)
    assert result.snippets == [] and result.pending_digests == 1


async def test_vectors_of_an_old_model_are_re_embedded_with_the_new_one(fresh_stack: Stack) -> None:
    stack = fresh_stack  # re-embedding serves every tenant: on a database of its own
    marker = unique("Ithaca")
    episode_id, scope = await closed_episode(stack, marker)
    now = datetime.now(UTC) + timedelta(seconds=1)
    await digester_for(stack, make_embedder("hashing"), now).run_once()

    class RenamedModel(FlakyEmbedder):
        @property
        def model_id(self) -> str:
            return "hashing-256-v2"

    index = FaissVectorIndex(256)
    upgraded = digester_for(stack, RenamedModel(0, marker), now, index)
    while await upgraded.run_once():
        pass
    digest = await upgraded.store.get(stack.caller.tenant_id, episode_id)
    assert digest is not None and digest.embedding_model == "hashing-256-v2"
    assert digest.state is DigestState.READY and index.keys(scope)


async def test_a_new_index_recipe_re_embeds_digests_made_with_the_old_one(
    fresh_stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = fresh_stack  # re-embedding serves every tenant: on a database of its own
    marker = unique("Knossos")
    episode_id, scope = await closed_episode(stack, marker)
    now = datetime.now(UTC) + timedelta(seconds=1)
    await digester_for(stack, make_embedder("hashing"), now).run_once()
    before = await digester_for(stack, None, now).store.get(stack.caller.tenant_id, episode_id)
    assert before is not None and before.embedding_model == "hashing-256"

    monkeypatch.setattr(rules, "INDEX_RECIPE", rules.INDEX_RECIPE + 1)
    index = FaissVectorIndex(256)
    upgraded = digester_for(stack, make_embedder("hashing"), now, index)
    assert await upgraded.store.count_stale(rules.indexed_with("hashing-256")) >= 1
    while await upgraded.run_once():
        pass
    digest = await upgraded.store.get(stack.caller.tenant_id, episode_id)
    assert digest is not None and digest.embedding_model == f"hashing-256+index.{rules.INDEX_RECIPE}"
    assert digest.summary == before.summary and index.keys(scope)  # the summary is kept


class RendezvousEmbedder(HashingDouble):
    """Embeds like the hashing embedder, but each call waits (up to 5 s) until `together`
    calls are in flight: it finishes quickly only if the digester embeds that many at once."""

    def __init__(self, together: int) -> None:
        super().__init__()
        self._barrier = threading.Barrier(together)
        self.met = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        with contextlib.suppress(threading.BrokenBarrierError):
            self._barrier.wait(timeout=5)
            self.met += 1
        return self._inner.embed(texts)


async def test_digest_workers_embed_a_batchs_episodes_side_by_side(stack: Stack) -> None:
    for _ in range(2):
        await closed_episode(stack, unique("Lisbon"))
    embedder = RendezvousEmbedder(together=2)
    digester = digester_for(stack, embedder, datetime.now(UTC) + timedelta(seconds=1))
    digester.pace = DigestPace(workers=2)
    assert await digester.run_once() >= 2
    assert embedder.met >= 2  # two embeddings were in flight at once
