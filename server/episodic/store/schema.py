"""Tables of the log. Every row carries its tenant; primary keys lead with it so every
index is tenant-scoped by construction. Changes here need an Alembic migration."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Dialect,
    Float,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.sql.expression import true as sa_true
from sqlalchemy.types import TypeDecorator

ID = String(128)


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC on the way in and out, whatever the backend keeps."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def result_processor(self, dialect: Dialect, coltype: object) -> Callable[[Any], datetime | None] | None:
        """On SQLite, the stored text parsed straight to an aware datetime: SQLAlchemy's
        parse and then `replace(tzinfo=...)` took 0.84 us a value against 0.09, and a turn's
        reads bring a few hundred of them (a recalled digest has four)."""
        if dialect.name == "sqlite":
            return _utc_from_sqlite
        return super().result_processor(dialect, coltype)


def _utc_from_sqlite(value: str | None) -> datetime | None:
    """SQLAlchemy's SQLite storage format ("2026-12-01 10:11:12.123456", naive UTC) read
    as UTC; any other text fromisoformat reads (a zone of its own: converted to UTC)."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value + "+00:00")
    except ValueError:  # a zone of its own
        other = datetime.fromisoformat(value)
        return other.replace(tzinfo=UTC) if other.tzinfo is None else other.astimezone(UTC)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)  # a date alone


Json = JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")


def _owned_by(parent: str) -> ForeignKeyConstraint:
    """Rows that belong to one episode (or its digest) and go when it goes."""
    return ForeignKeyConstraint(
        ["tenant_id", "episode_id"], [f"{parent}.tenant_id", f"{parent}.episode_id"], ondelete="CASCADE"
    )


metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

agents = Table(
    "agents",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("agent_id", ID, primary_key=True),
    Column("display_name", Text, nullable=False),
    Column("system_prompt", Text, nullable=False),
    Column("model", String(256), nullable=False),
    Column("token_encoding", String(64), nullable=False),
    Column("encoding_pinned", Boolean, nullable=False),
    Column("max_working_memory_tokens", Integer, nullable=False),
    Column("context_window_tokens", Integer, nullable=False),
    Column("context_ceiling_percent", Integer, nullable=False),
    Column("recall_mode", String(16), nullable=False),
    Column("recall_top_k", Integer, nullable=False),
    Column("recall_min_score", Float, nullable=False),
    Column("tool_results_kept_verbatim", Integer, nullable=False),
    Column("idle_timeout_seconds", Float, nullable=False),
    Column("retention_days", Integer, nullable=False, server_default="90"),  # migration 0006
    Column("pii_policy", String(16), nullable=False, server_default="inherit"),  # migration 0006
    # long-term memories (migration 0007)
    Column("known_facts", Boolean, nullable=False, server_default=sa_true()),
    Column("memory_top_k", Integer, nullable=False, server_default="5"),
    Column("memory_min_score", Float, nullable=False, server_default="0.3"),
    Column("session_data_keys", Json),
    Column("memory_extraction_prompt", Text, nullable=False, server_default=""),
    Column("extract_memories", Boolean, nullable=False, server_default=sa_true()),
    # knowledge and the sections' shares of the budget (migration 0012)
    Column("knowledge", Boolean, nullable=False, server_default=sa_true()),
    Column("knowledge_top_k", Integer, nullable=False, server_default="5"),
    Column("knowledge_min_score", Float, nullable=False, server_default="0.3"),
    Column("knowledge_budget_percent", Integer, nullable=False, server_default="25"),
    Column("known_facts_budget_percent", Integer, nullable=False, server_default="25"),
    Column("recall_budget_percent", Integer, nullable=False, server_default="50"),
    Column("earlier_budget_percent", Integer, nullable=False, server_default="50"),  # migration 0015
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
)

episodes = Table(
    "episodes",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("episode_id", ID, primary_key=True),
    Column("agent_id", ID, nullable=False),
    Column("user_id", ID, nullable=False),
    Column("state", String(16), nullable=False),
    Column("token_encoding", String(64), nullable=False),
    Column("started_at", UtcDateTime, nullable=False),
    Column("ended_at", UtcDateTime),
    Column("close_reason", String(32)),
    Column("close_note", Text, nullable=False),
    Column("metadata", Json),
    Column("message_count", BigInteger, nullable=False),
    Column("token_count", BigInteger, nullable=False),
    Column("last_activity_at", UtcDateTime, nullable=False),
    Column("deleted_at", UtcDateTime),  # soft-deleted by retention (migration 0006)
    ForeignKeyConstraint(["tenant_id", "agent_id"], ["agents.tenant_id", "agents.agent_id"]),
    Index(None, "tenant_id", "agent_id", "user_id", "started_at"),
    Index(None, "tenant_id", "started_at"),
    Index(None, "state", "last_activity_at"),
    Index(None, "tenant_id", "agent_id", "state", "ended_at"),  # the retention sweep (0006)
    Index(None, "deleted_at"),  # the purge (0006)
)

messages = Table(
    "messages",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("episode_id", ID, primary_key=True),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("role", String(16), nullable=False),
    Column("content", Text, nullable=False),
    Column("token_count", Integer, nullable=False),
    Column("token_encoding", String(64), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("client_message_id", ID),
    Column("fingerprint", String(64), nullable=False),
    Column("metadata", Json),
    Column("tool_calls", Json),
    Column("tool_result", Json),
    # Set once by RetractMessage (migration 0014): the message stays in the log, no
    # projection uses it again. Content is never edited.
    Column("retracted_at", UtcDateTime),
    _owned_by("episodes"),
    Index(None, "tenant_id", "episode_id", "client_message_id", unique=True),
)

tool_calls = Table(
    "tool_calls",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("episode_id", ID, primary_key=True),
    Column("tool_call_id", ID, primary_key=True),
    Column("tool_name", ID, nullable=False),
    Column("input", Json),
    Column("call_seq", BigInteger, nullable=False),
    Column("has_result", Boolean, nullable=False),
    Column("output", Json),
    Column("succeeded", Boolean, nullable=False),
    Column("error", Text, nullable=False),
    Column("called_at", UtcDateTime),
    Column("duration_seconds", Float),
    Column("result_seq", BigInteger),
    _owned_by("episodes"),
)

# --- recall (migration 0002) ------------------------------------------------------------


def _recall_key(*more_key: Column[int]) -> list[Column[str] | Column[int]]:
    """(tenant, episode[, more key]) plus the agent and user, which name the recall scope."""
    return [
        Column("tenant_id", ID, primary_key=True),
        Column("episode_id", ID, primary_key=True),
        *more_key,
        Column("agent_id", ID, nullable=False),
        Column("user_id", ID, nullable=False),
    ]


digests = Table(
    "digests",
    metadata,
    *_recall_key(),
    Column("state", String(16), nullable=False),
    Column("summary", Text, nullable=False),
    Column("key_facts", Json),
    Column("embedding_model", String(200), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("last_error", Text, nullable=False),
    Column("next_attempt_at", UtcDateTime, nullable=False),
    Column("started_at", UtcDateTime, nullable=False),
    Column("ended_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    _owned_by("episodes"),
    Index(None, "tenant_id", "agent_id", "user_id", "state", "ended_at"),
    Index(None, "state", "next_attempt_at"),
)

# Vectors are the truth FAISS caches per scope (loaded on first use). One row per embedded chunk.
digest_vectors = Table(
    "digest_vectors",
    metadata,
    *_recall_key(Column("chunk", Integer, primary_key=True, autoincrement=False)),
    Column("model", String(200), nullable=False),
    Column("dimension", Integer, nullable=False),
    Column("vector", LargeBinary, nullable=False),
    _owned_by("digests"),
    Index(None, "tenant_id", "agent_id", "user_id"),  # a scope's vectors, loaded on first use
)

# The text lexical search matches (summary, facts and transcript), with its scope token.
# SQLite indexes it with the external-content FTS5 table `digest_fts` (kept in step by
# triggers); PostgreSQL adds a stored tsvector column `body_tsv` (migration 0003).
digest_texts = Table(
    "digest_texts",
    metadata,
    *_recall_key(),
    Column("body", Text, nullable=False),
    Column("scope", String(64), nullable=False, server_default=""),
    _owned_by("digests"),
    Index(None, "tenant_id", "agent_id", "user_id"),
)
DIGEST_FTS = "digest_fts"
FTS_TABLES = (DIGEST_FTS,)  # SQLite's FTS5 tables (knowledge's, of 0011, went in 0013)

# --- context assembly (migration 0004) --------------------------------------------------

# Compaction records. Summaries roll (each covers its predecessor's span), so the working
# set is rebuilt from the one with the highest to_seq plus the messages after it.
summaries = Table(
    "summaries",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("episode_id", ID, primary_key=True),
    Column("to_seq", BigInteger, primary_key=True, autoincrement=False),
    Column("from_seq", BigInteger, nullable=False),
    Column("content", Text, nullable=False),
    Column("token_count", Integer, nullable=False),
    Column("token_encoding", String(64), nullable=False),
    Column("summarizer", String(200), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    _owned_by("episodes"),
)

# The audit of every BuildContext call: the rendered messages exactly as streamed.
model_calls = Table(
    "model_calls",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("model_call_id", ID, primary_key=True),
    Column("episode_id", ID, nullable=False),
    Column("agent_id", ID, nullable=False),
    Column("user_id", ID, nullable=False),
    Column("request_id", ID),
    Column("created_at", UtcDateTime, nullable=False),
    Column("total_tokens", Integer, nullable=False),
    Column("trace_id", String(32), nullable=False),
    Column("messages", Json, nullable=False),
    Column("report", Json, nullable=False),
    Column("reply", Json),
    _owned_by("episodes"),
    Index(None, "tenant_id", "episode_id", "created_at", "model_call_id"),
    Index(None, "tenant_id", "episode_id", "request_id", unique=True),
)

# --- erasure audit (migration 0005) -----------------------------------------------------

# One row per EraseUser: who asked (tenant), a hash of the user id (never the id), the
# agent if the erasure was limited to one, and the receipt's counts.
erasures = Table(
    "erasures",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("erasure_id", ID, primary_key=True),
    Column("user_hash", String(64), nullable=False),
    Column("agent_id", ID),
    Column("counts", Json, nullable=False),
    Column("erased_at", UtcDateTime, nullable=False),
)

# --- long-term memories (migration 0007) ------------------------------------------------

# Memories outlive the episodes they came from: no foreign key to episodes. The vector is
# kept with its row (FAISS caches them per scope); `model` is "" when there is none.
memories = Table(
    "memories",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("memory_id", ID, primary_key=True),
    Column("agent_id", ID, nullable=False),
    Column("user_id", ID, nullable=False),
    Column("state", String(16), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("text", Text, nullable=False),
    Column("text_key", String(64), nullable=False),
    Column("frame_key", String(64), nullable=False),
    Column("fingerprint", String(64), nullable=False),
    Column("topics", Json, nullable=False),
    Column("entities", Json, nullable=False),
    Column("origin", String(16), nullable=False),
    Column("source_episode_id", ID, nullable=False, server_default=""),
    Column("from_seq", BigInteger, nullable=False),
    Column("to_seq", BigInteger, nullable=False),
    Column("episode_id", ID),  # PENDING: the open episode that holds it
    Column("event_time", UtcDateTime),
    Column("expires_at", UtcDateTime),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    Column("last_recalled_at", UtcDateTime),
    Column("superseded_by", ID, nullable=False, server_default=""),
    Column("merge_count", Integer, nullable=False),
    Column("metadata", Json, nullable=False, server_default="{}"),  # migration 0014
    Column("model", String(200), nullable=False),
    Column("dimension", Integer, nullable=False),
    Column("vector", LargeBinary),
    Index(None, "tenant_id", "agent_id", "user_id", "created_at"),
    Index(None, "tenant_id", "agent_id", "user_id", "text_key"),
    Index(None, "tenant_id", "agent_id", "user_id", "frame_key"),
    Index(None, "tenant_id", "episode_id"),
    Index(None, "expires_at"),
    Index(None, "model"),
    Index(None, "tenant_id", "agent_id", "user_id", "state"),  # a scope's vectors, on first use
)

# One JSON object per episode, versioned for optimistic concurrency (ETags).
session_data = Table(
    "session_data",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("episode_id", ID, primary_key=True),
    Column("data", Json, nullable=False),
    Column("version", BigInteger, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime),
    _owned_by("episodes"),
)

# The change feed: every committed change to what recall or BuildContext can see, in commit
# order (`seq` is taken under a lock held to COMMIT), tailed by every replica. `user_hash`
# finds a user's rows at erasure; bodies name scopes, episodes and memories, never content.
changes = Table(
    "changes",
    metadata,
    Column("seq", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True),
    Column("version", Integer, nullable=False),
    Column("kind", String(32), nullable=False),
    Column("tenant_id", ID, nullable=False),
    Column("user_hash", String(64), nullable=False, server_default=""),
    Column("body", Text, nullable=False),
    Column("origin", String(64), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index(None, "tenant_id", "user_hash"),
    sqlite_autoincrement=True,
)

# Marks on the feed: "pruned" = every row up to this seq is gone (a replica behind it reloads).
feed_marks = Table(
    "feed_marks",
    metadata,
    Column("name", String(32), primary_key=True),
    Column("seq", BigInteger, nullable=False),
)

# --- live watching (migration 0009) ---------------------------------------------------

# Assistant replies in progress: never part of the log. A draft goes when it is finalized
# (its text becomes a message), when its episode closes, and with its episode.
drafts = Table(
    "drafts",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("episode_id", ID, primary_key=True),
    Column("draft_id", ID, primary_key=True),
    Column("length", BigInteger, nullable=False),  # Unicode code points
    Column("size", BigInteger, nullable=False),  # UTF-8 bytes
    Column("updated_at", UtcDateTime, nullable=False),
    _owned_by("episodes"),
)

# A draft's text, one row per push that added some (migration 0010): a push inserts its
# delta instead of rewriting the whole text, so its cost does not grow with the reply.
# `start` is the piece's offset in the draft (code points); the pieces tile the text.
draft_pieces = Table(
    "draft_pieces",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("episode_id", ID, primary_key=True),
    Column("draft_id", ID, primary_key=True),
    Column("start", BigInteger, primary_key=True),
    Column("text", Text, nullable=False),
    ForeignKeyConstraint(
        ["tenant_id", "episode_id", "draft_id"],
        ["drafts.tenant_id", "drafts.episode_id", "drafts.draft_id"],
        ondelete="CASCADE",
    ),
)

# --- agent knowledge (migration 0011) ---------------------------------------------------

# An agent's documents, shared by all of its users. No foreign key to agents (as memories):
# DeleteAgent deletes them with the agent. `metadata` is a JSON object of string -> string.
knowledge_documents = Table(
    "knowledge_documents",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("agent_id", ID, primary_key=True),
    Column("document_id", ID, primary_key=True),
    Column("title", Text, nullable=False),
    Column("uri", Text, nullable=False),
    Column("format", String(16), nullable=False),
    Column("text", Text, nullable=False),
    Column("metadata", Json, nullable=False),
    Column("content_hash", String(64), nullable=False),
    Column("chunk_count", Integer, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime),
    Index(None, "tenant_id", "agent_id", "updated_at"),
    Index(None, "expires_at"),  # the expiry sweep
)

# A document's chunks, in order: text == document.text[start_char:end_char]. The vector
# (little-endian float32, of `model`; both NULL when not embedded) is the truth the agent's
# knowledge index caches. Their words are indexed in RAM per agent (state/knowledge_words.py;
# migration 0013 dropped the full-text index 0011 made).
knowledge_chunks = Table(
    "knowledge_chunks",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("agent_id", ID, primary_key=True),
    Column("document_id", ID, primary_key=True),
    Column("chunk_index", Integer, primary_key=True, autoincrement=False),
    Column("text", Text, nullable=False),
    Column("start_char", Integer, nullable=False),
    Column("end_char", Integer, nullable=False),
    Column("heading_path", Json, nullable=False),
    Column("model", String(200)),
    Column("vector", LargeBinary),
    ForeignKeyConstraint(
        ["tenant_id", "agent_id", "document_id"],
        [
            "knowledge_documents.tenant_id",
            "knowledge_documents.agent_id",
            "knowledge_documents.document_id",
        ],
        ondelete="CASCADE",
    ),
)
