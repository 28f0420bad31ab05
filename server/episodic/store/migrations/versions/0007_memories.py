"""Long-term memories: per-agent memory settings, the memories table (with its vectors),
and each episode's session data.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

ID = sa.String(length=128)
UTC_TIME = sa.DateTime(timezone=True)
JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
_SCOPE = ["tenant_id", "agent_id", "user_id"]
# (index name, columns) of the memories table
_MEMORY_INDEXES = (
    ("ix_memories_tenant_id_agent_id_user_id_created_at", [*_SCOPE, "created_at"]),
    ("ix_memories_tenant_id_agent_id_user_id_text_key", [*_SCOPE, "text_key"]),
    ("ix_memories_tenant_id_agent_id_user_id_frame_key", [*_SCOPE, "frame_key"]),
    ("ix_memories_tenant_id_episode_id", ["tenant_id", "episode_id"]),
    ("ix_memories_expires_at", ["expires_at"]),
    ("ix_memories_model", ["model"]),
)
_AGENT_COLUMNS = (
    "extract_memories",
    "memory_extraction_prompt",
    "session_data_keys",
    "memory_min_score",
    "memory_top_k",
    "known_facts",
)


def upgrade() -> None:
    _add_agent_settings()
    _create_memories()
    _create_session_data()


def downgrade() -> None:
    op.drop_table("session_data")
    for name, _ in _MEMORY_INDEXES:
        op.drop_index(name, "memories")
    op.drop_table("memories")
    with op.batch_alter_table("agents") as agents:
        for name in _AGENT_COLUMNS:
            agents.drop_column(name)


def _add_agent_settings() -> None:
    with op.batch_alter_table("agents") as agents:
        agents.add_column(sa.Column("known_facts", sa.Boolean(), nullable=False, server_default=sa.true()))
        agents.add_column(sa.Column("memory_top_k", sa.Integer(), nullable=False, server_default="5"))
        agents.add_column(sa.Column("memory_min_score", sa.Float(), nullable=False, server_default="0.3"))
        agents.add_column(sa.Column("session_data_keys", JSON, nullable=True))
        agents.add_column(sa.Column("memory_extraction_prompt", sa.Text(), nullable=False, server_default=""))
        agents.add_column(
            sa.Column("extract_memories", sa.Boolean(), nullable=False, server_default=sa.true())
        )


def _create_memories() -> None:
    op.create_table(
        "memories",
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("memory_id", ID, nullable=False),
        sa.Column("agent_id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("text_key", sa.String(length=64), nullable=False),
        sa.Column("frame_key", sa.String(length=64), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("topics", JSON, nullable=False),
        sa.Column("entities", JSON, nullable=False),
        sa.Column("origin", sa.String(length=16), nullable=False),
        sa.Column("source_episode_id", ID, nullable=False, server_default=""),
        sa.Column("from_seq", sa.BigInteger(), nullable=False),
        sa.Column("to_seq", sa.BigInteger(), nullable=False),
        sa.Column("episode_id", ID, nullable=True),
        sa.Column("event_time", UTC_TIME, nullable=True),
        sa.Column("expires_at", UTC_TIME, nullable=True),
        sa.Column("created_at", UTC_TIME, nullable=False),
        sa.Column("updated_at", UTC_TIME, nullable=False),
        sa.Column("last_recalled_at", UTC_TIME, nullable=True),
        sa.Column("superseded_by", ID, nullable=False, server_default=""),
        sa.Column("merge_count", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("dimension", sa.Integer(), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "memory_id", name="pk_memories"),
    )
    for name, columns in _MEMORY_INDEXES:
        op.create_index(name, "memories", columns)


def _create_session_data() -> None:
    op.create_table(
        "session_data",
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("episode_id", ID, nullable=False),
        sa.Column("data", JSON, nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", UTC_TIME, nullable=False),
        sa.Column("expires_at", UTC_TIME, nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id", "episode_id"],
            ["episodes.tenant_id", "episodes.episode_id"],
            name="fk_session_data_episodes",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "episode_id", name="pk_session_data"),
    )
