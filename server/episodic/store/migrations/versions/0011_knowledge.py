"""Agent knowledge: an agent's documents and their chunks (with each chunk's vector, if
embedded), shared by every user of the agent. No foreign key to agents, as memories have
none: agents are never deleted.

Full text of the chunks is kept as digest texts' is (migration 0003): each chunk carries its
scope token (the agent's knowledge scope); SQLite indexes (scope, text) with the
external-content FTS5 table `knowledge_fts`, kept in step by triggers (so a document's
cascading delete clears it too); PostgreSQL adds the stored tsvector column `body_tsv`,
matched after the primary key's (tenant, agent) prefix narrows the rows.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

# Frozen copies of the column types at this revision (never import live schema here).
ID = sa.String(length=128)
UTC_TIME = sa.DateTime(timezone=True)
JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
_DOCUMENT = ["tenant_id", "agent_id", "document_id"]
_DOCUMENT_INDEXES = (
    ("ix_knowledge_documents_tenant_id_agent_id_updated_at", ["tenant_id", "agent_id", "updated_at"]),
    ("ix_knowledge_documents_expires_at", ["expires_at"]),
)
TRIGGERS = {
    "knowledge_chunks_ai": "AFTER INSERT ON knowledge_chunks BEGIN "
    "INSERT INTO knowledge_fts(rowid, scope, text) VALUES (new.rowid, new.scope, new.text); END",
    "knowledge_chunks_ad": "AFTER DELETE ON knowledge_chunks BEGIN "
    "INSERT INTO knowledge_fts(knowledge_fts, rowid, scope, text) "
    "VALUES ('delete', old.rowid, old.scope, old.text); END",
    "knowledge_chunks_au": "AFTER UPDATE ON knowledge_chunks BEGIN "
    "INSERT INTO knowledge_fts(knowledge_fts, rowid, scope, text) "
    "VALUES ('delete', old.rowid, old.scope, old.text); "
    "INSERT INTO knowledge_fts(rowid, scope, text) VALUES (new.rowid, new.scope, new.text); END",
}


def upgrade() -> None:
    _create_documents()
    _create_chunks()
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "ALTER TABLE knowledge_chunks ADD COLUMN body_tsv tsvector "
            "GENERATED ALWAYS AS (to_tsvector('english', \"text\")) STORED"
        )
    else:
        op.execute(
            "CREATE VIRTUAL TABLE knowledge_fts USING fts5(scope, text, content='knowledge_chunks', "
            "content_rowid='rowid', tokenize='porter unicode61')"
        )
        for name, body in TRIGGERS.items():
            op.execute(f"CREATE TRIGGER {name} {body}")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        for name in TRIGGERS:
            op.execute(f"DROP TRIGGER {name}")
        op.execute("DROP TABLE knowledge_fts")
    op.drop_table("knowledge_chunks")
    for name, _ in _DOCUMENT_INDEXES:
        op.drop_index(name, "knowledge_documents")
    op.drop_table("knowledge_documents")


def _create_documents() -> None:
    op.create_table(
        "knowledge_documents",
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("agent_id", ID, nullable=False),
        sa.Column("document_id", ID, nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("uri", sa.Text(), nullable=False),
        sa.Column("format", sa.String(length=16), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("metadata", JSON, nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("chunk_count", sa.Integer(), nullable=False),
        sa.Column("created_at", UTC_TIME, nullable=False),
        sa.Column("updated_at", UTC_TIME, nullable=False),
        sa.Column("expires_at", UTC_TIME, nullable=True),
        sa.PrimaryKeyConstraint(*_DOCUMENT, name="pk_knowledge_documents"),
    )
    for name, columns in _DOCUMENT_INDEXES:
        op.create_index(name, "knowledge_documents", columns)


def _create_chunks() -> None:
    op.create_table(
        "knowledge_chunks",
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("agent_id", ID, nullable=False),
        sa.Column("document_id", ID, nullable=False),
        sa.Column("chunk_index", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("start_char", sa.Integer(), nullable=False),
        sa.Column("end_char", sa.Integer(), nullable=False),
        sa.Column("heading_path", JSON, nullable=False),
        sa.Column("scope", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("vector", sa.LargeBinary(), nullable=True),
        sa.ForeignKeyConstraint(
            _DOCUMENT,
            [f"knowledge_documents.{c}" for c in _DOCUMENT],
            name="fk_knowledge_chunks_knowledge_documents",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(*_DOCUMENT, "chunk_index", name="pk_knowledge_chunks"),
    )
