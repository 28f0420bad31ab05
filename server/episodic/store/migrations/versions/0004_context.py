"""Context assembly: summaries (compaction records) and model calls (the audit of what
every BuildContext rendered).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004"
down_revision = "0003"
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


def upgrade() -> None:
    op.create_table(
        "summaries",
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("episode_id", ID, nullable=False),
        sa.Column("to_seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("from_seq", sa.BigInteger(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("token_encoding", sa.String(length=64), nullable=False),
        sa.Column("summarizer", sa.String(length=200), nullable=False),
        sa.Column("created_at", UTC_TIME, nullable=False),
        _episode_fk("fk_summaries_episodes"),
        sa.PrimaryKeyConstraint("tenant_id", "episode_id", "to_seq", name="pk_summaries"),
    )
    op.create_table(
        "model_calls",
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("model_call_id", ID, nullable=False),
        sa.Column("episode_id", ID, nullable=False),
        sa.Column("agent_id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("request_id", ID, nullable=True),
        sa.Column("created_at", UTC_TIME, nullable=False),
        sa.Column("total_tokens", sa.Integer(), nullable=False),
        sa.Column("trace_id", sa.String(length=32), nullable=False),
        sa.Column("messages", JSON, nullable=False),
        sa.Column("report", JSON, nullable=False),
        sa.Column("reply", JSON, nullable=True),
        _episode_fk("fk_model_calls_episodes"),
        sa.PrimaryKeyConstraint("tenant_id", "model_call_id", name="pk_model_calls"),
    )
    op.create_index(
        "ix_model_calls_tenant_id_episode_id_created_at_model_call_id",
        "model_calls",
        ["tenant_id", "episode_id", "created_at", "model_call_id"],
    )
    op.create_index(
        "ix_model_calls_tenant_id_episode_id_request_id",
        "model_calls",
        ["tenant_id", "episode_id", "request_id"],
        unique=True,
    )


def downgrade() -> None:
    op.drop_table("model_calls")
    op.drop_table("summaries")
