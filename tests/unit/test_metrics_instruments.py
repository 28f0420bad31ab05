"""The metrics instruments, read through the Prometheus exposition they produce: names and
attributes as scraped, scrape-time gauges reading the state when scraped, the digest queue,
one registry per app, no-ops when off, and the events components report."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import ClassVar

import pytest
from prometheus_client.parser import text_string_to_metric_families

from episodic.domain.changes import NO_CHANGES, Declared, Recorded
from episodic.domain.model import Agent, Episode, EpisodeState, MemoryConfig, Message, Role
from episodic.domain.recall import Digest, DigestState, Scope, Vector
from episodic.domain.tail import Tail
from episodic.domain.working_set import WorkingSet
from episodic.errors import Unavailable
from episodic.index import FaissVectorIndex
from episodic.state.index_cache import KEY_OVERHEAD, SCOPE_OVERHEAD, ResidentScopes
from episodic.state.working_set import WorkingSetCache
from episodic.telemetry.metrics import (
    MeteredAccessLog,
    Metrics,
    QueueRow,
    Watched,
    build_metrics,
    disabled_metrics,
    queue_by_state,
)
from episodic.workers.digester import Digester

NOW = datetime(2025, 1, 1, tzinfo=UTC)
ENCODING = "cl100k_base"
ADD_MESSAGE = "/episodic.v1.EpisodeService/AddMessage"


def enabled() -> Metrics:
    return build_metrics("127.0.0.1:0", {})


def scraped(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of one scrape: (name, sorted labels) -> value."""
    text = metrics.exposition()[0].decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return scraped(metrics).get((name, tuple(sorted(labels.items()))))


class RecordedLog:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []
        self.closed = False

    def record(self, method: str, code: str, duration_ms: float, peer: str, trace_id: str = "") -> None:
        self.lines.append((method, code))

    def close(self) -> None:
        self.closed = True


def test_rpcs_are_counted_by_method_and_final_code_and_still_logged() -> None:
    metrics, inner = enabled(), RecordedLog()
    log = MeteredAccessLog(inner, metrics)
    log.record(ADD_MESSAGE, "OK", 2.0, "ipv4:127.0.0.1:1")
    log.record(ADD_MESSAGE, "OK", 4.0, "ipv4:127.0.0.1:1")
    log.record(ADD_MESSAGE, "INVALID_ARGUMENT", 1.0, "ipv4:127.0.0.1:1")
    log.close()

    name = "episodic_rpc_server_duration_seconds"
    ok = {"rpc_method": ADD_MESSAGE.lstrip("/"), "rpc_response_status_code": "OK"}
    refused = {**ok, "rpc_response_status_code": "INVALID_ARGUMENT"}
    assert sample(metrics, f"{name}_count", **ok) == 2
    assert sample(metrics, f"{name}_sum", **ok) == pytest.approx(0.006)
    assert sample(metrics, f"{name}_count", **refused) == 1
    assert inner.lines == [(ADD_MESSAGE, "OK"), (ADD_MESSAGE, "OK"), (ADD_MESSAGE, "INVALID_ARGUMENT")]
    assert inner.closed


def test_each_rendered_section_is_observed_under_its_own_name() -> None:
    metrics = enabled()
    metrics.context_rendered([("system", 12), ("history", 300)])
    metrics.context_rendered([("system", 12)])

    name = "episodic_context_section_tokens"
    assert sample(metrics, f"{name}_count", section="system") == 2
    assert sample(metrics, f"{name}_sum", section="system") == 24
    assert sample(metrics, f"{name}_sum", section="history") == 300
    assert sample(metrics, f"{name}_bucket", section="history", le="256") == 0
    assert sample(metrics, f"{name}_bucket", section="history", le="1024") == 1


def test_recalls_digest_failures_and_writer_batches_are_counted() -> None:
    metrics = enabled()
    metrics.recall_finished("hybrid", 0.02)
    metrics.digest_failed("RuntimeError")
    metrics.digest_failed("RuntimeError")
    metrics.writer_batch(3)
    metrics.writer_batch(5)

    assert sample(metrics, "episodic_recall_duration_seconds_count", episodic_search_mode="hybrid") == 1
    assert sample(metrics, "episodic_digest_failures_total", error_type="RuntimeError") == 2
    assert sample(metrics, "episodic_db_writer_batch_size_count") == 2
    assert sample(metrics, "episodic_db_writer_batch_size_sum") == 8


class FakeWorkingSets:
    def __init__(self) -> None:
        self.total_bytes, self.evictions, self.entries = 0, 0, 0

    def __len__(self) -> int:
        return self.entries


class FakeCache:
    def __init__(self, counts: dict[Scope, int]) -> None:
        self.counts = counts
        self.streamed = 0

    def loaded(self) -> tuple[int, int]:
        return len(self.counts), sum(self.counts.values())


def no_queue() -> Callable[[], Awaitable[Sequence[QueueRow]]]:
    async def read() -> Sequence[QueueRow]:
        return []

    return read


def watched(
    working_sets: FakeWorkingSets,
    cache: FakeCache,
    pools: dict[str, tuple[int, int]],
    queue: Callable[[], Awaitable[Sequence[QueueRow]]] | None = None,
) -> Watched:
    return Watched(
        working_sets=working_sets,
        indexes={"episodes": cache},
        pools=lambda: pools,
        digest_queue=queue or no_queue(),
        clock=lambda: NOW,
        knowledge_cache_bytes=lambda: working_sets.total_bytes // 2,
    )


def test_scrape_time_gauges_read_the_state_when_scraped() -> None:
    metrics, working_sets, pools = enabled(), FakeWorkingSets(), {"main": (0, 2)}
    scopes = {Scope("t", "a", "u1"): 3}
    metrics.watch(watched(working_sets, FakeCache(scopes), pools))
    assert sample(metrics, "episodic_working_set_count") == 0

    working_sets.total_bytes, working_sets.evictions, working_sets.entries = 4096, 2, 7
    scopes[Scope("t", "a", "u2")] = 5
    pools["main"] = (1, 1)

    assert sample(metrics, "episodic_working_set_usage_bytes") == 4096
    assert sample(metrics, "episodic_knowledge_cache_usage_bytes") == 2048
    assert sample(metrics, "episodic_working_set_count") == 7
    assert sample(metrics, "episodic_working_set_evictions_total") == 2
    assert sample(metrics, "episodic_index_scopes", index="episodes") == 2
    assert sample(metrics, "episodic_index_vectors", index="episodes") == 8
    assert sample(metrics, "episodic_index_streamed_searches_total", index="episodes") == 0
    pool = "db_client_connection_pool_name"
    state = "db_client_connection_state"
    assert sample(metrics, "episodic_db_client_connection_count", **{pool: "main", state: "used"}) == 1
    assert sample(metrics, "episodic_db_client_connection_count", **{pool: "main", state: "idle"}) == 1


def test_the_digest_queue_is_read_at_scrape_time_with_both_waiting_states() -> None:
    rows: list[QueueRow] = [("pending", 3, NOW - timedelta(seconds=90))]

    async def queue() -> Sequence[QueueRow]:
        return rows

    metrics = enabled()
    metrics.watch(watched(FakeWorkingSets(), FakeCache({}), {}, queue))
    asyncio.run(metrics.refresh())

    assert sample(metrics, "episodic_digest_queue_depth", state="pending") == 3
    assert sample(metrics, "episodic_digest_queue_depth", state="failed") == 0
    assert sample(metrics, "episodic_digest_queue_oldest_age_seconds", state="pending") == 90
    assert sample(metrics, "episodic_digest_queue_oldest_age_seconds", state="failed") == 0


def test_an_unreadable_digest_queue_is_left_out_rather_than_stale() -> None:
    answers: list[Sequence[QueueRow] | Exception] = [[("pending", 1, NOW)], Unavailable("database down")]

    async def queue() -> Sequence[QueueRow]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    metrics = enabled()
    metrics.watch(watched(FakeWorkingSets(), FakeCache({}), {}, queue))
    asyncio.run(metrics.refresh())
    assert sample(metrics, "episodic_digest_queue_depth", state="pending") == 1
    asyncio.run(metrics.refresh())
    assert sample(metrics, "episodic_digest_queue_depth", state="pending") is None
    assert sample(metrics, "episodic_working_set_count") == 0  # the rest of the scrape stands


def test_queue_ages_never_go_negative_when_clocks_disagree() -> None:
    ahead = NOW + timedelta(seconds=5)  # the closing replica's clock ran ahead of this one's
    assert queue_by_state([("PENDING", 1, ahead)], NOW)["pending"] == (1, 0.0)


def test_apps_in_one_process_keep_their_own_metrics() -> None:
    first, second = enabled(), enabled()
    first.writer_batch(1)
    assert sample(first, "episodic_db_writer_batch_size_count") == 1
    assert sample(second, "episodic_db_writer_batch_size_count") is None
    first.shutdown()
    second.writer_batch(2)
    assert sample(second, "episodic_db_writer_batch_size_count") == 1


def test_without_an_address_metrics_are_no_ops_and_expose_nothing() -> None:
    metrics = build_metrics("", {})
    metrics.rpc_finished(ADD_MESSAGE, "OK", 0.001)
    metrics.context_rendered([("system", 1)])
    metrics.watch(watched(FakeWorkingSets(), FakeCache({}), {}))
    asyncio.run(metrics.refresh())
    assert not metrics.enabled and not disabled_metrics().enabled
    with pytest.raises(RuntimeError, match="metrics are off"):
        metrics.exposition()


def working_set(episode_id: str, messages: int) -> WorkingSet:
    episode = Episode("t", episode_id, "agent", "user", EpisodeState.OPEN, ENCODING, NOW, NOW)
    agent = Agent("t", "agent", "", "", "gpt-4o", ENCODING, False, MemoryConfig(), NOW, NOW)
    tail = [
        Message(episode_id, seq, Role.USER, "x" * 200, 50, ENCODING, NOW) for seq in range(1, messages + 1)
    ]
    return WorkingSet(episode, agent, None, Tail.of(tail))


def test_the_working_set_cache_counts_what_it_evicts_over_its_budget() -> None:
    one = working_set("ep1", 3)
    cache = WorkingSetCache(max_bytes=one.size() + 10)
    cache.put(("t", "ep1"), one)
    cache.put(("t", "ep1"), one)  # a re-insert is no eviction
    assert cache.evictions == 0
    cache.put(("t", "ep2"), working_set("ep2", 3))
    assert cache.evictions == 1
    assert len(cache) == 1


class BrokenTranscripts:
    """A digest store whose transcripts cannot be read; failures are saved."""

    def __init__(self) -> None:
        self.saved: list[Digest] = []

    async def transcript(self, digest: Digest) -> list[Message]:
        raise RuntimeError("the transcript is unreadable")

    async def save_failed(self, digest: Digest, declared: Declared[None]) -> Recorded[None]:
        self.saved.append(digest)
        return Recorded(None, [], in_feed=False)


class CommitAtOnce:
    async def commit(
        self, write: Callable[[Declared[None]], Awaitable[Recorded[None]]], changes: object, **_: object
    ) -> None:
        await write(NO_CHANGES)


def test_a_failed_digest_attempt_is_reported_by_its_error_type() -> None:
    reported: list[str] = []
    store = BrokenTranscripts()
    digester = Digester(
        store=store,  # type: ignore[arg-type]
        summarizer=None,  # type: ignore[arg-type]
        embedder=None,  # type: ignore[arg-type]
        changes=CommitAtOnce(),  # type: ignore[arg-type]
        clock=lambda: NOW,
        on_failure=reported.append,
    )
    digest = Digest("t", "ep1", "agent", "user", DigestState.PENDING, NOW, NOW, NOW, NOW)

    assert asyncio.run(digester._digest(digest)) is False

    assert reported == ["RuntimeError"]
    assert [d.attempts for d in store.saved] == [1]


class TwoScopes:
    """SQL's vectors of two scopes, three and two of them."""

    rows: ClassVar[dict[Scope, tuple[list[str], list[Vector]]]] = {
        Scope("t", "a", "u1"): (["e1#0", "e1#1", "e2#0"], [[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]]),
        Scope("t", "a", "u2"): (["e3#0", "e3#1"], [[1.0, 0.0], [0.8, 0.6]]),
    }

    async def scope_vectors(self, scope: Scope) -> tuple[list[str], list[Vector]]:
        return self.rows[scope]

    async def item_vectors(self, scope: Scope, items: Sequence[str]) -> tuple[list[str], list[Vector]]:
        return self.rows[scope]


@pytest.mark.parametrize("room_for_both", [True, False])
def test_a_resident_index_counts_what_it_holds_without_walking_it(room_for_both: bool) -> None:
    async def load() -> ResidentScopes:
        budget = 10_000 if room_for_both else SCOPE_OVERHEAD + 3 * (2 * 4 + KEY_OVERHEAD) + 1
        cache = ResidentScopes(
            FaissVectorIndex(2), TwoScopes(), dimension=2, max_bytes=budget, lock=asyncio.Lock()
        )
        for scope in TwoScopes.rows:
            await cache.ensure(scope)
        return cache

    cache = asyncio.run(load())
    held = cache.resident()
    assert cache.loaded() == (len(held), sum(cache.index.count(s) for s in held))
    assert cache.loaded() == ((2, 5) if room_for_both else (1, 2))
