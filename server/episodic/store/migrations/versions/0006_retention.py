"""Retention and privacy: a per-agent TTL, soft-deleted episodes awaiting their purge, and
a per-agent PII policy.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agents") as agents:
        agents.add_column(sa.Column("retention_days", sa.Integer(), nullable=False, server_default="90"))
        agents.add_column(
            sa.Column("pii_policy", sa.String(length=16), nullable=False, server_default="inherit")
        )
    with op.batch_alter_table("episodes") as episodes:
        episodes.add_column(sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        "ix_episodes_tenant_id_agent_id_state_ended_at",
        "episodes",
        ["tenant_id", "agent_id", "state", "ended_at"],
    )
    op.create_index("ix_episodes_deleted_at", "episodes", ["deleted_at"])


def downgrade() -> None:
    op.drop_index("ix_episodes_deleted_at", "episodes")
    op.drop_index("ix_episodes_tenant_id_agent_id_state_ended_at", "episodes")
    with op.batch_alter_table("episodes") as episodes:
        episodes.drop_column("deleted_at")
    with op.batch_alter_table("agents") as agents:
        agents.drop_column("pii_policy")
        agents.drop_column("retention_days")
