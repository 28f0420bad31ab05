"""The settings: one flat table, each setting a field of `Settings` made by `setting(...)`
(episodic.config.options), so flags, variables and docs/configuration.md (`episodic
config-docs`) come from one declaration. What each part of the server takes is a small view
of it (episodic.config.concerns); the domain values are built by episodic.config.values."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from episodic.config.choices import EmbedderKind, ExtractorKind, LogLevel, SummarizerKind
from episodic.config.options import (
    BACKUP,
    CALLERS,
    DATABASE,
    DEV_MODE,
    ENGINE,
    GRPC,
    MCP,
    Option,
    Section,
    at_least,
    check_address,
    check_optional_address,
    check_tenant_days,
    check_tenant_pii_policies,
    check_trace_url,
    more_than_zero,
    options_of,
    server_pii_policy,
    setting,
)
from episodic.domain.model import PiiPolicy
from episodic.domain.shares import ShareLimits

_SHARES = ShareLimits()  # the shares' defaults, declared once with what they mean


@dataclass(frozen=True, slots=True)
class Settings:
    address: str = setting(
        "127.0.0.1:50051",
        "HOST:PORT the gRPC server listens on (port 0 picks a free port).",
        commands=GRPC,
        check=check_address,
        section=Section.SERVER,
    )
    database_url: str = setting(
        "sqlite:///episodic.db",
        "SQLAlchemy URL: sqlite:///FILE (default) or postgresql://USER@HOST:PORT/DB; several PostgreSQL servers in any form libpq takes, e.g. postgresql://USER@H1:P1,H2:P2/DB?target_session_attrs=read-write (docs/deployment.md).",
        commands=DATABASE,
        section=Section.DATABASE,
    )
    insecure_dev: bool = setting(
        False,
        "Serve calls that carry no API key as the dev tenant (wrong keys are still refused). Local development only.",
        commands=DEV_MODE,
        section=Section.CALLERS,
    )
    dev_tenant: str = setting(
        "dev",
        "Tenant used for unauthenticated calls in --insecure-dev mode.",
        commands=DEV_MODE,
        section=Section.CALLERS,
    )
    api_keys: str = setting(
        "",
        "API key hashes, comma-separated: tenant_id=sha256:<hex>, optionally ;agents=A|B to restrict the key to those agents (see `episodic keygen`).",
        commands=CALLERS,
        section=Section.CALLERS,
        brief="API key hashes, comma-separated: tenant_id=sha256:<hex>[;agents=A|B]",
    )
    api_keys_file: str = setting(
        "",
        "File of API key hashes, one per line, same syntax as --api-keys; # starts a comment.",
        commands=CALLERS,
        section=Section.CALLERS,
    )
    mcp_address: str = setting(
        "",
        "HOST:PORT `episodic mcp` serves the Model Context Protocol on (streamable HTTP at /mcp; every request carries its own API key as a bearer token). Empty: MCP over stdin/stdout.",
        commands=MCP,
        check=check_optional_address,
        section=Section.MCP,
    )
    mcp_api_key: str = setting(
        "",
        "The API key `episodic mcp` serves stdio as: one of the keys of --api-keys / --api-keys-file, which decides the tenant and agents (prefer the variable to the flag, which other users can see). Unused over HTTP.",
        commands=MCP,
        section=Section.MCP,
        brief="The API key `episodic mcp` serves stdio as (prefer the variable: flags are visible)",
    )
    tls_cert_file: str = setting(
        "",
        "PEM server certificate (chain); with --tls-key-file, the server speaks TLS only.",
        commands=GRPC,
        section=Section.TLS,
    )
    tls_key_file: str = setting(
        "",
        "PEM private key of --tls-cert-file.",
        commands=GRPC,
        section=Section.TLS,
    )
    tls_client_ca_file: str = setting(
        "",
        "PEM CA bundle; when set, clients must present a certificate it signed (mutual TLS).",
        commands=GRPC,
        section=Section.TLS,
    )
    migrate_on_start: bool = setting(
        False,
        "Apply database migrations before serving.",
        commands=CALLERS,
        section=Section.DATABASE,
    )
    shutdown_grace_seconds: float = setting(
        10.0,
        "On SIGTERM/SIGINT, how long in-flight RPCs may finish.",
        commands=GRPC,
        section=Section.SERVER,
    )
    gil_switch_interval_ms: float = setting(
        0.5,
        "How long a thread may keep Python's GIL while another waits for it (sys.setswitchinterval), in ms. Every embedding, SQLite or gRPC thread hands its result back by taking the GIL from the busy event loop, and waits up to this long; at Python's default 5 ms a turn's query embedding took 2-6x its own time beside the loop.",
        commands=GRPC,
        check=at_least(0.05),
        section=Section.SERVER,
    )
    max_receive_message_bytes: int = setting(
        4 * 1024 * 1024,
        "Largest request the server accepts.",
        commands=GRPC,
        section=Section.CONNECTIONS,
    )
    max_send_message_bytes: int = setting(
        16 * 1024 * 1024,
        "Largest response the server sends.",
        commands=GRPC,
        section=Section.CONNECTIONS,
    )
    keepalive_time_ms: int = setting(
        60_000,
        "Interval of server keepalive pings.",
        commands=GRPC,
        section=Section.CONNECTIONS,
    )
    keepalive_timeout_ms: int = setting(
        20_000,
        "How long to wait for a keepalive ack before closing.",
        commands=GRPC,
        section=Section.CONNECTIONS,
    )
    max_content_bytes: int = setting(
        256 * 1024,
        "Largest message content (UTF-8 bytes).",
        check=at_least(1),
        section=Section.REQUESTS,
    )
    max_batch_messages: int = setting(
        500,
        "Most messages in one AddMessages call.",
        check=at_least(1),
        section=Section.REQUESTS,
    )
    max_json_bytes: int = setting(
        64 * 1024,
        "Largest metadata or tool payload, as JSON bytes.",
        section=Section.REQUESTS,
    )
    db_pool_size: int = setting(
        8,
        "Database connections for reads (and writes on PostgreSQL).",
        commands=DATABASE,
        check=at_least(1),
        section=Section.DATABASE,
    )
    db_writers: int = setting(
        1,
        "Concurrent group-commit writers on PostgreSQL (SQLite always uses 1). One gives the largest batches; more help only when the database is remote.",
        check=at_least(1),
        section=Section.DATABASE,
    )
    db_statement_timeout_seconds: float = setting(
        10.0,
        "PostgreSQL: longest a request's statement (or lock wait) may take; a statement unanswered 2 s past it means a hung database: UNAVAILABLE, health NOT_SERVING until a probe answers. Migrations and erasure's VACUUM are not bounded.",
        check=at_least(0.01),
        section=Section.DATABASE,
    )
    db_connect_timeout_seconds: float = setting(
        5.0,
        "PostgreSQL: longest a new connection may take to open.",
        check=at_least(0.01),
        section=Section.DATABASE,
    )
    working_set_max_bytes: int = setting(
        256 * 1024 * 1024,
        "RAM for the working sets of active conversations (latest summary + verbatim tail each); least recently used ones are evicted and rebuilt from SQL on their next turn.",
        section=Section.CACHES,
    )
    warm_start_conversations: int = setting(
        1000,
        "At start, the working sets of up to this many most recently active open conversations are read back in the background (and their users' indexes loaded), while they fill at most half of working_set_max_bytes: their first turn after a restart is as fast as their next. 0: off (each is read on its first turn).",
        check=at_least(0),
        section=Section.CACHES,
        brief="open conversations whose working sets are read back at start, most recent first",
    )
    index_cache_bytes: int = setting(
        1024 * 1024 * 1024,
        "RAM for vectors: each scope (tenant, agent, user; an agent's knowledge) is loaded from SQL on its first search and the least recently used are dropped beyond this (half for episodes' digests, a quarter for memories, 15% for knowledge's vectors and 10% for its word index). Start-up loads nothing.",
        check=at_least(1),
        section=Section.CACHES,
        brief="RAM for vectors, each scope loaded on its first search, least recently used dropped",
    )
    knowledge_cache_bytes: int = setting(
        256 * 1024 * 1024,
        "RAM for agents' document chunks (text and fields, ~1 KB a chunk of ~400 characters) that knowledge searches return, so a warm search or BuildContext reads no SQL for knowledge: an agent's first search that misses reads all of its chunks in, in the background, while they fit in half of this; least recently used dropped beyond it.",
        check=at_least(1),
        section=Section.CACHES,
        brief="RAM for agents' document chunks that knowledge searches return",
    )
    feed_poll_seconds: float = setting(
        0.5,
        "How often a replica reads the change feed when no notification woke it (PostgreSQL LISTEN/NOTIFY wakes it at once; the poll is the safety net for a lost notification).",
        check=at_least(0.01),
        section=Section.REPLICAS,
    )
    feed_retention_seconds: float = setting(
        600.0,
        "How long change feed rows are kept; a replica cut off for longer reloads every scope on next use.",
        check=at_least(0.01),
        section=Section.REPLICAS,
    )
    retention_grace_days: float = setting(
        7.0,
        "How long a soft-deleted episode (past its agent's retention_days) waits before it is purged for good.",
        section=Section.RETENTION,
    )
    retention_sweep_seconds: float = setting(
        3600.0,
        "How often the retention job soft-deletes expired episodes and purges old soft-deleted ones.",
        section=Section.RETENTION,
    )
    retention_tenant_days: str = setting(
        "",
        "Per-tenant caps on how long closed episodes are kept, e.g. acme=30,globex=365: an agent's retention_days (even 0, forever) is capped by its tenant's.",
        check=check_tenant_days,
        section=Section.RETENTION,
    )
    pii_policy: PiiPolicy = setting(
        PiiPolicy.OFF,
        "off or redact: whether emails, phone and card numbers, IBANs, SSNs, IP addresses and secrets are replaced by placeholders ([EMAIL]...) before storage, embedding and rendering. Applies to agents whose pii_policy is unspecified.",
        parse=server_pii_policy,
        section=Section.PRIVACY,
        brief="off or redact: PII replaced by placeholders before storage, embedding and rendering",
    )
    pii_tenant_policies: str = setting(
        "",
        "Per-tenant overrides of pii_policy, e.g. acme=redact,globex=off.",
        check=check_tenant_pii_policies,
        section=Section.PRIVACY,
    )
    erasure_ledger: str = setting(
        "",
        "File every erasure is appended to (JSON lines: tenant, hash of the user id, never the id), outside the database, so that restoring an older backup cannot bring an erased user back: the server replays it at start. Empty: beside a SQLite database (FILE.erasures.jsonl for sqlite:///FILE); none on PostgreSQL (set it to a path every replica shares). Back it up, never roll it back.",
        commands=ENGINE | BACKUP,
        section=Section.DATABASE,
        brief="File every erasure is appended to, replayed at start",
        shown="FILE.erasures.jsonl beside sqlite:///FILE; none on PostgreSQL",
    )
    log_level: LogLevel = setting(
        LogLevel.INFO,
        "DEBUG, INFO, WARNING, ERROR or CRITICAL.",
        commands=DATABASE,
        section=Section.SERVER,
    )
    embedder: EmbedderKind = setting(
        EmbedderKind.MINILM,
        "Embedding model: minilm (local all-MiniLM-L6-v2 on CPU in int8 arithmetic, ~2x faster), minilm-fp32 (the same model in fp32 arithmetic: the quality-first choice), openai (an OpenAI-compatible /embeddings endpoint) or hashing (tests only). Switching re-embeds the stored digests in the background.",
        section=Section.MODELS,
    )
    embedder_url: str = setting(
        "",
        "Base URL of the embeddings endpoint (embedder=openai), e.g. http://localhost:11434/v1.",
        section=Section.MODELS,
    )
    embedder_model: str = setting(
        "",
        "Model name sent to the embeddings endpoint (embedder=openai).",
        section=Section.MODELS,
    )
    embedder_api_key: str = setting(
        "",
        "Bearer key for the embeddings endpoint, if it needs one.",
        section=Section.MODELS,
    )
    model_cache_dir: str = setting(
        "",
        "Directory where the int8 embedding model, derived from the shipped one at the first start, is kept for later starts (checked against both models' checksums at every load). Empty: $XDG_CACHE_HOME/episodic/models, else ~/.cache/episodic/models.",
        section=Section.MODELS,
        brief="Directory of the cached int8 embedding model",
        shown="$XDG_CACHE_HOME/episodic/models, else ~/.cache/episodic/models",
    )
    bulk_embed_threads: int = setting(
        1,
        "Threads that embed in bulk (documents' chunks as CreateDocuments writes them, memories, digests), tenants in turn; a query's embedding never waits behind them. 1 leaves a core to the event loop and the queries (on 2 busy cores a second thread loaded SciFact 1.3x faster but made a concurrent SearchKnowledge's p50 1.4x slower: `episodic-lab bench-ingest`); more load knowledge faster where cores are spare.",
        check=at_least(1),
        section=Section.MODELS,
        brief="Threads embedding documents, memories, digests",
    )
    embedder_threads: int = setting(
        1,
        "onnxruntime intra-op threads each call of the local embedder (minilm, minilm-fp32) takes. 1: calls run side by side, each on its own core, and none takes the event loop's; a second thread only paid on a core left idle.",
        check=at_least(1),
        section=Section.MODELS,
        brief="onnxruntime threads per embedder call",
    )
    digest_workers: int = setting(
        1,
        "Closed episodes digested at once, each embedding on its own core. 1 leaves the other cores to the RPCs while a backlog drains; the number of cores drains it fastest (see docs/operations.md for the figures).",
        check=at_least(1),
        section=Section.MODELS,
    )
    summarizer: SummarizerKind = setting(
        SummarizerKind.EXTRACTIVE,
        "Digest summarizer: extractive (deterministic, local) or openai (an OpenAI-compatible chat endpoint; falls back to extractive on failure).",
        section=Section.MODELS,
    )
    summarizer_url: str = setting(
        "",
        "Base URL of the chat endpoint (summarizer=openai).",
        section=Section.MODELS,
    )
    summarizer_model: str = setting(
        "",
        "Model name sent to the chat endpoint (summarizer=openai).",
        section=Section.MODELS,
    )
    summarizer_api_key: str = setting(
        "",
        "Bearer key for the chat endpoint, if it needs one.",
        section=Section.MODELS,
    )
    extractor: ExtractorKind = setting(
        ExtractorKind.EXTRACTIVE,
        "Memory extractor run when an episode closes: extractive (deterministic, local) or openai (the chat endpoint of EPISODIC_SUMMARIZER_URL / _MODEL / _API_KEY, with each agent's memory_extraction_prompt; falls back to extractive on failure).",
        section=Section.MODELS,
    )
    idle_sweep_seconds: float = setting(
        30.0,
        "How often open episodes are checked against their agent's idle timeout.",
        section=Section.RETENTION,
    )
    max_concurrent_streams: int = setting(
        1000,
        "Most RPCs one connection may have in flight (HTTP/2 MAX_CONCURRENT_STREAMS); further streams are refused. Caps the responses one client that stops reading can hold (docs/operations.md); keep it above any client's burst of concurrent calls (a burst sent before the client has read this limit is refused as UNAVAILABLE).",
        commands=GRPC,
        check=at_least(1),
        section=Section.CONNECTIONS,
    )
    max_concurrent_rpcs: int = setting(
        1000,
        "Most RPCs in flight over all tenants (health, reflection and Echo not counted: they are never refused for capacity); more are refused at once with RESOURCE_EXHAUSTED. A safety net above the tenants' shares (tenant_max_rpcs).",
        commands=GRPC,
        check=at_least(1),
        section=Section.CONNECTIONS,
    )
    max_connections: int = setting(
        2000,
        "Most gRPC connections open at once (all clients); further connections are closed at accept. Keep it well below the process's open-file limit.",
        commands=GRPC,
        check=at_least(1),
        section=Section.CONNECTIONS,
    )
    max_connection_handshake_seconds: float = setting(
        10.0,
        "A gRPC connection that has not completed its HTTP/2 (and TLS) handshake this long after it was accepted is closed.",
        commands=GRPC,
        check=more_than_zero(0.001),
        section=Section.CONNECTIONS,
        brief="A gRPC connection not through its HTTP/2 (and TLS) handshake this long is closed",
    )
    max_connection_idle_seconds: float = setting(
        300.0,
        "A gRPC connection with no call for this long is closed (GOAWAY; clients reconnect when they next call).",
        commands=GRPC,
        check=more_than_zero(0.001),
        section=Section.CONNECTIONS,
    )
    tenant_rate_per_second: float = setting(
        _SHARES.rate_per_second,
        "Each tenant's share: RPCs it may start per second (a token bucket; health, reflection and Echo are free). Over it: RESOURCE_EXHAUSTED with QuotaFailure and RetryInfo.",
        commands=GRPC,
        check=more_than_zero(),
        section=Section.SHARES,
    )
    tenant_rate_burst: int = setting(
        _SHARES.rate_burst,
        "Each tenant's share: RPCs it may start at once above its rate (the bucket's size).",
        commands=GRPC,
        check=at_least(1),
        section=Section.SHARES,
    )
    tenant_max_rpcs: int = setting(
        _SHARES.rpcs,
        "Each tenant's share: RPCs in flight at once (running, waiting for a turn, or streaming).",
        commands=GRPC,
        check=at_least(1),
        section=Section.SHARES,
    )
    tenant_max_active: int = setting(
        _SHARES.active,
        "Each tenant's share: its RPCs that run at once; its others wait, holding no CPU. While tenants contend, a freed turn goes to the tenant running fewest, then to the one served least recently. Every turn shares the one event loop: raise it on a server of one tenant.",
        commands=GRPC,
        check=at_least(1),
        section=Section.SHARES,
    )
    tenant_max_streams: int = setting(
        _SHARES.streams,
        "Each tenant's share: server streams open at once (BuildContext and WatchEpisode).",
        commands=GRPC,
        check=at_least(1),
        section=Section.SHARES,
    )
    tenant_max_unsent_bytes: int = setting(
        _SHARES.unsent_bytes,
        "Each tenant's share: bytes of responses its clients have not yet read; a response past it is refused. Bounds what one tenant's stalled clients make the server hold.",
        commands=GRPC,
        check=at_least(1),
        section=Section.SHARES,
    )
    tenant_max_watchers: int = setting(
        _SHARES.watchers,
        "Each tenant's share: WatchEpisode streams on this server (within max_watchers).",
        commands=GRPC,
        check=at_least(1),
        section=Section.SHARES,
    )
    tenant_memory_writes_per_second: float = setting(
        _SHARES.memory_writes_per_second,
        "Each tenant's share: memories it may write (create or update) per second, each one embedded.",
        commands=CALLERS,
        check=more_than_zero(),
        section=Section.SHARES,
    )
    tenant_memory_writes_burst: int = setting(
        _SHARES.memory_writes_burst,
        "Each tenant's share: memories it may write at once above that rate (a larger batch is let through from a full bucket and slows the next ones).",
        commands=CALLERS,
        check=at_least(1),
        section=Section.SHARES,
    )
    tenant_knowledge_chunks_per_second: float = setting(
        _SHARES.knowledge_chunks_per_second,
        "Each tenant's share: chunks of documents it may write (create or update) per second, each one embedded.",
        commands=CALLERS,
        check=more_than_zero(),
        section=Section.SHARES,
    )
    tenant_knowledge_chunks_burst: int = setting(
        _SHARES.knowledge_chunks_burst,
        "Each tenant's share: document chunks it may write at once above that rate (a knowledge base is loaded in bulk; a larger batch is let through from a full bucket and slows the next ones).",
        commands=CALLERS,
        check=at_least(1),
        section=Section.SHARES,
    )
    tenant_import_bytes_per_second: float = setting(
        _SHARES.import_bytes_per_second,
        "Each tenant's share: bytes of ImportUser records it may send per second, over all its imports (each part is held whole until checked, then written); an import over it waits up to a second, then is refused (the parts written stay; importing again skips them).",
        commands=CALLERS,
        check=more_than_zero(),
        section=Section.SHARES,
    )
    tenant_import_bytes_burst: int = setting(
        _SHARES.import_bytes_burst,
        "Each tenant's share: import bytes it may send at once above that rate; keep it at least one largest part (64 MiB), so a part is never slowed below the rate.",
        commands=CALLERS,
        check=at_least(1),
        section=Section.SHARES,
    )
    tenant_import_held_bytes: int = setting(
        _SHARES.import_held_bytes,
        "Each tenant's share: bytes of import parts its imports running at once may hold in memory before each part is checked and written (one part is at most 64 MiB); more is refused until a part is written.",
        commands=CALLERS,
        check=at_least(1),
        section=Section.SHARES,
        brief="Each tenant's share: bytes of import parts held in memory until checked and written",
    )
    max_context_tokens: int = setting(
        1_000_000,
        "Largest context BuildContext renders, in tokens, whatever an agent's context_window_tokens says: a server limit no tenant's configuration lifts.",
        check=at_least(1),
        section=Section.REQUESTS,
        brief="Largest context BuildContext renders, in tokens, whatever an agent says",
    )
    metrics_tenant_labels: bool = setting(
        False,
        "Label refusal metrics with the tenant id (off: tenant ids never appear in metrics).",
        commands=GRPC,
        section=Section.HTTP,
    )
    max_watchers: int = setting(
        500,
        "Most WatchEpisode streams this server serves at once; more are refused with RESOURCE_EXHAUSTED.",
        commands=GRPC,
        check=at_least(1),
        section=Section.WATCH,
    )
    max_watchers_per_episode: int = setting(
        100,
        "Most WatchEpisode streams of one episode on this server; more are refused with RESOURCE_EXHAUSTED.",
        commands=GRPC,
        check=at_least(1),
        section=Section.WATCH,
    )
    watch_buffer_events: int = setting(
        1024,
        "Events one watcher may have waiting to be sent; a watcher further behind (or past watch_buffer_bytes) is cut with RESOURCE_EXHAUSTED and watches again from its last seq.",
        commands=GRPC,
        check=at_least(1),
        section=Section.WATCH,
    )
    watch_buffer_bytes: int = setting(
        4 * 1024 * 1024,
        "About how many bytes of text one watcher may have waiting to be sent (see watch_buffer_events).",
        commands=GRPC,
        check=at_least(1),
        section=Section.WATCH,
    )
    max_drafts_per_episode: int = setting(
        4,
        "Assistant replies in progress (PushAssistantDelta drafts) one episode may have; at the limit a new one replaces only a draft nobody pushed to for 10 minutes.",
        check=at_least(1),
        section=Section.REQUESTS,
    )
    max_connection_age_seconds: float = setting(
        600.0,
        "After this long a connection is asked to reconnect (HTTP/2 GOAWAY; gRPC clients do so transparently).",
        commands=GRPC,
        check=more_than_zero(0.001),
        section=Section.CONNECTIONS,
    )
    max_connection_age_grace_seconds: float = setting(
        60.0,
        "How long calls in flight on a connection asked to reconnect may still finish; then it is closed. Age plus grace is the longest a client that stops reading holds its responses.",
        commands=GRPC,
        check=more_than_zero(0.001),
        section=Section.CONNECTIONS,
    )
    access_log: bool = setting(
        True,
        "One JSON line per RPC on stderr (method, status, duration, peer). Set false to turn off.",
        commands=GRPC,
        section=Section.SERVER,
    )
    inspector_address: str = setting(
        "",
        "HOST:PORT serving the read-only context inspector (a web page and its JSON, same API keys as gRPC; plaintext: put TLS in front of it beyond localhost). Empty: no inspector.",
        commands=GRPC,
        check=check_optional_address,
        section=Section.HTTP,
    )
    inspector_trace_url: str = setting(
        "",
        "Link from a model call's trace id to your tracing UI: an http(s) URL template with {trace_id}, e.g. http://localhost:16686/trace/{trace_id}. Empty: the id is shown unlinked.",
        commands=GRPC,
        check=check_trace_url,
        section=Section.HTTP,
    )
    metrics_address: str = setting(
        "",
        "HOST:PORT serving Prometheus metrics on GET /metrics (plaintext, no authentication: bind it to a private interface). Empty: no metrics.",
        commands=GRPC,
        check=check_optional_address,
        section=Section.HTTP,
    )
    http_header_timeout_seconds: float = setting(
        10.0,
        "HTTP listeners (inspector, metrics, MCP): a request whose line and headers have not all arrived this long after the connection opened (or the previous answer) is closed.",
        commands=CALLERS,
        check=at_least(0.01),
        section=Section.HTTP,
        brief="HTTP listeners: a request whose line and headers took this long is closed",
    )
    http_body_timeout_seconds: float = setting(
        30.0,
        "HTTP listeners: a request body that has not all arrived this long after its headers is closed.",
        commands=CALLERS,
        check=at_least(0.01),
        section=Section.HTTP,
    )
    http_keepalive_seconds: float = setting(
        5.0,
        "HTTP listeners: an idle kept-alive connection is closed after this long.",
        commands=CALLERS,
        check=at_least(0.01),
        section=Section.HTTP,
    )
    http_max_connections: int = setting(
        256,
        "HTTP listeners: open connections each one holds at most; one more is answered 503 and closed at once.",
        commands=CALLERS,
        check=at_least(1),
        section=Section.HTTP,
    )
    # The OTEL_* variables as read at start-up, for the tracing setup (docs/observability.md).
    # Not an Episodic setting, so no Option: empty unless loaded from an environment.
    otel_environ: Mapping[str, str] = dataclasses.field(default_factory=dict, hash=False)
    # XDG_CACHE_HOME as read at start-up, for the default model_cache_dir; not a setting.
    xdg_cache_home: str = dataclasses.field(default="", hash=False)


OPTIONS: tuple[Option, ...] = options_of(Settings)
