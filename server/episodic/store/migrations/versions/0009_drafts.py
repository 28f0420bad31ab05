"""Assistant replies in progress (drafts), which WatchEpisode shows live: kept apart from
the log, gone with their episode.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

ID = sa.String(length=128)


def upgrade() -> None:
    op.create_table(
        "drafts",
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("episode_id", ID, nullable=False),
        sa.Column("draft_id", ID, nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("length", sa.BigInteger(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id", "episode_id"],
            ["episodes.tenant_id", "episodes.episode_id"],
            name="fk_drafts_episodes",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "episode_id", "draft_id", name="pk_drafts"),
    )


def downgrade() -> None:
    op.drop_table("drafts")
