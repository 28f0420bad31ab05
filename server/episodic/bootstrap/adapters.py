"""Settings -> the concrete adapters: keys, models, indexes, tracing, the erasure ledger. The only
place (with the database's own opening) that names a concrete adapter class."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from pathlib import Path

from episodic.bootstrap import system
from episodic.bootstrap.containers import Adapters, ScopeSources, SqlAdapters
from episodic.config import ConfigError, EmbedderKind, ExtractorKind, Settings, SummarizerKind
from episodic.config.concerns import (
    CacheSettings,
    CallerSettings,
    DatabaseSettings,
    ModelSettings,
    TelemetrySettings,
)
from episodic.config.files import api_key_text
from episodic.config.values import retention_caps
from episodic.domain.digests import indexed_with
from episodic.domain.ports.indexes import VectorIndex
from episodic.domain.ports.models import Embedder, MemoryExtractor, Summarizer
from episodic.domain.ports.users import ErasureLedger
from episodic.edges.keys import KeyRing
from episodic.embed import EmbeddingError, make_embedder
from episodic.embed.model_cache import default_cache_dir
from episodic.index import FaissVectorIndex
from episodic.state.index_cache import IndexCache, ResidentScopes, WholeIndex
from episodic.store.agents import SqlAgentStore
from episodic.store.cluster_clock import DatabaseClock
from episodic.store.context import SqlContextStore
from episodic.store.database import Database
from episodic.store.digests import SqlDigestStore
from episodic.store.drafts import SqlDraftStore
from episodic.store.episodes import SqlEpisodeStore
from episodic.store.erasure import SqlEraser
from episodic.store.feed import SqlChangeFeed
from episodic.store.knowledge import SqlKnowledgeStore
from episodic.store.leadership import PgLeadership
from episodic.store.ledger import FileErasureLedger, NoErasureLedger, ledger_path
from episodic.store.memories import SqlMemoryStore
from episodic.store.retention import SqlRetention
from episodic.store.session_data import SqlSessionDataStore
from episodic.store.signals import LocalSignals, PgSignals
from episodic.store.transfer import SqlTransfer
from episodic.store.vector_sources import SqlDigestVectors, SqlKnowledgeVectors, SqlMemoryVectors
from episodic.store.warm_start import SqlRecentlyActive
from episodic.store.writer import GroupCommitWriter
from episodic.summarize.extractive import ExtractiveSummarizer
from episodic.summarize.memories import ExtractiveMemoryExtractor
from episodic.summarize.openai_chat import OpenAIChatConfig, OpenAIChatSummarizer
from episodic.summarize.openai_memories import OpenAiMemoryExtractor
from episodic.telemetry.setup import tracing_from_env
from episodic.telemetry.tracing import Tracing
from episodic.tokens import TiktokenCounter
from episodic.workers.loops import SoleReplica

log = logging.getLogger("episodic.server")


def load_keys(callers: CallerSettings) -> KeyRing:
    try:
        keys = KeyRing.parse(api_key_text(callers))
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if not keys and not callers.insecure_dev:
        raise ConfigError(
            "no API keys configured: set EPISODIC_API_KEYS or EPISODIC_API_KEYS_FILE "
            "(see `episodic keygen`), or pass --insecure-dev for local development"
        )
    return keys


def model_cache_dir(settings: ModelSettings) -> Path | None:
    """Where the int8 model is cached: the setting, else the user's cache (None: no home)."""
    if settings.model_cache_dir:
        return Path(settings.model_cache_dir)
    return default_cache_dir(settings.xdg_cache_home)


def build_embedder(settings: ModelSettings) -> Embedder:
    """A model that cannot load (altered file, no usable temporary directory for the int8
    derivation) or an endpoint misconfigured stops the start with one line naming why."""
    try:
        options: dict[str, object] = {}
        if settings.embedder == EmbedderKind.OPENAI:
            options = {
                "base_url": settings.embedder_url,
                "model": settings.embedder_model,
                "api_key": settings.embedder_api_key or None,
            }
        elif settings.embedder in (EmbedderKind.MINILM, EmbedderKind.MINILM_FP32):
            options = {"cache_dir": model_cache_dir(settings), "threads": settings.embedder_threads}
        return make_embedder(str(settings.embedder), **options)
    except (EmbeddingError, ValueError) as exc:
        raise ConfigError(f"embedder: {exc}") from exc


def build_summarizer(settings: ModelSettings) -> Summarizer:
    if settings.summarizer != SummarizerKind.OPENAI:
        return ExtractiveSummarizer()
    try:
        return OpenAIChatSummarizer(chat_endpoint(settings))
    except ValueError as exc:
        raise ConfigError(f"summarizer: {exc}") from exc


def chat_endpoint(settings: ModelSettings) -> OpenAIChatConfig:
    """The chat endpoint of summarizer=openai, which extractor=openai uses too."""
    return OpenAIChatConfig(
        base_url=settings.summarizer_url,
        model=settings.summarizer_model,
        api_key=settings.summarizer_api_key,
    )


def build_extractor(settings: ModelSettings) -> MemoryExtractor:
    if settings.extractor != ExtractorKind.OPENAI:
        return ExtractiveMemoryExtractor()
    if not settings.summarizer_url or not settings.summarizer_model:
        raise ConfigError("extractor=openai needs EPISODIC_SUMMARIZER_URL and EPISODIC_SUMMARIZER_MODEL")
    try:
        config = chat_endpoint(settings)
    except ValueError as exc:
        raise ConfigError(f"extractor: {exc}") from exc
    return OpenAiMemoryExtractor(config, fallback=ExtractiveMemoryExtractor())


def build_adapters(
    settings: Settings,
    database: Database,
    writer: GroupCommitWriter,
    index: VectorIndex | None,
    *,
    ledger: ErasureLedger | None = None,
) -> SqlAdapters:
    """`ledger`: in place of the settings' (a tool that erases nothing needs none)."""
    models = ModelSettings.of(settings)
    embedder, summarizer = build_embedder(models), build_summarizer(models)  # ConfigError names them
    signals = LocalSignals() if database.is_sqlite else PgSignals(database.url)
    leadership = SoleReplica() if database.is_sqlite else PgLeadership(database.url)
    feed = SqlChangeFeed(database, writer, origin=uuid.uuid4().hex, signals=signals)
    eraser = SqlEraser(database, writer)
    tokens, digests, episodes = (
        TiktokenCounter(),
        SqlDigestStore(database, writer),
        SqlEpisodeStore(database, writer, system.utc_now),
    )
    model = indexed_with(embedder.model_id)
    # a pre-built index is whole; otherwise each scope loads from SQL on first use
    whole = index is not None
    sources = (
        None
        if whole
        else ScopeSources(
            SqlDigestVectors(database, model),
            SqlMemoryVectors(database, model),
            SqlKnowledgeVectors(database, embedder.model_id),
        )
    )
    return SqlAdapters(
        recently_active=SqlRecentlyActive(database),
        tokens=tokens,
        agents=SqlAgentStore(database, writer),
        episodes=episodes,
        users=episodes,
        digests=digests,
        digest_keys=digests,
        context=SqlContextStore(database, writer),
        embedder=embedder,
        summarizer=summarizer,
        inline_summarizer=ExtractiveSummarizer(),
        index=index if index is not None else FaissVectorIndex(embedder.dimension),
        memories=SqlMemoryStore(database, writer, embedding_model=model, clock=system.utc_now),
        sessions=SqlSessionDataStore(database, writer, system.utc_now),
        memory_index=FaissVectorIndex(embedder.dimension),
        knowledge=SqlKnowledgeStore(database, writer),
        knowledge_index=FaissVectorIndex(embedder.dimension),
        extractor=build_extractor(models),
        eraser=eraser,
        erasure_records=eraser,
        erasure_ledger=build_ledger(DatabaseSettings.of(settings)) if ledger is None else ledger,
        transfer=SqlTransfer(database, writer),
        retention=SqlRetention(database, writer, retention_caps(settings)),
        leadership=leadership,
        signals=signals,
        feed=feed,
        change_log=feed,
        drafts=SqlDraftStore(database, writer),
        sources=sources,
        clock=system.utc_now,  # read when built: a test may put a skewed clock there (cluster_helpers)
        monotonic=time.monotonic,
        new_episode_id=system.new_episode_id,
        new_id=system.new_call_id,
        reads=database,
        cluster_now=DatabaseClock(database, system.utc_now).now,
        database=database,
        writer=writer,
        tiktoken=tokens,
        replica_signals=signals,
        replica_leadership=leadership,
        sql_digests=digests,
    )


# Of the index cache's bytes, memories get this share (they are fewer and shorter-lived), and
# agents' knowledge this one (one scope per agent, shared by all its users); episodes the rest.
MEMORY_CACHE_SHARE = 0.25


KNOWLEDGE_CACHE_SHARE = 0.15  # its vectors


KNOWLEDGE_WORDS_SHARE = 0.10  # its word index: ~0.7 KiB a chunk against a vector's 1-1.5 KiB


def build_indexes(
    caches: CacheSettings, adapters: Adapters, lock: asyncio.Lock
) -> tuple[IndexCache, IndexCache, IndexCache]:
    """Per-scope caches of SQL (or, over whole indexes without sources: tools holding a
    pre-built index, the unit tests' fakes, the index itself): episodes', memories' and
    knowledge's."""
    if adapters.sources is None:
        whole = (adapters.index, adapters.memory_index, adapters.knowledge_index)
        return WholeIndex(whole[0]), WholeIndex(whole[1]), WholeIndex(whole[2])
    dim, total = adapters.embedder.dimension, caches.index_cache_bytes
    memory_bytes = max(1, int(total * MEMORY_CACHE_SHARE))
    knowledge_bytes = max(1, int(total * KNOWLEDGE_CACHE_SHARE))
    episodes = ResidentScopes(
        adapters.index, adapters.sources.digests, dimension=dim,
        max_bytes=max(1, total - memory_bytes - knowledge_bytes), lock=lock,
    )  # fmt: skip
    memories = ResidentScopes(
        adapters.memory_index, adapters.sources.memories, dimension=dim, max_bytes=memory_bytes, lock=lock
    )
    knowledge = ResidentScopes(
        adapters.knowledge_index,
        adapters.sources.knowledge,
        dimension=dim,
        max_bytes=knowledge_bytes,
        lock=lock,
    )
    return episodes, memories, knowledge


def load_tracing(telemetry: TelemetrySettings) -> Tracing:
    """The SDK, from the OTEL_* variables config captured with the settings."""
    try:
        return tracing_from_env(telemetry.otel_environ)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def build_ledger(database: DatabaseSettings) -> ErasureLedger:
    """A ledger whose directory is missing fails the start, not the first erasure."""
    path = ledger_path(database.erasure_ledger, database.database_url)
    if path is None:  # the erasures are complete, but a restore of an older backup would undo them
        log.warning(
            "no erasure ledger: restoring an older backup of this database would bring back users "
            "erased since; set EPISODIC_ERASURE_LEDGER to a file every replica shares"
        )
        return NoErasureLedger()
    if not path.parent.is_dir():
        raise ConfigError(f"erasure_ledger: the directory of {path} does not exist")
    return FileErasureLedger(path)
