"""The composition root: the one place that knows every concrete class."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from episodic.api.access_log import AccessLog, JsonLinesAccessLog, NoAccessLog
from episodic.api.server import GrpcServer, Services, build_server
from episodic.config import ConfigError, Settings, TlsMaterial
from episodic.domain.ports import Embedder, Summarizer, VectorIndex
from episodic.embed import make_embedder
from episodic.index import FaissVectorIndex
from episodic.keys import KeyRing
from episodic.service.agents import AgentService
from episodic.service.compaction import BackgroundCompactor, SummaryMaker
from episodic.service.context import ContextService
from episodic.service.digester import Digester, load_index
from episodic.service.episodes import DigestWaiter, EpisodeService, NoDigests
from episodic.service.erasure import EraseService
from episodic.service.index_check import IndexChecker
from episodic.service.privacy import PiiGuard
from episodic.service.reaper import IdleReaper
from episodic.service.recall import RecallService
from episodic.service.recall_memo import RecencyMemo, ScopeVersions
from episodic.service.retention import RetentionJob
from episodic.service.working_set import WorkingSetCache
from episodic.store.agents import SqlAgentStore
from episodic.store.context import SqlContextStore
from episodic.store.database import Database, open_database
from episodic.store.digests import SqlDigestStore
from episodic.store.episodes import SqlEpisodeStore
from episodic.store.erasure import SqlEraser
from episodic.store.faults import sqlite_path_problem, startup_failure
from episodic.store.migrate import current_revision, head_revision, is_new_sqlite, upgrade_to_head
from episodic.store.retention import SqlRetention
from episodic.store.writer import GroupCommitWriter
from episodic.summarize import make_summarizer
from episodic.summarize.extractive import ExtractiveSummarizer
from episodic.telemetry.tracing import Tracing, no_tracing, tracing_from_env
from episodic.tokens import TiktokenCounter, verify_assets


@dataclass(frozen=True, slots=True)
class App:
    settings: Settings
    database: Database
    keys: KeyRing
    services: Services
    access_log: AccessLog
    tracing: Tracing
    tls: TlsMaterial | None  # None: plaintext


log = logging.getLogger("episodic.server")


def utc_now() -> datetime:
    return datetime.now(UTC)


def new_episode_id() -> str:
    return f"ep_{uuid.uuid4().hex}"


def new_call_id() -> str:
    return uuid.uuid4().hex


def load_keys(settings: Settings) -> KeyRing:
    try:
        keys = KeyRing.parse(settings.api_key_text())
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if not keys and not settings.insecure_dev:
        raise ConfigError(
            "no API keys configured: set EPISODIC_API_KEYS or EPISODIC_API_KEYS_FILE "
            "(see `episodic keygen`), or pass --insecure-dev for local development"
        )
    return keys


class DatabaseNotReady(ConfigError):
    """The database cannot be opened, or is not at this server's schema: one line that
    says what to do."""


async def ensure_schema(database: Database, migrate: bool) -> None:
    problem = sqlite_path_problem(database.url)
    if problem is not None:
        raise DatabaseNotReady(f"database_url: {problem}")
    try:
        await _bring_schema_up(database, migrate)
    except DatabaseNotReady:
        raise
    except Exception as exc:
        message = startup_failure(exc, database.url)
        if message is None:
            raise
        raise DatabaseNotReady(f"database_url: {message}") from exc


async def _bring_schema_up(database: Database, migrate: bool) -> None:
    """A new, empty SQLite file (the embedded default) is created at the current schema;
    an older schema and PostgreSQL wait for an explicit migrate."""
    if migrate or await is_new_sqlite(database):
        await upgrade_to_head(database.engine)
        if not migrate:
            log.info(
                "created a new SQLite database at the current schema", extra={"revision": head_revision()}
            )
    found, wanted = await current_revision(database.engine), head_revision()
    if found != wanted:
        raise DatabaseNotReady(
            f"database_url: the database schema is at revision {found}, this server needs {wanted}: "
            "run `episodic migrate` or start with --migrate-on-start"
        )


@dataclass(frozen=True, slots=True)
class Recall:
    """The recall machinery: models, index, and the digest store that feeds it."""

    embedder: Embedder
    summarizer: Summarizer
    index: VectorIndex
    digests: SqlDigestStore
    versions: ScopeVersions = field(default_factory=ScopeVersions)  # bumped when a scope's recall changes
    index_lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # digester vs erasure on the index


def build_embedder(settings: Settings) -> Embedder:
    if settings.embedder != "openai":
        return make_embedder(settings.embedder)
    options = {"base_url": settings.embedder_url, "model": settings.embedder_model}
    return make_embedder("openai", **options, api_key=settings.embedder_api_key or None)


def build_summarizer(settings: Settings) -> Summarizer:
    if settings.summarizer != "openai":
        return make_summarizer(settings.summarizer)
    options = {"base_url": settings.summarizer_url, "model": settings.summarizer_model}
    return make_summarizer("openai", **options, api_key=settings.summarizer_api_key or None)


def build_recall(settings: Settings, database: Database, writer: GroupCommitWriter) -> Recall:
    try:
        embedder, summarizer = build_embedder(settings), build_summarizer(settings)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    index = FaissVectorIndex(embedder.dimension)
    return Recall(embedder, summarizer, index, SqlDigestStore(database, writer))


# Summaries are pure-Python CPU work under the GIL: a second thread would add no throughput,
# only contention with the event loop that serves every tenant.
SUMMARY_THREADS = 1


def new_summary_pool() -> ThreadPoolExecutor:
    """Where extractive summaries are made (compaction, digests), whoever asks for them."""
    return ThreadPoolExecutor(SUMMARY_THREADS, thread_name_prefix="episodic-summary")


def build_services(
    settings: Settings,
    database: Database,
    writer: GroupCommitWriter,
    recall: Recall,
    digester: DigestWaiter | None = None,
    tracing: Tracing | None = None,
    *,
    summaries: Executor | None = None,
) -> Services:
    tokens = TiktokenCounter()
    agents = SqlAgentStore(database, writer)
    episodes = SqlEpisodeStore(database, writer, utc_now)
    tracing = tracing or no_tracing()
    pii = build_pii_guard(settings, agents)
    episode_service = EpisodeService(
        episodes,
        agents,
        tokens,
        settings.limits,
        utc_now,
        new_episode_id,
        digests=digester or NoDigests(),
        scope_changed=recall.versions.bump,
        tracing=tracing,
        pii=pii,
    )
    recall_service = RecallService(
        recall.digests, agents, recall.embedder, recall.index, settings.limits, tracing=tracing
    )
    context = build_context(
        settings, database, writer, recall, episode_service, recall_service, tracing,
        summaries=summaries or new_summary_pool(),
    )  # fmt: skip
    context.pii = pii
    return Services(
        episodes=episode_service,
        agents=AgentService(agents, tokens, settings.limits, utc_now),
        recall=recall_service,
        context=context,
        erasure=EraseService(
            SqlEraser(database, writer),
            recall.index,
            recall.index_lock,
            utc_now,
            new_call_id,
            context.forget,
            recall.versions.bump,
        ),  # fmt: skip
        index_checker=IndexChecker(recall.digests, recall.index, recall.embedder.model_id),
    )


def build_pii_guard(settings: Settings, agents: SqlAgentStore) -> PiiGuard:
    default, tenants = settings.pii_policies()
    return PiiGuard(agents, default, tenants)


def build_context(
    settings: Settings,
    database: Database,
    writer: GroupCommitWriter,
    recall: Recall,
    episodes: EpisodeService,
    search: RecallService,
    tracing: Tracing,
    *,
    summaries: Executor,
) -> ContextService:
    """Extractive compaction runs inline; a configured LLM summarizer runs in the background."""
    tokens = TiktokenCounter()
    store = SqlContextStore(database, writer)
    cache = WorkingSetCache(settings.working_set_max_bytes)
    background = (
        BackgroundCompactor(recall.summarizer, SummaryMaker(tokens, utc_now), store, cache)
        if settings.summarizer == "openai"
        else None
    )
    return ContextService(
        store, episodes, search, tokens, ExtractiveSummarizer(), settings.limits, utc_now,
        new_call_id, cache, background, RecencyMemo(recall.versions), tracing, summary_pool=summaries,
    )  # fmt: skip


def load_tracing() -> Tracing:
    """The one read of the OTEL_* variables."""
    try:
        return tracing_from_env(os.environ)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


@dataclass(frozen=True, slots=True)
class Replacements:
    """What a lab or a test may swap in the composition root: the one in-process door."""

    index: VectorIndex | None = None  # a pre-built index instead of the one loaded from SQL
    background: bool = True  # False: no digester, idle reaper or retention job


@asynccontextmanager
async def open_app(
    settings: Settings, *, tracing: Tracing | None = None, replace: Replacements = Replacements()
) -> AsyncIterator[App]:
    """Opens the store (migrating if asked), yields the wired app, closes it all. Tracing
    comes from the OTEL_* variables unless given (tests); what it builds, it shuts down."""
    verify_assets()
    keys = load_keys(settings)
    tls = settings.tls_material()  # before the database opens, so a bad file fails fast
    owns_tracing = tracing is None
    tracing = load_tracing() if tracing is None else tracing
    database = open_database(settings.database_url, pool_size=settings.db_pool_size)
    try:
        await ensure_schema(database, settings.migrate_on_start)
        writer = GroupCommitWriter(database, workers=settings.db_writers)
        writer.start()
        access_log = JsonLinesAccessLog() if settings.access_log else NoAccessLog()
        try:
            async with run_background(settings, database, writer, tracing, replace) as services:
                yield App(settings, database, keys, services, access_log, tracing, tls)
        finally:
            await writer.stop()
            access_log.close()
    finally:
        await database.dispose()
        if owns_tracing:
            tracing.shutdown()  # exports the spans still queued


@asynccontextmanager
async def run_background(
    settings: Settings,
    database: Database,
    writer: GroupCommitWriter,
    tracing: Tracing,
    replace: Replacements = Replacements(),
) -> AsyncIterator[Services]:
    """Loads the index from SQL, then runs the digester and the idle reaper beside the RPCs."""
    recall = build_recall(settings, database, writer)
    model = recall.embedder.model_id
    if replace.index is not None:
        recall = dataclasses.replace(recall, index=replace.index)
    else:
        loaded = await load_index(recall.digests, recall.index, model)
        log.info("vector index loaded from SQL", extra={"vectors": loaded, "model": model})
    stale = await recall.digests.count_stale(model)
    if stale:
        log.warning("embedding model changed: re-embedding in the background", extra={"digests": stale})
    summaries = new_summary_pool()
    digester = Digester(
        recall.digests, recall.summarizer, recall.embedder, recall.index, utc_now,
        scope_changed=recall.versions.bump, index_lock=recall.index_lock,
        summary_pool=None if settings.summarizer == "openai" else summaries,  # an LLM waits, not computes
    )  # fmt: skip
    services = build_services(settings, database, writer, recall, digester, tracing, summaries=summaries)
    episodes = SqlEpisodeStore(database, writer, utc_now)
    reaper = IdleReaper(episodes, services.episodes, utc_now, digester.wake, settings.idle_sweep_seconds)
    retention = build_retention(settings, database, writer, recall, services)
    if replace.background:
        digester.start()
        reaper.start()
        retention.start()
    try:
        yield services
    finally:
        await retention.stop()
        await services.context.stop()
        await reaper.stop()
        await digester.stop()
        summaries.shutdown(wait=False, cancel_futures=True)


def build_retention(
    settings: Settings, database: Database, writer: GroupCommitWriter, recall: Recall, services: Services
) -> RetentionJob:
    return RetentionJob(
        SqlRetention(database, writer, settings.retention_caps()), recall.index, recall.index_lock, utc_now,
        services.context.forget, recall.versions.bump,
        grace=timedelta(days=settings.retention_grace_days),
        interval_seconds=settings.retention_sweep_seconds,
    )  # fmt: skip


@asynccontextmanager
async def serve_app(app: App, *, grace_seconds: float | None = None) -> AsyncIterator[GrpcServer]:
    """The gRPC server of an open app on its settings' address, SERVING until the block ends;
    then NOT_SERVING, and calls in flight get the grace (default: the shutdown grace)."""
    grpc_server = await build_server(
        app.settings, app.services, app.keys, app.access_log, app.tracing, app.tls, app.database.health
    )
    await grpc_server.server.start()
    await grpc_server.set_serving(True)
    try:
        yield grpc_server
    finally:
        await grpc_server.set_serving(False)
        grace = app.settings.shutdown_grace_seconds if grace_seconds is None else grace_seconds
        await grpc_server.server.stop(grace)
