"""Metrics through the OpenTelemetry metrics API, read by the Prometheus exporter.

Why OpenTelemetry rather than prometheus_client directly: one instrumentation API for traces
and metrics, the OpenTelemetry naming conventions, and an OTLP metrics exporter later is a
reader swap. The exporter's reader registers with a prometheus_client registry of this app's
own, and `metrics_endpoint` serves it on --metrics-address.

Each app owns its MeterProvider and registry (never the global ones), so tests and several
apps in one process never share or double-register. With no --metrics-address the
instruments are the API's no-ops and nothing is collected.

Events (RPCs, renders, recalls, digest failures, writer batches) are recorded as they
happen; state that already sits in RAM (working sets, index caches, connection pools) is
read by callbacks at scrape time, and the digest queue, which lives in SQL, is read once per
scrape (`refresh`). Every scrape runs on the event loop, so callbacks read that state from
the thread that changes it. Attribute values are bounded sets (method names, status codes,
section names, pool and index names): never tenant ids, user ids or content."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, NoOpMeterProvider, Observation
from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
from opentelemetry.sdk.resources import Resource
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from episodic.domain.shares import Share
from episodic.telemetry.setup import resource_attributes

log = logging.getLogger(__name__)

METER_NAME = "episodic"
# AddMessage takes about a millisecond, a cold BuildContext tens to hundreds.
SECONDS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
TOKEN_BUCKETS = (0, 16, 64, 256, 1024, 4096, 16384, 65536, 262144)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)  # the writer's max_batch is 128
DIGEST_STATES = ("pending", "failed")  # the waiting states, reported even when empty
QUEUE_READ_SECONDS = 2.0  # a scrape waits this long at most for the digest queue's counts


class WorkingSets(Protocol):
    """The working-set cache as metrics read it."""

    @property
    def total_bytes(self) -> int: ...

    @property
    def evictions(self) -> int: ...

    def __len__(self) -> int: ...


class ScopeCache(Protocol):
    """An index cache as metrics read it."""

    def loaded(self) -> tuple[int, int]:
        """(resident scopes, their vectors)"""

    @property
    def streamed(self) -> int:
        """Searches of scopes too large to hold, read from SQL page by page (ever)."""


# (state, digests waiting in it, when the oldest one's episode ended)
QueueRow = tuple[str, int, "datetime | None"]


@dataclass(frozen=True, slots=True)
class Watched:
    """What the scrape-time instruments read. `pools` maps a pool name to its connections
    (in use, idle); `digest_queue` reads the waiting digests from SQL."""

    working_sets: WorkingSets
    indexes: Mapping[str, ScopeCache]
    pools: Callable[[], Mapping[str, tuple[int, int]]]
    digest_queue: Callable[[], Awaitable[Sequence[QueueRow]]]
    clock: Callable[[], datetime]
    knowledge_counts: Callable[[], Awaitable[tuple[int, int]]] | None = None  # (documents, chunks)
    knowledge_cache_bytes: Callable[[], int] | None = None  # the chunk cache's


class Metrics:
    """The instruments, named in one place. Build it with `build_metrics`."""

    def __init__(
        self,
        provider: MeterProvider,
        registry: CollectorRegistry | None = None,
        release: Callable[[], None] | None = None,
    ) -> None:
        self.registry = registry  # None: metrics are off
        self.port: int | None = None  # where the endpoint listens, while it does
        self._release = release
        self._meter = meter = provider.get_meter(METER_NAME)
        self._watched: Watched | None = None
        self._queue: dict[str, tuple[int, float]] | None = None  # state -> (depth, oldest age)
        self._knowledge: tuple[int, int] | None = None  # (documents, chunks) of every tenant
        self._rpc = meter.create_histogram(
            "episodic.rpc.server.duration",
            unit="s",
            description="RPCs by method and final status, until the response (or stream) ended.",
            explicit_bucket_boundaries_advisory=SECONDS_BUCKETS,
        )
        self._section_tokens = meter.create_histogram(
            "episodic.context.section.tokens",
            unit="{token}",
            description="Tokens of each section of every new BuildContext model call.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self._recall = meter.create_histogram(
            "episodic.recall.duration",
            unit="s",
            description="Recalls of past episodes (SearchEpisodes, BuildContext), by search mode.",
            explicit_bucket_boundaries_advisory=SECONDS_BUCKETS,
        )
        self._knowledge_search = meter.create_histogram(
            "episodic.knowledge.search.duration",
            unit="s",
            description="Searches of agents' documents (SearchKnowledge, BuildContext), by search mode.",
            explicit_bucket_boundaries_advisory=SECONDS_BUCKETS,
        )
        self._digest_failures = meter.create_counter(
            "episodic.digest.failures",
            unit="{digest}",
            description="Digest attempts that failed (retried with back-off), by error type.",
        )
        self._refusals = meter.create_counter(
            "episodic.share.refusals",
            unit="{rpc}",
            description="Calls refused for being over their tenant's share, by share (tenant if opted in).",
        )
        self._batch = meter.create_histogram(
            "episodic.db.writer.batch.size",
            unit="{operation}",
            description="Write operations committed together, one observation per batch.",
            explicit_bucket_boundaries_advisory=BATCH_BUCKETS,
        )

    @property
    def enabled(self) -> bool:
        return self.registry is not None

    # --- events, on the hot path -------------------------------------------------------------

    def rpc_finished(self, method: str, code: str, seconds: float) -> None:
        """`method` as gRPC names it ("/package.Service/Method"), `code` a StatusCode name."""
        attributes = {"rpc.method": method.lstrip("/"), "rpc.response.status_code": code}
        self._rpc.record(seconds, attributes)

    def context_rendered(self, section_tokens: Iterable[tuple[str, int]]) -> None:
        for section, tokens in section_tokens:
            self._section_tokens.record(tokens, {"section": str(section)})

    def recall_finished(self, mode: str, seconds: float) -> None:
        self._recall.record(seconds, {"episodic.search.mode": mode})

    def knowledge_searched(self, mode: str, seconds: float) -> None:
        self._knowledge_search.record(seconds, {"episodic.search.mode": mode})

    def digest_failed(self, error_type: str) -> None:
        self._digest_failures.add(1, {"error.type": error_type})

    def share_refused(self, share: Share, tenant_id: str | None = None) -> None:
        """`tenant_id` only when the operator opted in (metrics_tenant_labels)."""
        attributes = {"episodic.share": share.value}
        if tenant_id is not None:
            attributes["episodic.tenant"] = tenant_id
        self._refusals.add(1, attributes)

    def writer_batch(self, size: int) -> None:
        self._batch.record(size)

    # --- state, read at scrape time ----------------------------------------------------------

    def watch(self, watched: Watched) -> None:
        """Registers the scrape-time instruments over the app's state (once, when it exists)."""
        if not self.enabled:
            return
        self._watched = watched
        _WatchedInstruments(self._meter, watched, lambda: self._queue, lambda: self._knowledge)

    async def refresh(self) -> None:
        """Reads the digest queue from SQL for the scrape about to be made. A database that
        does not answer in time leaves the queue out of this scrape rather than stale."""
        watched = self._watched
        if watched is None:
            return
        try:
            rows = await asyncio.wait_for(watched.digest_queue(), QUEUE_READ_SECONDS)
            counts = watched.knowledge_counts
            self._knowledge = await asyncio.wait_for(counts(), QUEUE_READ_SECONDS) if counts else None
        except Exception as exc:  # an outage is the database health's to report
            log.debug("digest queue not read for metrics", extra={"error": type(exc).__name__})
            self._queue = self._knowledge = None
            return
        self._queue = queue_by_state(rows, watched.clock())

    def exposition(self, accept: str = "") -> tuple[bytes, str]:
        """The Prometheus exposition (the format `accept` asks for) and its content type."""
        if self.registry is None:
            raise RuntimeError("metrics are off: no registry to expose")
        encode, content_type = choose_encoder(accept)
        return encode(self.registry), content_type

    def shutdown(self) -> None:
        if self._release is not None:
            self._release()


class RpcLog(Protocol):
    """The access log's shape (api/access_log.py), which this module does not import."""

    def record(self, method: str, code: str, duration_ms: float, peer: str, trace_id: str = "") -> None: ...

    def close(self) -> None: ...


class MeteredAccessLog:
    """The access log, with every RPC it records also counted in the RPC histogram. The
    error interceptor records each RPC once, when gRPC ends the call (after a stream's last
    message), with its final code whatever ended it (a deadline, a cancel): the one place
    that already knows what RPC metrics need."""

    def __init__(self, inner: RpcLog, metrics: Metrics) -> None:
        self._inner = inner
        self._metrics = metrics

    def record(self, method: str, code: str, duration_ms: float, peer: str, trace_id: str = "") -> None:
        self._metrics.rpc_finished(method, code, duration_ms / 1000)
        self._inner.record(method, code, duration_ms, peer, trace_id)

    def close(self) -> None:
        self._inner.close()


def queue_by_state(rows: Sequence[QueueRow], now: datetime) -> dict[str, tuple[int, float]]:
    """Depth and age of the oldest waiting digest per state; empty states are 0 and 0."""
    found = dict.fromkeys(DIGEST_STATES, (0, 0.0))
    for state, depth, oldest in rows:
        age = max(0.0, (now - oldest).total_seconds()) if oldest is not None else 0.0
        found[state.lower()] = (depth, age)
    return found


class _WatchedInstruments:
    """The observable instruments; their callbacks run during a scrape."""

    def __init__(
        self,
        meter: Meter,
        watched: Watched,
        queue: Callable[[], dict[str, tuple[int, float]] | None],
        knowledge: Callable[[], tuple[int, int] | None],
    ) -> None:
        self._watched = watched
        self._queue = queue
        self._knowledge = knowledge
        meter.create_observable_gauge(
            "episodic.working_set.usage",
            [self._working_set_bytes],
            unit="By",
            description="Estimated bytes of the working sets held in RAM.",
        )
        meter.create_observable_gauge(
            "episodic.working_set.count",
            [self._working_set_count],
            unit="{working_set}",
            description="Working sets (conversations) held in RAM.",
        )
        meter.create_observable_counter(
            "episodic.working_set.evictions",
            [self._working_set_evictions],
            unit="{working_set}",
            description="Working sets evicted to stay within working_set_max_bytes.",
        )
        meter.create_observable_gauge(
            "episodic.index.scopes",
            [self._index_scopes],
            unit="{scope}",
            description="Scopes (tenant, agent, user) loaded in a vector index, by index.",
        )
        meter.create_observable_gauge(
            "episodic.index.vectors",
            [self._index_vectors],
            unit="{vector}",
            description="Vectors loaded in a vector index, by index.",
        )
        meter.create_observable_counter(
            "episodic.index.streamed_searches",
            [self._index_streamed],
            unit="{search}",
            description="Searches of scopes too large for their index's cache share, read from SQL in pages.",
        )
        meter.create_observable_gauge(
            "episodic.db.client.connection.count",
            [self._connections],
            unit="{connection}",
            description="Database connections of each pool, in use or idle.",
        )
        meter.create_observable_gauge(
            "episodic.digest.queue.depth",
            [self._queue_depth],
            unit="{digest}",
            description="Closed episodes waiting for their digest (cluster-wide, read from SQL), by state.",
        )
        meter.create_observable_gauge(
            "episodic.knowledge.documents",
            [self._documents],
            unit="{document}",
            description="Agents' documents held (cluster-wide, read from SQL).",
        )
        meter.create_observable_gauge(
            "episodic.knowledge.cache.usage",
            [self._knowledge_cache_bytes],
            unit="By",
            description="Estimated bytes of chunk rows held in RAM (bounded by knowledge_cache_bytes).",
        )
        meter.create_observable_gauge(
            "episodic.knowledge.chunks",
            [self._chunks],
            unit="{chunk}",
            description="Chunks of agents' documents held (cluster-wide, read from SQL).",
        )
        meter.create_observable_gauge(
            "episodic.digest.queue.oldest_age",
            [self._queue_age],
            unit="s",
            description="How long ago the episode of the oldest waiting digest closed, by state.",
        )

    def _working_set_bytes(self, _: CallbackOptions) -> Iterable[Observation]:
        return [Observation(self._watched.working_sets.total_bytes)]

    def _working_set_count(self, _: CallbackOptions) -> Iterable[Observation]:
        return [Observation(len(self._watched.working_sets))]

    def _working_set_evictions(self, _: CallbackOptions) -> Iterable[Observation]:
        return [Observation(self._watched.working_sets.evictions)]

    def _knowledge_cache_bytes(self, _: CallbackOptions) -> Iterable[Observation]:
        held = self._watched.knowledge_cache_bytes
        return [] if held is None else [Observation(held())]

    def _index_scopes(self, _: CallbackOptions) -> Iterable[Observation]:
        return [Observation(c.loaded()[0], {"index": name}) for name, c in self._watched.indexes.items()]

    def _index_vectors(self, _: CallbackOptions) -> Iterable[Observation]:
        return [Observation(c.loaded()[1], {"index": name}) for name, c in self._watched.indexes.items()]

    def _index_streamed(self, _: CallbackOptions) -> Iterable[Observation]:
        return [Observation(c.streamed, {"index": name}) for name, c in self._watched.indexes.items()]

    def _connections(self, _: CallbackOptions) -> Iterable[Observation]:
        found: list[Observation] = []
        for pool, (used, idle) in self._watched.pools().items():
            for state, count in (("used", used), ("idle", idle)):
                attributes = {"db.client.connection.pool.name": pool, "db.client.connection.state": state}
                found.append(Observation(count, attributes))
        return found

    def _queue_depth(self, _: CallbackOptions) -> Iterable[Observation]:
        queue = self._queue() or {}
        return [Observation(depth, {"state": state}) for state, (depth, _) in queue.items()]

    def _documents(self, _: CallbackOptions) -> Iterable[Observation]:
        counts = self._knowledge()
        return [Observation(counts[0])] if counts is not None else []

    def _chunks(self, _: CallbackOptions) -> Iterable[Observation]:
        counts = self._knowledge()
        return [Observation(counts[1])] if counts is not None else []

    def _queue_age(self, _: CallbackOptions) -> Iterable[Observation]:
        queue = self._queue() or {}
        return [Observation(age, {"state": state}) for state, (_, age) in queue.items()]


def build_metrics(address: str, otel_environ: Mapping[str, str]) -> Metrics:
    """The SDK with a Prometheus reader on a registry of this app's own when `address` is
    set; the API's no-ops otherwise. The resource (service.name...) is tracing's."""
    if not address:
        return disabled_metrics()
    registry = CollectorRegistry(auto_describe=False)
    # Scope labels would put otel_scope_name="episodic" on every series for nothing.
    reader = PrometheusMetricReader(scope_info_enabled=False, registry=registry)
    provider = _OwnMeterProvider(
        metric_readers=[reader],
        resource=Resource.create(resource_attributes(otel_environ)),
        shutdown_on_exit=False,
    )
    return Metrics(provider, registry, release=provider.shutdown)


class _OwnMeterProvider(SdkMeterProvider):
    """The SDK's provider, deaf to OTEL_SDK_DISABLED: here that variable switches tracing
    off, while metrics are on exactly when --metrics-address is set. The SDK reads it from
    the process environment and would hand out no-op meters, leaving /metrics answering 200
    with an empty body: monitoring dark without a word."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._disabled = False  # the SDK's own flag, read by get_meter


def disabled_metrics() -> Metrics:
    return Metrics(NoOpMeterProvider())
