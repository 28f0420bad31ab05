"""Settings, read once from the environment and command-line flags (flags win).
This is the only module that reads os.environ. OPTIONS is also the source of the
configuration table in docs/configuration.md (`episodic config-docs`)."""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from episodic.domain.drafts import DraftLimits
from episodic.domain.model import PiiPolicy
from episodic.domain.shares import ShareLimits
from episodic.domain.validation import Limits
from episodic.domain.watch import WatchLimits

# Which subcommands take a setting as a flag: `episodic <command> --help` lists only its own.
# The environment is read whole either way; a variable a command does not use is ignored.
ENGINE = frozenset({"serve", "mcp", "reindex"})  # what the memory engine needs, served or not
DATABASE = ENGINE | {"migrate", "model-call"}  # every command that opens the database
CALLERS = frozenset({"serve", "mcp"})  # who may call and how callers are held back
GRPC = frozenset({"serve"})  # the gRPC listener itself


@dataclass(frozen=True, slots=True)
class Option:
    """A setting's outside names; its type and default are those of the Settings field."""

    name: str
    env: str
    help: str
    commands: frozenset[str] = ENGINE

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def default(self) -> object:
        return _FIELDS[self.name].default

    @property
    def kind(self) -> type:
        return type(self.default)


OPTIONS: tuple[Option, ...] = (
    Option(
        "address",
        "EPISODIC_ADDRESS",
        "HOST:PORT the gRPC server listens on (port 0 picks a free port).",
        commands=GRPC,
    ),
    Option(
        "database_url",
        "EPISODIC_DATABASE_URL",
        "SQLAlchemy URL: sqlite:///FILE (default) or postgresql://USER@HOST:PORT/DB.",
        commands=DATABASE,
    ),
    Option(
        "insecure_dev",
        "EPISODIC_INSECURE_DEV",
        "Serve calls that carry no API key as the dev tenant (wrong keys are still refused). Local development only.",
        commands=CALLERS,
    ),
    Option(
        "dev_tenant",
        "EPISODIC_DEV_TENANT",
        "Tenant used for unauthenticated calls in --insecure-dev mode.",
        commands=CALLERS,
    ),
    Option(
        "api_keys",
        "EPISODIC_API_KEYS",
        "API key hashes, comma-separated: tenant_id=sha256:<hex>, optionally ;agents=A|B to restrict the key to those agents (see `episodic keygen`).",
        commands=CALLERS,
    ),
    Option(
        "api_keys_file",
        "EPISODIC_API_KEYS_FILE",
        "File of API key hashes, one per line, same syntax as --api-keys; # starts a comment.",
        commands=CALLERS,
    ),
    Option(
        "mcp_address",
        "EPISODIC_MCP_ADDRESS",
        "HOST:PORT `episodic mcp` serves the Model Context Protocol on (streamable HTTP at /mcp; every request carries its own API key as a bearer token). Empty: MCP over stdin/stdout.",
        commands=frozenset({"mcp"}),
    ),
    Option(
        "mcp_api_key",
        "EPISODIC_MCP_API_KEY",
        "The API key `episodic mcp` serves stdio as: one of the keys of --api-keys / --api-keys-file, which decides the tenant and agents (prefer the variable to the flag, which other users can see). Unused over HTTP.",
        commands=frozenset({"mcp"}),
    ),
    Option(
        "tls_cert_file",
        "EPISODIC_TLS_CERT_FILE",
        "PEM server certificate (chain); with --tls-key-file, the server speaks TLS only.",
        commands=GRPC,
    ),
    Option("tls_key_file", "EPISODIC_TLS_KEY_FILE", "PEM private key of --tls-cert-file.", commands=GRPC),
    Option(
        "tls_client_ca_file",
        "EPISODIC_TLS_CLIENT_CA_FILE",
        "PEM CA bundle; when set, clients must present a certificate it signed (mutual TLS).",
        commands=GRPC,
    ),
    Option(
        "migrate_on_start",
        "EPISODIC_MIGRATE_ON_START",
        "Apply database migrations before serving.",
        commands=CALLERS,
    ),
    Option(
        "shutdown_grace_seconds",
        "EPISODIC_SHUTDOWN_GRACE_SECONDS",
        "On SIGTERM/SIGINT, how long in-flight RPCs may finish.",
        commands=GRPC,
    ),
    Option(
        "max_receive_message_bytes",
        "EPISODIC_MAX_RECEIVE_MESSAGE_BYTES",
        "Largest request the server accepts.",
        commands=GRPC,
    ),
    Option(
        "max_send_message_bytes",
        "EPISODIC_MAX_SEND_MESSAGE_BYTES",
        "Largest response the server sends.",
        commands=GRPC,
    ),
    Option(
        "keepalive_time_ms",
        "EPISODIC_KEEPALIVE_TIME_MS",
        "Interval of server keepalive pings.",
        commands=GRPC,
    ),
    Option(
        "keepalive_timeout_ms",
        "EPISODIC_KEEPALIVE_TIMEOUT_MS",
        "How long to wait for a keepalive ack before closing.",
        commands=GRPC,
    ),
    Option("max_content_bytes", "EPISODIC_MAX_CONTENT_BYTES", "Largest message content (UTF-8 bytes)."),
    Option("max_batch_messages", "EPISODIC_MAX_BATCH_MESSAGES", "Most messages in one AddMessages call."),
    Option("max_json_bytes", "EPISODIC_MAX_JSON_BYTES", "Largest metadata or tool payload, as JSON bytes."),
    Option(
        "db_pool_size",
        "EPISODIC_DB_POOL_SIZE",
        "Database connections for reads (and writes on PostgreSQL).",
        commands=DATABASE,
    ),
    Option(
        "db_writers",
        "EPISODIC_DB_WRITERS",
        "Concurrent group-commit writers on PostgreSQL (SQLite always uses 1). One gives the largest batches; more help only when the database is remote.",
    ),
    Option(
        "db_statement_timeout_seconds",
        "EPISODIC_DB_STATEMENT_TIMEOUT_SECONDS",
        "PostgreSQL: longest a request's statement (or lock wait) may take; a statement unanswered 2 s past it means a hung database: UNAVAILABLE, health NOT_SERVING until a probe answers. Migrations and erasure's VACUUM are not bounded.",
    ),
    Option(
        "db_connect_timeout_seconds",
        "EPISODIC_DB_CONNECT_TIMEOUT_SECONDS",
        "PostgreSQL: longest a new connection may take to open.",
    ),
    Option(
        "working_set_max_bytes",
        "EPISODIC_WORKING_SET_MAX_BYTES",
        "RAM for the working sets of active conversations (latest summary + verbatim tail each); least recently used ones are evicted and rebuilt from SQL on their next turn.",
    ),
    Option(
        "index_cache_bytes",
        "EPISODIC_INDEX_CACHE_BYTES",
        "RAM for vectors: each scope (tenant, agent, user) is loaded from SQL on its first search and the least recently used are dropped beyond this (three quarters for episodes' digests, one quarter for memories). Start-up loads nothing.",
    ),
    Option(
        "feed_poll_seconds",
        "EPISODIC_FEED_POLL_SECONDS",
        "How often a replica reads the change feed when no notification woke it (PostgreSQL LISTEN/NOTIFY wakes it at once; the poll is the safety net for a lost notification).",
    ),
    Option(
        "feed_retention_seconds",
        "EPISODIC_FEED_RETENTION_SECONDS",
        "How long change feed rows are kept; a replica cut off for longer reloads every scope on next use.",
    ),
    Option(
        "retention_grace_days",
        "EPISODIC_RETENTION_GRACE_DAYS",
        "How long a soft-deleted episode (past its agent's retention_days) waits before it is purged for good.",
    ),
    Option(
        "retention_sweep_seconds",
        "EPISODIC_RETENTION_SWEEP_SECONDS",
        "How often the retention job soft-deletes expired episodes and purges old soft-deleted ones.",
    ),
    Option(
        "retention_tenant_days",
        "EPISODIC_RETENTION_TENANT_DAYS",
        "Per-tenant caps on how long closed episodes are kept, e.g. acme=30,globex=365: an agent's retention_days (even 0, forever) is capped by its tenant's.",
    ),
    Option(
        "pii_policy",
        "EPISODIC_PII_POLICY",
        "off or redact: whether emails, phone and card numbers, IBANs, SSNs, IP addresses and secrets are replaced by placeholders ([EMAIL]...) before storage, embedding and rendering. Applies to agents whose pii_policy is unspecified.",
    ),
    Option(
        "pii_tenant_policies",
        "EPISODIC_PII_TENANT_POLICIES",
        "Per-tenant overrides of pii_policy, e.g. acme=redact,globex=off.",
    ),
    Option("log_level", "EPISODIC_LOG_LEVEL", "DEBUG, INFO, WARNING, ERROR or CRITICAL.", commands=DATABASE),
    Option(
        "embedder",
        "EPISODIC_EMBEDDER",
        "Embedding model: minilm (local all-MiniLM-L6-v2 on CPU in int8 arithmetic, ~2x faster), minilm-fp32 (the same model in fp32 arithmetic: the quality-first choice), openai (an OpenAI-compatible /embeddings endpoint) or hashing (tests only). Switching re-embeds the stored digests in the background.",
    ),
    Option(
        "embedder_url",
        "EPISODIC_EMBEDDER_URL",
        "Base URL of the embeddings endpoint (embedder=openai), e.g. http://localhost:11434/v1.",
    ),
    Option(
        "embedder_model",
        "EPISODIC_EMBEDDER_MODEL",
        "Model name sent to the embeddings endpoint (embedder=openai).",
    ),
    Option(
        "embedder_api_key",
        "EPISODIC_EMBEDDER_API_KEY",
        "Bearer key for the embeddings endpoint, if it needs one.",
    ),
    Option(
        "digest_workers",
        "EPISODIC_DIGEST_WORKERS",
        "Closed episodes digested at once, each embedding on its own core. 1 leaves the other cores to the RPCs while a backlog drains; the number of cores drains it fastest (see docs/operations.md for the figures).",
    ),
    Option(
        "summarizer",
        "EPISODIC_SUMMARIZER",
        "Digest summarizer: extractive (deterministic, local) or openai (an OpenAI-compatible chat endpoint; falls back to extractive on failure).",
    ),
    Option("summarizer_url", "EPISODIC_SUMMARIZER_URL", "Base URL of the chat endpoint (summarizer=openai)."),
    Option(
        "summarizer_model",
        "EPISODIC_SUMMARIZER_MODEL",
        "Model name sent to the chat endpoint (summarizer=openai).",
    ),
    Option(
        "summarizer_api_key",
        "EPISODIC_SUMMARIZER_API_KEY",
        "Bearer key for the chat endpoint, if it needs one.",
    ),
    Option(
        "extractor",
        "EPISODIC_EXTRACTOR",
        "Memory extractor run when an episode closes: extractive (deterministic, local) or openai (the chat endpoint of EPISODIC_SUMMARIZER_URL / _MODEL / _API_KEY, with each agent's memory_extraction_prompt; falls back to extractive on failure).",
    ),
    Option(
        "idle_sweep_seconds",
        "EPISODIC_IDLE_SWEEP_SECONDS",
        "How often open episodes are checked against their agent's idle timeout.",
    ),
    Option(
        "max_concurrent_streams",
        "EPISODIC_MAX_CONCURRENT_STREAMS",
        "Most RPCs one connection may have in flight (HTTP/2 MAX_CONCURRENT_STREAMS); further streams are refused. Caps the responses one client that stops reading can hold (docs/operations.md); keep it above any client's burst of concurrent calls (a burst sent before the client has read this limit is refused as UNAVAILABLE).",
        commands=GRPC,
    ),
    Option(
        "max_concurrent_rpcs",
        "EPISODIC_MAX_CONCURRENT_RPCS",
        "Most RPCs in flight over all tenants (health, reflection and Echo not counted: they are never refused for capacity); more are refused at once with RESOURCE_EXHAUSTED. A safety net above the tenants' shares (tenant_max_rpcs).",
        commands=GRPC,
    ),
    Option(
        "max_connections",
        "EPISODIC_MAX_CONNECTIONS",
        "Most gRPC connections open at once (all clients); further connections are closed at accept. Keep it well below the process's open-file limit.",
        commands=GRPC,
    ),
    Option(
        "max_connection_handshake_seconds",
        "EPISODIC_MAX_CONNECTION_HANDSHAKE_SECONDS",
        "A gRPC connection that has not completed its HTTP/2 (and TLS) handshake this long after it was accepted is closed.",
        commands=GRPC,
    ),
    Option(
        "max_connection_idle_seconds",
        "EPISODIC_MAX_CONNECTION_IDLE_SECONDS",
        "A gRPC connection with no call for this long is closed (GOAWAY; clients reconnect when they next call).",
        commands=GRPC,
    ),
    Option(
        "tenant_rate_per_second",
        "EPISODIC_TENANT_RATE_PER_SECOND",
        "Each tenant's share: RPCs it may start per second (a token bucket; health, reflection and Echo are free). Over it: RESOURCE_EXHAUSTED with QuotaFailure and RetryInfo.",
        commands=GRPC,
    ),
    Option(
        "tenant_rate_burst",
        "EPISODIC_TENANT_RATE_BURST",
        "Each tenant's share: RPCs it may start at once above its rate (the bucket's size).",
        commands=GRPC,
    ),
    Option(
        "tenant_max_rpcs",
        "EPISODIC_TENANT_MAX_RPCS",
        "Each tenant's share: RPCs in flight at once (running, waiting for a turn, or streaming).",
        commands=GRPC,
    ),
    Option(
        "tenant_max_active",
        "EPISODIC_TENANT_MAX_ACTIVE",
        "Each tenant's share: its RPCs that run at once; its others wait in line, in order, holding no CPU. What keeps one tenant's flood from slowing the others.",
        commands=GRPC,
    ),
    Option(
        "tenant_max_streams",
        "EPISODIC_TENANT_MAX_STREAMS",
        "Each tenant's share: server streams open at once (BuildContext and WatchEpisode).",
        commands=GRPC,
    ),
    Option(
        "tenant_max_unsent_bytes",
        "EPISODIC_TENANT_MAX_UNSENT_BYTES",
        "Each tenant's share: bytes of responses its clients have not yet read; a response past it is refused. Bounds what one tenant's stalled clients make the server hold.",
        commands=GRPC,
    ),
    Option(
        "tenant_max_watchers",
        "EPISODIC_TENANT_MAX_WATCHERS",
        "Each tenant's share: WatchEpisode streams on this server (within max_watchers).",
        commands=GRPC,
    ),
    Option(
        "tenant_memory_writes_per_second",
        "EPISODIC_TENANT_MEMORY_WRITES_PER_SECOND",
        "Each tenant's share: memories it may write (create or update) per second, each one embedded.",
        commands=CALLERS,
    ),
    Option(
        "tenant_memory_writes_burst",
        "EPISODIC_TENANT_MEMORY_WRITES_BURST",
        "Each tenant's share: memories it may write at once above that rate (a larger batch is let through from a full bucket and slows the next ones).",
        commands=CALLERS,
    ),
    Option(
        "max_context_tokens",
        "EPISODIC_MAX_CONTEXT_TOKENS",
        "Largest context BuildContext renders, in tokens, whatever an agent's context_window_tokens says: a server limit no tenant's configuration lifts.",
    ),
    Option(
        "metrics_tenant_labels",
        "EPISODIC_METRICS_TENANT_LABELS",
        "Label refusal metrics with the tenant id (off: tenant ids never appear in metrics).",
        commands=GRPC,
    ),
    Option(
        "max_watchers",
        "EPISODIC_MAX_WATCHERS",
        "Most WatchEpisode streams this server serves at once; more are refused with RESOURCE_EXHAUSTED.",
        commands=GRPC,
    ),
    Option(
        "max_watchers_per_episode",
        "EPISODIC_MAX_WATCHERS_PER_EPISODE",
        "Most WatchEpisode streams of one episode on this server; more are refused with RESOURCE_EXHAUSTED.",
        commands=GRPC,
    ),
    Option(
        "watch_buffer_events",
        "EPISODIC_WATCH_BUFFER_EVENTS",
        "Events one watcher may have waiting to be sent; a watcher further behind (or past watch_buffer_bytes) is cut with RESOURCE_EXHAUSTED and watches again from its last seq.",
        commands=GRPC,
    ),
    Option(
        "watch_buffer_bytes",
        "EPISODIC_WATCH_BUFFER_BYTES",
        "About how many bytes of text one watcher may have waiting to be sent (see watch_buffer_events).",
        commands=GRPC,
    ),
    Option(
        "max_drafts_per_episode",
        "EPISODIC_MAX_DRAFTS_PER_EPISODE",
        "Assistant replies in progress (PushAssistantDelta drafts) one episode may have; at the limit a new one replaces only a draft nobody pushed to for 10 minutes.",
    ),
    Option(
        "max_connection_age_seconds",
        "EPISODIC_MAX_CONNECTION_AGE_SECONDS",
        "After this long a connection is asked to reconnect (HTTP/2 GOAWAY; gRPC clients do so transparently).",
        commands=GRPC,
    ),
    Option(
        "max_connection_age_grace_seconds",
        "EPISODIC_MAX_CONNECTION_AGE_GRACE_SECONDS",
        "How long calls in flight on a connection asked to reconnect may still finish; then it is closed. Age plus grace is the longest a client that stops reading holds its responses.",
        commands=GRPC,
    ),
    Option(
        "access_log",
        "EPISODIC_ACCESS_LOG",
        "One JSON line per RPC on stderr (method, status, duration, peer). Set false to turn off.",
        commands=GRPC,
    ),
    Option(
        "inspector_address",
        "EPISODIC_INSPECTOR_ADDRESS",
        "HOST:PORT serving the read-only context inspector (a web page and its JSON, same API keys as gRPC; plaintext: put TLS in front of it beyond localhost). Empty: no inspector.",
        commands=GRPC,
    ),
    Option(
        "inspector_trace_url",
        "EPISODIC_INSPECTOR_TRACE_URL",
        "Link from a model call's trace id to your tracing UI: an http(s) URL template with {trace_id}, e.g. http://localhost:16686/trace/{trace_id}. Empty: the id is shown unlinked.",
        commands=GRPC,
    ),
    Option(
        "metrics_address",
        "EPISODIC_METRICS_ADDRESS",
        "HOST:PORT serving Prometheus metrics on GET /metrics (plaintext, no authentication: bind it to a private interface). Empty: no metrics.",
        commands=GRPC,
    ),
    Option(
        "http_header_timeout_seconds",
        "EPISODIC_HTTP_HEADER_TIMEOUT_SECONDS",
        "HTTP listeners (inspector, metrics, MCP): a request whose line and headers have not all arrived this long after the connection opened (or the previous answer) is closed.",
        commands=CALLERS,
    ),
    Option(
        "http_body_timeout_seconds",
        "EPISODIC_HTTP_BODY_TIMEOUT_SECONDS",
        "HTTP listeners: a request body that has not all arrived this long after its headers is closed.",
        commands=CALLERS,
    ),
    Option(
        "http_keepalive_seconds",
        "EPISODIC_HTTP_KEEPALIVE_SECONDS",
        "HTTP listeners: an idle kept-alive connection is closed after this long.",
        commands=CALLERS,
    ),
    Option(
        "http_max_connections",
        "EPISODIC_HTTP_MAX_CONNECTIONS",
        "HTTP listeners: open connections each one holds at most; one more is answered 503 and closed at once.",
        commands=CALLERS,
    ),
)


T = TypeVar("T")


class ConfigError(ValueError):
    """A setting has a value that cannot be used; the message names it."""


@dataclass(frozen=True, slots=True)
class TlsMaterial:
    """The PEM bytes of the TLS files; `client_ca` set means clients must present a
    certificate it signed."""

    certificate_chain: bytes
    private_key: bytes
    client_ca: bytes | None = None


_SHARES = ShareLimits()  # the shares' defaults, declared once with what they mean


@dataclass(frozen=True, slots=True)
class Settings:
    address: str = "127.0.0.1:50051"
    database_url: str = "sqlite:///episodic.db"
    insecure_dev: bool = False
    dev_tenant: str = "dev"
    api_keys: str = ""
    api_keys_file: str = ""
    mcp_address: str = ""
    mcp_api_key: str = ""
    tls_cert_file: str = ""
    tls_key_file: str = ""
    tls_client_ca_file: str = ""
    migrate_on_start: bool = False
    shutdown_grace_seconds: float = 10.0
    max_receive_message_bytes: int = 4 * 1024 * 1024
    max_send_message_bytes: int = 16 * 1024 * 1024
    keepalive_time_ms: int = 60_000
    keepalive_timeout_ms: int = 20_000
    max_content_bytes: int = 256 * 1024
    max_batch_messages: int = 500
    max_json_bytes: int = 64 * 1024
    db_pool_size: int = 8
    db_writers: int = 1
    db_statement_timeout_seconds: float = 10.0
    db_connect_timeout_seconds: float = 5.0
    working_set_max_bytes: int = 256 * 1024 * 1024
    index_cache_bytes: int = 1024 * 1024 * 1024
    feed_poll_seconds: float = 0.5
    feed_retention_seconds: float = 600.0
    retention_grace_days: float = 7.0
    retention_sweep_seconds: float = 3600.0
    retention_tenant_days: str = ""
    pii_policy: str = "off"
    pii_tenant_policies: str = ""
    log_level: str = "INFO"
    embedder: str = "minilm"
    embedder_url: str = ""
    embedder_model: str = ""
    embedder_api_key: str = ""
    digest_workers: int = 1
    summarizer: str = "extractive"
    summarizer_url: str = ""
    summarizer_model: str = ""
    summarizer_api_key: str = ""
    extractor: str = "extractive"
    idle_sweep_seconds: float = 30.0
    max_concurrent_streams: int = 1000
    max_concurrent_rpcs: int = 1000
    max_connections: int = 2000
    max_connection_handshake_seconds: float = 10.0
    max_connection_idle_seconds: float = 300.0
    tenant_rate_per_second: float = _SHARES.rate_per_second
    tenant_rate_burst: int = _SHARES.rate_burst
    tenant_max_rpcs: int = _SHARES.rpcs
    tenant_max_active: int = _SHARES.active
    tenant_max_streams: int = _SHARES.streams
    tenant_max_unsent_bytes: int = _SHARES.unsent_bytes
    tenant_max_watchers: int = _SHARES.watchers
    tenant_memory_writes_per_second: float = _SHARES.memory_writes_per_second
    tenant_memory_writes_burst: int = _SHARES.memory_writes_burst
    max_context_tokens: int = 1_000_000
    metrics_tenant_labels: bool = False
    max_watchers: int = 500
    max_watchers_per_episode: int = 100
    watch_buffer_events: int = 1024
    watch_buffer_bytes: int = 4 * 1024 * 1024
    max_drafts_per_episode: int = 4
    max_connection_age_seconds: float = 600.0
    max_connection_age_grace_seconds: float = 60.0
    access_log: bool = True
    inspector_address: str = ""
    inspector_trace_url: str = ""
    metrics_address: str = ""
    http_header_timeout_seconds: float = 10.0
    http_body_timeout_seconds: float = 30.0
    http_keepalive_seconds: float = 5.0
    http_max_connections: int = 256
    # The OTEL_* variables as read at start-up, for the tracing setup (docs/observability.md).
    # Not an Episodic setting, so no Option: empty unless loaded from an environment.
    otel_environ: Mapping[str, str] = dataclasses.field(default_factory=dict, hash=False)

    @property
    def limits(self) -> Limits:
        return Limits(
            max_content_bytes=self.max_content_bytes,
            max_batch_messages=self.max_batch_messages,
            max_json_bytes=self.max_json_bytes,
            max_context_tokens=self.max_context_tokens,
        )

    @property
    def share_limits(self) -> ShareLimits:
        return ShareLimits(
            rate_per_second=self.tenant_rate_per_second,
            rate_burst=self.tenant_rate_burst,
            rpcs=self.tenant_max_rpcs,
            active=self.tenant_max_active,
            streams=self.tenant_max_streams,
            unsent_bytes=self.tenant_max_unsent_bytes,
            watchers=self.tenant_max_watchers,
            memory_writes_per_second=self.tenant_memory_writes_per_second,
            memory_writes_burst=self.tenant_memory_writes_burst,
            server_rpcs=self.max_concurrent_rpcs,
        )

    @property
    def watch_limits(self) -> WatchLimits:
        return WatchLimits(
            per_episode=self.max_watchers_per_episode,
            per_process=self.max_watchers,
            per_tenant=self.tenant_max_watchers,
            buffer_events=self.watch_buffer_events,
            buffer_bytes=self.watch_buffer_bytes,
            replay=self.limits.max_page_size,
        )

    @property
    def draft_limits(self) -> DraftLimits:
        return DraftLimits(max_bytes=self.max_content_bytes, per_episode=self.max_drafts_per_episode)

    def retention_caps(self) -> dict[str, int]:
        """Tenant -> the most days its closed episodes may be kept."""
        return _per_tenant("retention_tenant_days", self.retention_tenant_days, _days)

    def pii_policies(self) -> tuple[PiiPolicy, dict[str, PiiPolicy]]:
        """The server's default policy and the per-tenant ones."""
        default = _pii_policy("pii_policy", self.pii_policy)
        return default, _per_tenant("pii_tenant_policies", self.pii_tenant_policies, _pii_policy)

    def api_key_text(self) -> str:
        """Inline keys plus the keys file's content (read here, once, at start-up)."""
        text = self.api_keys
        if self.api_keys_file:
            try:
                text += "\n" + Path(self.api_keys_file).read_text()
            except OSError as exc:
                raise ConfigError(f"api_keys_file: cannot read {self.api_keys_file}: {exc}") from exc
        return text

    def tls_material(self) -> TlsMaterial | None:
        """The TLS files' content (read here, once, at start-up); None serves plaintext."""
        _check_tls(self)
        if not self.tls_cert_file:
            return None
        client_ca = self.tls_client_ca_file
        return TlsMaterial(
            _read_pem("tls_cert_file", self.tls_cert_file, _PEM_CERTIFICATE),
            _read_pem("tls_key_file", self.tls_key_file, _PEM_PRIVATE_KEY),
            _read_pem("tls_client_ca_file", client_ca, _PEM_CERTIFICATE) if client_ca else None,
        )


_PEM_CERTIFICATE = (b"-----BEGIN CERTIFICATE-----", "certificate")
_PEM_PRIVATE_KEY = (b"PRIVATE KEY-----", "private key")  # PKCS#8, EC or RSA


def _read_pem(name: str, path: str, expected: tuple[bytes, str]) -> bytes:
    """gRPC reports a file that is not PEM (or a swapped cert and key) only as "failed to
    bind", so the shape is checked here, where the message can name the setting."""
    data = read_named_file(name, path)
    marker, what = expected
    if marker not in data:
        raise ConfigError(f"{name}: {path} holds no PEM {what}")
    return data


def read_named_file(name: str, path: str) -> bytes:
    """A file a setting or flag names; ConfigError names the setting if it cannot be read."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{name}: cannot read {path}: {exc}") from exc


def _per_tenant(name: str, raw: str, parse: Callable[[str, str], T]) -> dict[str, T]:
    """`tenant=value,tenant=value` -> {tenant: parse(name, value)}."""
    found: dict[str, T] = {}
    for entry in filter(None, (e.strip() for e in raw.split(","))):
        tenant, sep, value = entry.partition("=")
        if not sep or not tenant.strip():
            raise ConfigError(f"{name}: {entry!r} is not tenant=value")
        found[tenant.strip()] = parse(name, value)
    return found


def _days(name: str, raw: str) -> int:
    if not raw.strip().isdigit() or int(raw) < 1:
        raise ConfigError(f"{name}: {raw!r} is not a number of days, at least 1")
    return int(raw)


def _pii_policy(name: str, raw: str) -> PiiPolicy:
    value = raw.strip().lower()
    if value not in (PiiPolicy.OFF, PiiPolicy.REDACT):
        raise ConfigError(f"{name}: {raw!r} is not off or redact")
    return PiiPolicy(value)


def _parse_bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"not a boolean: {raw!r}")


def _convert(option: Option, raw: str) -> object:
    parse: Callable[[str], object] = _parse_bool if option.kind is bool else option.kind
    try:
        return parse(raw)
    except ValueError as exc:
        raise ConfigError(f"{option.env}: {exc}") from exc


def from_environment(environ: Mapping[str, str]) -> dict[str, object]:
    return {o.name: _convert(o, environ[o.env]) for o in OPTIONS if o.env in environ}


def otel_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The OTEL_* subset, captured with the settings so nothing else reads the environment."""
    return {name: value for name, value in environ.items() if name.startswith("OTEL_")}


def add_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """The flags of the settings `command` uses."""
    for o in OPTIONS:
        if command not in o.commands:
            continue
        if o.kind is bool:
            parser.add_argument(o.flag, action=argparse.BooleanOptionalAction, default=None, help=o.help)
        else:
            parser.add_argument(o.flag, type=o.kind, default=None, help=f"{o.help} [env {o.env}]")


def load(environ: Mapping[str, str], args: argparse.Namespace) -> Settings:
    values = from_environment(environ)
    values.update({o.name: getattr(args, o.name) for o in OPTIONS if getattr(args, o.name, None) is not None})
    settings = Settings(**values, otel_environ=otel_environment(environ))  # type: ignore[arg-type]
    _check(settings)
    return settings


def load_process(args: argparse.Namespace) -> Settings:
    """The settings of this process: its environment, then its command-line flags."""
    return load(os.environ, args)


def address_of_process() -> str:
    """The gRPC address this process's environment names (for probes), else the default."""
    return str(from_environment(os.environ).get("address") or Settings().address)


def _check(settings: Settings) -> None:
    split_address("address", settings.address)
    for name in ("mcp_address", "metrics_address", "inspector_address"):  # optional listeners
        if getattr(settings, name):
            split_address(name, getattr(settings, name))
    _check_trace_url(settings.inspector_trace_url)
    for name in (
        "max_content_bytes",
        "max_batch_messages",
        "db_pool_size",
        "db_writers",
        "max_concurrent_streams",
        "max_concurrent_rpcs",
        "max_connections",
        "tenant_rate_burst",
        "tenant_max_rpcs",
        "tenant_max_active",
        "tenant_max_streams",
        "tenant_max_unsent_bytes",
        "tenant_max_watchers",
        "tenant_memory_writes_burst",
        "max_context_tokens",
        "index_cache_bytes",
        "digest_workers",
        "max_watchers",
        "max_watchers_per_episode",
        "watch_buffer_events",
        "watch_buffer_bytes",
        "max_drafts_per_episode",
        "http_max_connections",
    ):
        if getattr(settings, name) < 1:
            raise ConfigError(f"{name}: must be at least 1")
    for name in (
        "db_statement_timeout_seconds",
        "db_connect_timeout_seconds",
        "feed_poll_seconds",
        "feed_retention_seconds",
        "http_header_timeout_seconds",
        "http_body_timeout_seconds",
        "http_keepalive_seconds",
    ):
        if not getattr(settings, name) >= 0.01:
            raise ConfigError(f"{name}: must be at least 0.01")
    if settings.log_level.upper() not in _LOG_LEVELS:
        raise ConfigError(f"log_level: {settings.log_level!r} is not DEBUG, INFO, WARNING, ERROR or CRITICAL")
    _check_connection_age(settings)
    _check_tls(settings)


_LOG_LEVELS = frozenset({"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"})


def split_address(name: str, address: str) -> tuple[str, int]:
    """HOST:PORT of setting `name` as (host without IPv6 brackets, port); the one parser of
    every listening address."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"{name}: want HOST:PORT, got {address!r}")
    if int(port) > 65535:
        raise ConfigError(f"{name}: port {port} is out of range (0-65535; 0 picks a free port)")
    return host.strip("[]"), int(port)


def _check_trace_url(template: str) -> None:
    if template and (not template.startswith(("http://", "https://")) or "{trace_id}" not in template):
        raise ConfigError(
            "inspector_trace_url: want an http(s) URL containing {trace_id}, e.g. http://localhost:16686/trace/{trace_id}"
        )


def _check_connection_age(settings: Settings) -> None:
    """Both become milliseconds for gRPC, where 0 or less would mean no limit at all."""
    if not settings.max_connection_age_seconds >= 0.001:
        raise ConfigError("max_connection_age_seconds: must be more than 0")
    if not settings.max_connection_age_grace_seconds >= 0.001:
        raise ConfigError("max_connection_age_grace_seconds: must be more than 0")
    for name in ("max_connection_idle_seconds", "max_connection_handshake_seconds"):
        if not getattr(settings, name) >= 0.001:
            raise ConfigError(f"{name}: must be more than 0")
    for name in ("tenant_rate_per_second", "tenant_memory_writes_per_second"):
        if not getattr(settings, name) > 0:  # also refuses NaN
            raise ConfigError(f"{name}: must be more than 0")


def _check_tls(settings: Settings) -> None:
    """A certificate without its key (or the reverse) is a half-done setup, never plaintext."""
    if settings.tls_cert_file and not settings.tls_key_file:
        raise ConfigError("tls_key_file: required when tls_cert_file is set")
    if settings.tls_key_file and not settings.tls_cert_file:
        raise ConfigError("tls_cert_file: required when tls_key_file is set")
    if settings.tls_client_ca_file and not settings.tls_cert_file:
        raise ConfigError("tls_client_ca_file: mutual TLS needs tls_cert_file and tls_key_file too")


def markdown_table(options: Sequence[Option] = OPTIONS) -> str:
    rows = ["| flag | environment | default | meaning |", "| --- | --- | --- | --- |"]
    for o in options:
        default = "off" if o.default is False else f"`{o.default}`" if o.default != "" else "(empty)"
        rows.append(f"| `{o.flag}` | `{o.env}` | {default} | {o.help} |")
    return "\n".join(rows) + "\n"


_FIELDS = {f.name: f for f in dataclasses.fields(Settings) if f.name != "otel_environ"}
assert list(_FIELDS) == [o.name for o in OPTIONS], "every setting needs exactly one Option"
