"""Scoped full-text search: lexical matching reads only the searched scope's texts.

0002 matched a query against every tenant's texts and filtered by user afterwards, so
one large corpus slowed everyone's HYBRID search (1.6 s p99 at 1M episodes). Now each
text carries a scope token (a hash of tenant, agent and user):
- SQLite: digest_fts becomes an external-content FTS5 index over digest_texts (scope,
  body), kept in step by triggers (so cascading deletes clear it too); queries AND the
  scope token with the words.
- PostgreSQL: a stored tsvector column, matched after the btree scope filter.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TRIGGERS = {
    "digest_texts_ai": "AFTER INSERT ON digest_texts BEGIN "
    "INSERT INTO digest_fts(rowid, scope, body) VALUES (new.rowid, new.scope, new.body); END",
    "digest_texts_ad": "AFTER DELETE ON digest_texts BEGIN "
    "INSERT INTO digest_fts(digest_fts, rowid, scope, body) VALUES ('delete', old.rowid, old.scope, old.body); END",
    "digest_texts_au": "AFTER UPDATE ON digest_texts BEGIN "
    "INSERT INTO digest_fts(digest_fts, rowid, scope, body) VALUES ('delete', old.rowid, old.scope, old.body); "
    "INSERT INTO digest_fts(rowid, scope, body) VALUES (new.rowid, new.scope, new.body); END",
}


def scope_token(tenant_id: str, agent_id: str, user_id: str) -> str:
    """Frozen copy of episodic.store.lexical.scope_token at this revision."""
    digest = hashlib.sha256(f"{tenant_id}\x1f{agent_id}\x1f{user_id}".encode()).hexdigest()
    return f"scope{int(digest[:15], 16)}"


def upgrade() -> None:
    op.add_column("digest_texts", sa.Column("scope", sa.String(length=64), nullable=False, server_default=""))
    _fill_scopes()
    if op.get_bind().dialect.name == "postgresql":
        _postgres()
    else:
        _sqlite()


def _fill_scopes() -> None:
    bind = op.get_bind()
    rows = bind.execute(sa.text("SELECT tenant_id, episode_id, agent_id, user_id FROM digest_texts")).all()
    for tenant_id, episode_id, agent_id, user_id in rows:
        bind.execute(
            sa.text("UPDATE digest_texts SET scope = :s WHERE tenant_id = :t AND episode_id = :e"),
            {"s": scope_token(tenant_id, agent_id, user_id), "t": tenant_id, "e": episode_id},
        )


def _postgres() -> None:
    op.execute("DROP INDEX IF EXISTS ix_digest_texts_body_fts")
    op.execute(
        "ALTER TABLE digest_texts ADD COLUMN body_tsv tsvector "
        "GENERATED ALWAYS AS (to_tsvector('english', body)) STORED"
    )


def _sqlite() -> None:
    op.execute("DROP TABLE digest_fts")
    op.execute(
        "CREATE VIRTUAL TABLE digest_fts USING fts5(scope, body, content='digest_texts', "
        "content_rowid='rowid', tokenize='porter unicode61')"
    )
    for name, body in TRIGGERS.items():
        op.execute(f"CREATE TRIGGER {name} {body}")
    op.execute("INSERT INTO digest_fts(digest_fts) VALUES ('rebuild')")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE digest_texts DROP COLUMN body_tsv")
        op.execute(
            "CREATE INDEX ix_digest_texts_body_fts ON digest_texts USING GIN (to_tsvector('english', body))"
        )
    else:
        for name in TRIGGERS:
            op.execute(f"DROP TRIGGER {name}")
        op.execute("DROP TABLE digest_fts")
        op.execute(
            "CREATE VIRTUAL TABLE digest_fts USING fts5(tenant_id UNINDEXED, agent_id UNINDEXED, "
            "user_id UNINDEXED, episode_id UNINDEXED, body, tokenize = 'porter unicode61')"
        )
    op.drop_column("digest_texts", "scope")
