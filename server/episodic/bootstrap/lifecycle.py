"""Start-up and shutdown: `open_app(settings, replace=...)` opens the adapters, checks the schema,
builds the core and starts its loops; `serve_app(app)` serves it until the block ends. The only
door for running the product in-process (the server, tests, the lab)."""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from episodic.bootstrap.adapters import build_adapters, load_keys, load_tracing
from episodic.bootstrap.containers import (
    NO_REPLACEMENTS,
    WORKER_STOP_SECONDS,
    Adapters,
    App,
    Replacements,
    SqlAdapters,
    State,
    Workers,
)
from episodic.bootstrap.erasure_replay import replay_ledger
from episodic.bootstrap.schema import ensure_schema, hold_database
from episodic.bootstrap.wiring import build_core, new_embed_pool, new_summary_pool
from episodic.bounded import within
from episodic.config import Settings
from episodic.domain.digests import indexed_with
from episodic.edges.grpc.access_log import AccessLog, JsonLinesAccessLog, NoAccessLog
from episodic.edges.grpc.arrivals import QUIET_SECONDS
from episodic.edges.grpc.server import GrpcServer, Services, build_server
from episodic.edges.grpc.shares import Refused
from episodic.edges.http.guard import HttpLimits
from episodic.edges.inspector.serving import serving_inspector
from episodic.store.database import Database, Timeouts, open_database
from episodic.store.lease import SqliteLease
from episodic.store.writer import GroupCommitWriter
from episodic.telemetry.instrumentation import server_interceptor
from episodic.telemetry.metrics import MeteredAccessLog, Metrics, Watched, build_metrics
from episodic.telemetry.metrics_endpoint import serving_metrics
from episodic.telemetry.tracing import Tracing
from episodic.tokens import verify_assets

log = logging.getLogger("episodic.server")


@asynccontextmanager
async def open_app(
    settings: Settings, *, tracing: Tracing | None = None, replace: Replacements = NO_REPLACEMENTS
) -> AsyncIterator[App]:
    """Opens the store (migrating if asked), yields the wired app, closes it all. Tracing
    comes from the OTEL_* variables unless given (tests); what it builds, it shuts down."""
    verify_assets()
    keys = load_keys(settings)
    tls = settings.tls_material()  # before the database opens, so a bad file fails fast
    owns_tracing = tracing is None
    tracing = load_tracing(settings) if tracing is None else tracing
    metrics = build_metrics(settings.metrics_address, settings.otel_environ)
    timeouts = Timeouts(settings.db_statement_timeout_seconds, settings.db_connect_timeout_seconds)
    database = open_database(settings.database_url, pool_size=settings.db_pool_size, timeouts=timeouts)
    lease: SqliteLease | None = None
    try:
        lease = hold_database(database)  # before the schema is read: no restore swaps the file under us
        await ensure_schema(database, settings.migrate_on_start)
        on_batch = metrics.writer_batch if metrics.enabled else None
        writer = GroupCommitWriter(database, workers=settings.db_writers, on_batch=on_batch)
        writer.start()
        access_log: AccessLog = JsonLinesAccessLog() if settings.access_log else NoAccessLog()
        if metrics.enabled:  # RPC metrics ride on the access log's one record per RPC
            access_log = MeteredAccessLog(access_log, metrics)
        try:
            async with _wired(settings, database, writer, tracing, replace, metrics) as (
                adapters,
                state,
                services,
                workers,
            ):
                metrics.watch(watched_state(adapters, state))
                yield App(
                    settings, database, keys, adapters, state, services, workers, access_log, tracing, tls,
                    metrics,
                )  # fmt: skip
        finally:
            await writer.stop()
            access_log.close()
    finally:
        await database.dispose()
        if lease is not None:
            lease.release()
        metrics.shutdown()
        if owns_tracing:
            tracing.shutdown()  # exports the spans still queued


def watched_state(adapters: SqlAdapters, state: State) -> Watched:
    """What metrics read at scrape time."""
    return Watched(
        working_sets=state.working_sets,
        indexes={"episodes": state.index, "memories": state.memory_index, "knowledge": state.knowledge_index},
        pools=adapters.database.pool_use,
        digest_queue=adapters.sql_digests.waiting,
        clock=adapters.clock,
        knowledge_counts=adapters.knowledge.counts,
        knowledge_cache_bytes=lambda: state.chunks.held_bytes,
    )


@asynccontextmanager
async def _wired(
    settings: Settings,
    database: Database,
    writer: GroupCommitWriter,
    tracing: Tracing,
    replace: Replacements,
    metrics: Metrics,
) -> AsyncIterator[tuple[SqlAdapters, State, Services, Workers]]:
    """Everything above the database (`build_core`, over the SQL adapters); the change
    feed's tail and the background workers run beside the RPCs until the block ends.
    Nothing is loaded into the indexes here: each scope loads on first use."""
    adapters = build_adapters(settings, database, writer, replace.index)
    # Off the loop and not awaited: start-up does not wait, and a first turn that comes sooner
    # waits only for the encoding it needs (the counter builds each once, under a lock).
    threading.Thread(target=adapters.tiktoken.warm, name="episodic-token-warm-up", daemon=True).start()
    pool, embed_pool = new_summary_pool(), new_embed_pool()
    core = build_core(settings, adapters, pool=pool, embed_pool=embed_pool, tracing=tracing, metrics=metrics)
    state, services, workers = core.state, core.services, core.workers
    database.health.listen(state.health.part("database"))
    await note_stale_vectors(adapters)
    try:  # before anything is served or any worker runs: no erased user is seen again
        await replay_ledger(adapters, services.erasure)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        embed_pool.shutdown(wait=False, cancel_futures=True)
        raise
    state.tail.listen()
    await adapters.replica_signals.start()
    await state.tail.start()
    if replace.background:
        workers.start()
    try:
        yield adapters, state, services, workers
    finally:
        await within(WORKER_STOP_SECONDS, state.watch.close(), "end live watches")
        await within(WORKER_STOP_SECONDS, state.chunks.close(), "stop reading chunks in")
        await workers.stop()
        await within(WORKER_STOP_SECONDS, state.tail.stop(), "stop the change feed tail")
        await within(WORKER_STOP_SECONDS, adapters.replica_signals.stop(), "close the signal connection")
        await within(WORKER_STOP_SECONDS, adapters.replica_leadership.close(), "release leadership")
        pool.shutdown(wait=False, cancel_futures=True)
        embed_pool.shutdown(wait=False, cancel_futures=True)


async def note_stale_vectors(adapters: Adapters) -> None:
    model = indexed_with(adapters.embedder.model_id)
    stale = await adapters.digests.count_stale(model)
    if stale:
        log.warning("model or index recipe changed: re-embedding in the background", extra={"digests": stale})


def share_refusals(metrics: Metrics, tenant_labels: bool) -> Refused | None:
    """Refusals counted by share; tenant ids appear only where the operator opted in."""
    if not metrics.enabled:
        return None
    if tenant_labels:
        return metrics.share_refused
    return lambda share, _tenant: metrics.share_refused(share)


@asynccontextmanager
async def serve_app(
    app: App, *, grace_seconds: float | None = None, settle_seconds: float = QUIET_SECONDS
) -> AsyncIterator[GrpcServer]:
    """The gRPC server of an open app on its settings' address, SERVING until the block ends;
    then NOT_SERVING, calls already sent are taken (until none arrived for `settle_seconds`;
    0: not waited for, as tests whose calls have all returned do), and calls in flight get
    the grace (default: the shutdown grace).
    Metrics and the inspector (when on) are served from before SERVING until the calls have
    drained."""
    async with (
        serving_metrics(app.metrics, app.settings.metrics_address, HttpLimits.of(app.settings)),
        serving_inspector(app.settings, app.services.inspection, app.keys, app.state.shares),
    ):
        grpc_server = await build_server(
            app.settings,
            app.services,
            app.keys,
            app.access_log,
            [server_interceptor(app.tracing)],  # outermost: calls refused inside are traced too
            app.tls,
            app.state.health,
            app.state.shares,
            share_refusals(app.metrics, app.settings.metrics_tenant_labels),
        )
        await grpc_server.server.start()
        await grpc_server.set_serving(True)
        try:
            yield grpc_server
        finally:
            await grpc_server.set_serving(False)
            # watches never finish on their own: end them now (UNAVAILABLE: watch another replica)
            await within(WORKER_STOP_SECONDS, app.state.watch.close(), "end live watches")
            grace = app.settings.shutdown_grace_seconds if grace_seconds is None else grace_seconds
            if grace > 0 and settle_seconds > 0:  # to finish in the grace, not be cancelled
                await grpc_server.arrivals.settle(settle_seconds)
            # gRPC cancels what is still running after the grace; a handler that then does not
            # finish must not hold the process
            await within(grace + WORKER_STOP_SECONDS, grpc_server.server.stop(grace), "stop gRPC server")
