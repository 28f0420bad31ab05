"""Initial schema: agents, episodes, messages, tool calls.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Frozen copies of the column types at this revision (never import live schema here).
ID = sa.String(length=128)
UTC_TIME = sa.DateTime(timezone=True)
JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def upgrade() -> None:
    _create_agents()
    _create_episodes()
    _create_messages()
    _create_tool_calls()


def _create_agents() -> None:
    op.create_table(
        "agents",
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("agent_id", ID, nullable=False),
        sa.Column("display_name", sa.Text(), nullable=False),
        sa.Column("system_prompt", sa.Text(), nullable=False),
        sa.Column("model", sa.String(length=256), nullable=False),
        sa.Column("token_encoding", sa.String(length=64), nullable=False),
        sa.Column("encoding_pinned", sa.Boolean(), nullable=False),
        sa.Column("max_working_memory_tokens", sa.Integer(), nullable=False),
        sa.Column("context_window_tokens", sa.Integer(), nullable=False),
        sa.Column("context_ceiling_percent", sa.Integer(), nullable=False),
        sa.Column("recall_mode", sa.String(length=16), nullable=False),
        sa.Column("recall_top_k", sa.Integer(), nullable=False),
        sa.Column("recall_min_score", sa.Float(), nullable=False),
        sa.Column("tool_results_kept_verbatim", sa.Integer(), nullable=False),
        sa.Column("idle_timeout_seconds", sa.Float(), nullable=False),
        sa.Column("created_at", UTC_TIME, nullable=False),
        sa.Column("updated_at", UTC_TIME, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "agent_id", name="pk_agents"),
    )


def _create_episodes() -> None:
    op.create_table(
        "episodes",
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("episode_id", ID, nullable=False),
        sa.Column("agent_id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("token_encoding", sa.String(length=64), nullable=False),
        sa.Column("started_at", UTC_TIME, nullable=False),
        sa.Column("ended_at", UTC_TIME, nullable=True),
        sa.Column("close_reason", sa.String(length=32), nullable=True),
        sa.Column("close_note", sa.Text(), nullable=False),
        sa.Column("metadata", JSON, nullable=True),
        sa.Column("message_count", sa.BigInteger(), nullable=False),
        sa.Column("token_count", sa.BigInteger(), nullable=False),
        sa.Column("last_activity_at", UTC_TIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id", "agent_id"],
            ["agents.tenant_id", "agents.agent_id"],
            name="fk_episodes_agents",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "episode_id", name="pk_episodes"),
    )
    op.create_index(
        "ix_episodes_tenant_id_agent_id_user_id_started_at",
        "episodes",
        ["tenant_id", "agent_id", "user_id", "started_at"],
    )
    op.create_index("ix_episodes_tenant_id_started_at", "episodes", ["tenant_id", "started_at"])
    op.create_index("ix_episodes_state_last_activity_at", "episodes", ["state", "last_activity_at"])


def _create_messages() -> None:
    op.create_table(
        "messages",
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("episode_id", ID, nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("token_encoding", sa.String(length=64), nullable=False),
        sa.Column("created_at", UTC_TIME, nullable=False),
        sa.Column("client_message_id", ID, nullable=True),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("metadata", JSON, nullable=True),
        sa.Column("tool_calls", JSON, nullable=True),
        sa.Column("tool_result", JSON, nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id", "episode_id"],
            ["episodes.tenant_id", "episodes.episode_id"],
            name="fk_messages_episodes",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "episode_id", "seq", name="pk_messages"),
    )
    op.create_index(
        "ix_messages_tenant_id_episode_id_client_message_id",
        "messages",
        ["tenant_id", "episode_id", "client_message_id"],
        unique=True,
    )


def _create_tool_calls() -> None:
    op.create_table(
        "tool_calls",
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("episode_id", ID, nullable=False),
        sa.Column("tool_call_id", ID, nullable=False),
        sa.Column("tool_name", ID, nullable=False),
        sa.Column("input", JSON, nullable=True),
        sa.Column("call_seq", sa.BigInteger(), nullable=False),
        sa.Column("has_result", sa.Boolean(), nullable=False),
        sa.Column("output", JSON, nullable=True),
        sa.Column("succeeded", sa.Boolean(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("called_at", UTC_TIME, nullable=True),
        sa.Column("duration_seconds", sa.Float(), nullable=True),
        sa.Column("result_seq", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id", "episode_id"],
            ["episodes.tenant_id", "episodes.episode_id"],
            name="fk_tool_calls_episodes",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "episode_id", "tool_call_id", name="pk_tool_calls"),
    )


def downgrade() -> None:
    op.drop_table("tool_calls")
    op.drop_table("messages")
    op.drop_table("episodes")
    op.drop_table("agents")
