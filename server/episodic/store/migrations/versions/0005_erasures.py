"""The erasure audit log: one row per EraseUser, with a hash of the user id, never the id.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

ID = sa.String(length=128)
JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def upgrade() -> None:
    op.create_table(
        "erasures",
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("erasure_id", ID, nullable=False),
        sa.Column("user_hash", sa.String(length=64), nullable=False),
        sa.Column("agent_id", ID, nullable=True),
        sa.Column("counts", JSON, nullable=False),
        sa.Column("erased_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "erasure_id", name="pk_erasures"),
    )


def downgrade() -> None:
    op.drop_table("erasures")
