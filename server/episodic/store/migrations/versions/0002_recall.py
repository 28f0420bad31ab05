"""Recall: digests, their vectors, and the text lexical search matches.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

ID = sa.String(length=128)
UTC_TIME = sa.DateTime(timezone=True)
JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def _episode_fk(name: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["tenant_id", "episode_id"],
        ["episodes.tenant_id", "episodes.episode_id"],
        name=name,
        ondelete="CASCADE",
    )


def _digest_fk(name: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["tenant_id", "episode_id"],
        ["digests.tenant_id", "digests.episode_id"],
        name=name,
        ondelete="CASCADE",
    )


def upgrade() -> None:
    op.create_table(
        "digests",
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("episode_id", ID, nullable=False),
        sa.Column("agent_id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("key_facts", JSON, nullable=True),
        sa.Column("embedding_model", sa.String(length=200), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=False),
        sa.Column("next_attempt_at", UTC_TIME, nullable=False),
        sa.Column("started_at", UTC_TIME, nullable=False),
        sa.Column("ended_at", UTC_TIME, nullable=False),
        sa.Column("updated_at", UTC_TIME, nullable=False),
        _episode_fk("fk_digests_episodes"),
        sa.PrimaryKeyConstraint("tenant_id", "episode_id", name="pk_digests"),
    )
    op.create_index(
        "ix_digests_tenant_id_agent_id_user_id_state_ended_at",
        "digests",
        ["tenant_id", "agent_id", "user_id", "state", "ended_at"],
    )
    op.create_index("ix_digests_state_next_attempt_at", "digests", ["state", "next_attempt_at"])
    op.create_table(
        "digest_vectors",
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("episode_id", ID, nullable=False),
        sa.Column("chunk", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("agent_id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("dimension", sa.Integer(), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        _digest_fk("fk_digest_vectors_digests"),
        sa.PrimaryKeyConstraint("tenant_id", "episode_id", "chunk", name="pk_digest_vectors"),
    )
    op.create_table(
        "digest_texts",
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("episode_id", ID, nullable=False),
        sa.Column("agent_id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        _digest_fk("fk_digest_texts_digests"),
        sa.PrimaryKeyConstraint("tenant_id", "episode_id", name="pk_digest_texts"),
    )
    op.create_index(
        "ix_digest_texts_tenant_id_agent_id_user_id", "digest_texts", ["tenant_id", "agent_id", "user_id"]
    )
    _create_lexical_index()


def _create_lexical_index() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE INDEX ix_digest_texts_body_fts ON digest_texts USING GIN (to_tsvector('english', body))"
        )
    else:
        op.execute(
            "CREATE VIRTUAL TABLE digest_fts USING fts5("
            "tenant_id UNINDEXED, agent_id UNINDEXED, user_id UNINDEXED, episode_id UNINDEXED, body, "
            "tokenize = 'porter unicode61')"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        op.execute("DROP TABLE digest_fts")
    op.drop_table("digest_texts")
    op.drop_table("digest_vectors")
    op.drop_table("digests")
