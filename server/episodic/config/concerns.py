"""What each part of the server takes of the settings: a small frozen view per concern, built
from the one flat `Settings` by `of`. A field that is one setting keeps its name, so it is
found in docs/configuration.md as it is spelled; `dev_tenant` is the tenant a call without a
key is served as (None unless --insecure-dev). An edge or a factory takes its view, never the
whole table."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Self, TypeVar

from episodic.config.choices import EmbedderKind, ExtractorKind, LogLevel, SummarizerKind
from episodic.config.settings import Settings

V = TypeVar("V")


def _view(cls: type[V], settings: Settings, **given: object) -> V:
    """`cls` with each of its fields not `given` read from the setting of the same name."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]  # every view is a dataclass
    return cls(**{f.name: getattr(settings, f.name) for f in fields if f.name not in given}, **given)


def _dev_tenant(settings: Settings) -> str | None:
    return settings.dev_tenant if settings.insecure_dev else None


@dataclass(frozen=True, slots=True)
class CallerSettings:
    """Who may call (gRPC, inspector, MCP): the API keys, inline and in a file, and whether a
    call without a key is served (as `dev_tenant`: --insecure-dev)."""

    api_keys: str
    api_keys_file: str
    insecure_dev: bool
    dev_tenant: str

    @classmethod
    def of(cls, settings: Settings) -> Self:
        return _view(cls, settings)


@dataclass(frozen=True, slots=True)
class GrpcSettings:
    """The gRPC listener: its address, message sizes, keepalive and connection limits, how
    long calls in flight get at shutdown, and the dev tenant."""

    address: str
    max_receive_message_bytes: int
    max_send_message_bytes: int
    keepalive_time_ms: int
    keepalive_timeout_ms: int
    max_concurrent_streams: int
    max_connections: int
    max_connection_age_seconds: float
    max_connection_age_grace_seconds: float
    max_connection_idle_seconds: float
    max_connection_handshake_seconds: float
    shutdown_grace_seconds: float
    dev_tenant: str | None

    @classmethod
    def of(cls, settings: Settings) -> Self:
        return _view(cls, settings, dev_tenant=_dev_tenant(settings))


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """The PEM files of the gRPC listener; none set serves plaintext."""

    tls_cert_file: str
    tls_key_file: str
    tls_client_ca_file: str

    @classmethod
    def of(cls, settings: Settings) -> Self:
        return _view(cls, settings)


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """What every HTTP listener (inspector, metrics, MCP) holds against strangers."""

    header_seconds: float = 10.0  # from the connection (or the previous answer) to a whole head
    body_seconds: float = 30.0  # from the head to the whole body
    keepalive_seconds: float = 5.0  # idle between requests
    max_connections: int = 256  # per listener, well below the open-file limit

    @classmethod
    def of(cls, settings: Settings) -> Self:
        return cls(
            header_seconds=settings.http_header_timeout_seconds,
            body_seconds=settings.http_body_timeout_seconds,
            keepalive_seconds=settings.http_keepalive_seconds,
            max_connections=settings.http_max_connections,
        )


@dataclass(frozen=True, slots=True)
class InspectorSettings:
    """The context inspector: its listener (empty address: off, else held to `http`), its
    link to traces, and the dev tenant."""

    inspector_address: str
    inspector_trace_url: str
    dev_tenant: str | None
    http: HttpLimits

    @classmethod
    def of(cls, settings: Settings) -> Self:
        return _view(cls, settings, dev_tenant=_dev_tenant(settings), http=HttpLimits.of(settings))


@dataclass(frozen=True, slots=True)
class McpSettings:
    """`episodic mcp`: its HTTP address (empty: stdio; else held to `http`), the key stdio
    is served as, and the dev tenant."""

    mcp_address: str
    mcp_api_key: str
    dev_tenant: str | None
    http: HttpLimits

    @classmethod
    def of(cls, settings: Settings) -> Self:
        return _view(cls, settings, dev_tenant=_dev_tenant(settings), http=HttpLimits.of(settings))


@dataclass(frozen=True, slots=True)
class DatabaseSettings:
    """The database: where it is, its pool and writers, its timeouts, its erasure ledger."""

    database_url: str
    db_pool_size: int
    db_writers: int
    db_statement_timeout_seconds: float
    db_connect_timeout_seconds: float
    migrate_on_start: bool
    erasure_ledger: str

    @classmethod
    def of(cls, settings: Settings) -> Self:
        return _view(cls, settings)


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """The models: the embedder, the summarizer and the memory extractor, and how many
    episodes are digested at once."""

    embedder: EmbedderKind
    embedder_url: str
    embedder_model: str
    embedder_api_key: str
    model_cache_dir: str
    xdg_cache_home: str
    summarizer: SummarizerKind
    summarizer_url: str
    summarizer_model: str
    summarizer_api_key: str
    extractor: ExtractorKind
    digest_workers: int
    bulk_embed_threads: int
    embedder_threads: int

    @classmethod
    def of(cls, settings: Settings) -> Self:
        return _view(cls, settings)


@dataclass(frozen=True, slots=True)
class CacheSettings:
    """The RAM the in-memory caches may hold."""

    working_set_max_bytes: int
    index_cache_bytes: int
    knowledge_cache_bytes: int

    @classmethod
    def of(cls, settings: Settings) -> Self:
        return _view(cls, settings)


@dataclass(frozen=True, slots=True)
class TelemetrySettings:
    """Logs, metrics and tracing: what is recorded and where it is served."""

    log_level: LogLevel
    access_log: bool
    metrics_address: str
    metrics_tenant_labels: bool
    otel_environ: Mapping[str, str]

    @classmethod
    def of(cls, settings: Settings) -> Self:
        return _view(cls, settings)
