"""Knowledge chunks lose their full-text index: their words are indexed per agent in RAM
(state/knowledge_words.py), which ranks at 100k chunks in one agent in about a millisecond
where FTS5's bm25() over a scope token took 8-33 ms p50/p99 (its statistics span every
agent, and the token's posting list holds all of the agent's chunks). Dropped: SQLite's
FTS5 table `knowledge_fts` with its triggers, PostgreSQL's tsvector column `body_tsv`, and
the `scope` token column both carried. A downgrade rebuilds them from the chunks' text.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# As 0011 made them (frozen here).
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
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE knowledge_chunks DROP COLUMN body_tsv, DROP COLUMN scope")
        return
    for name in TRIGGERS:
        op.execute(f"DROP TRIGGER {name}")
    op.execute("DROP TABLE knowledge_fts")
    op.execute("ALTER TABLE knowledge_chunks DROP COLUMN scope")


def downgrade() -> None:
    bind = op.get_bind()
    op.add_column(
        "knowledge_chunks", sa.Column("scope", sa.String(length=64), nullable=False, server_default="")
    )
    chunks = sa.table("knowledge_chunks", sa.column("tenant_id"), sa.column("agent_id"), sa.column("scope"))
    agents = bind.execute(sa.select(chunks.c.tenant_id, chunks.c.agent_id).distinct()).all()
    for tenant_id, agent_id in agents:
        token = _scope_token(tenant_id, agent_id)
        bind.execute(
            chunks.update()
            .where(chunks.c.tenant_id == tenant_id, chunks.c.agent_id == agent_id)
            .values(scope=token)
        )
    if bind.dialect.name == "postgresql":
        op.execute(
            "ALTER TABLE knowledge_chunks ADD COLUMN body_tsv tsvector "
            "GENERATED ALWAYS AS (to_tsvector('english', \"text\")) STORED"
        )
        return
    op.execute(
        "CREATE VIRTUAL TABLE knowledge_fts USING fts5(scope, text, content='knowledge_chunks', "
        "content_rowid='rowid', tokenize='porter unicode61')"
    )
    for name, body in TRIGGERS.items():
        op.execute(f"CREATE TRIGGER {name} {body}")
    op.execute("INSERT INTO knowledge_fts(knowledge_fts) VALUES ('rebuild')")


def _scope_token(tenant_id: str, agent_id: str) -> str:
    """store/lexical.scope_token of the agent's knowledge scope (user "" ), frozen here."""
    key = f"{tenant_id}\x1f{agent_id}\x1f"
    return f"scope{int(hashlib.sha256(key.encode()).hexdigest()[:15], 16)}"
