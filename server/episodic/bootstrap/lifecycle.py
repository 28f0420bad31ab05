"""Start-up and shutdown: `open_app(settings, replace=...)` opens the core (`core.open_core`, the
one door to it) and starts its loops (the feed's tail, the workers) with what serving needs
(keys, TLS, tracing, metrics); `serve_app(app)` serves it until the block ends. With
`open_core`, the only doors for running the product in-process (the server, the operator's
commands, tests, the lab)."""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext

from episodic.bootstrap.adapters import load_keys, load_tracing
from episodic.bootstrap.containers import (
    NO_REPLACEMENTS,
    WORKER_STOP_SECONDS,
    Adapters,
    App,
    OpenCore,
    Replacements,
    SqlAdapters,
    State,
)
from episodic.bootstrap.core import open_core
from episodic.bootstrap.erasure_replay import replay_ledger
from episodic.bounded import within
from episodic.config import Settings
from episodic.config.concerns import (
    CallerSettings,
    GrpcSettings,
    HttpLimits,
    InspectorSettings,
    TelemetrySettings,
    TlsSettings,
)
from episodic.config.files import tls_material
from episodic.domain.digests import indexed_with
from episodic.edges.grpc.access_log import AccessLog, JsonLinesAccessLog, NoAccessLog
from episodic.edges.grpc.arrivals import QUIET_SECONDS
from episodic.edges.grpc.server import GrpcServer, build_server
from episodic.edges.grpc.shares import Refused
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
    """The core opened (`open_core`, migrating if asked) and running, with what serving needs;
    yields the wired app, closes it all. Tracing comes from the OTEL_* variables unless given
    (tests); what it builds, it shuts down."""
    verify_assets()
    keys = load_keys(CallerSettings.of(settings))
    tls = tls_material(TlsSettings.of(settings))  # before the database opens, so a bad file fails fast
    owns_tracing = tracing is None
    tracing = load_tracing(TelemetrySettings.of(settings)) if tracing is None else tracing
    metrics = build_metrics(settings.metrics_address, settings.otel_environ)
    try:
        async with open_core(settings, tracing=tracing, metrics=metrics, index=replace.index) as opened:
            access_log: AccessLog = JsonLinesAccessLog() if settings.access_log else NoAccessLog()
            if metrics.enabled:  # RPC metrics ride on the access log's one record per RPC
                access_log = MeteredAccessLog(access_log, metrics)
            try:
                async with _running(opened, replace.background):
                    adapters, core = opened.adapters, opened.core
                    metrics.watch(watched_state(adapters, core.state))
                    yield App(
                        settings, opened.database, keys, adapters, core.state, core.services, core.workers,
                        access_log, tracing, tls, metrics,
                    )  # fmt: skip
            finally:
                access_log.close()
    finally:
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
async def _running(opened: OpenCore, background: bool) -> AsyncIterator[None]:
    """The erasure ledger replayed, then the change feed's tail and (when `background`) the
    workers running beside the RPCs until the block ends."""
    adapters, state, workers = opened.adapters, opened.core.state, opened.core.workers
    # Off the loop and not awaited: start-up does not wait, and a first turn that comes sooner
    # waits only for the encoding it needs (the counter builds each once, under a lock).
    threading.Thread(target=adapters.tiktoken.warm, name="episodic-token-warm-up", daemon=True).start()
    await note_stale_vectors(adapters)
    # before anything is served or any worker runs: no erased user is seen again
    await replay_ledger(adapters, opened.core.services.erasure)
    state.tail.listen()
    await adapters.replica_signals.start()
    await state.tail.start()
    if background:
        workers.start()
    try:
        yield
    finally:
        await within(WORKER_STOP_SECONDS, state.watch.close(), "end live watches")
        await within(WORKER_STOP_SECONDS, state.chunks.close(), "stop reading chunks in")
        await workers.stop()
        await within(WORKER_STOP_SECONDS, state.tail.stop(), "stop the change feed tail")
        await within(WORKER_STOP_SECONDS, adapters.replica_signals.stop(), "close the signal connection")
        await within(WORKER_STOP_SECONDS, adapters.replica_leadership.close(), "release leadership")


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
    listener, inspector = GrpcSettings.of(app.settings), InspectorSettings.of(app.settings)
    async with (
        serving_metrics(app.metrics, app.settings.metrics_address, HttpLimits.of(app.settings)),
        _inspector(inspector, app),
    ):
        grpc_server = await build_server(
            listener,
            app.services,
            app.keys,
            app.access_log,
            [server_interceptor(app.tracing)],  # outermost: calls refused inside are traced too
            app.tls,
            app.state.health,
            shares=app.state.shares,
            refused=share_refusals(app.metrics, app.settings.metrics_tenant_labels),
        )
        await grpc_server.server.start()
        await grpc_server.set_serving(True)
        try:
            yield grpc_server
        finally:
            await grpc_server.set_serving(False)
            # watches never finish on their own: end them now (UNAVAILABLE: watch another replica)
            await within(WORKER_STOP_SECONDS, app.state.watch.close(), "end live watches")
            grace = listener.shutdown_grace_seconds if grace_seconds is None else grace_seconds
            if grace > 0 and settle_seconds > 0:  # to finish in the grace, not be cancelled
                await grpc_server.arrivals.settle(settle_seconds)
            # gRPC cancels what is still running after the grace; a handler that then does not
            # finish must not hold the process
            await within(grace + WORKER_STOP_SECONDS, grpc_server.server.stop(grace), "stop gRPC server")


def _inspector(settings: InspectorSettings, app: App) -> AbstractAsyncContextManager[int | None]:
    """The inspector served for the block when it is on; its web stack (Starlette, uvicorn) is
    imported only then, so a server without it starts that much sooner."""
    if not settings.inspector_address:
        return nullcontext()
    from episodic.edges.inspector.serving import serving_inspector

    return serving_inspector(settings, app.services.inspection, app.keys, app.state.shares)
