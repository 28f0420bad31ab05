"""Retracted messages (RetractMessage: the message stays in the log, projections skip it)
and the client's own metadata on memories.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("messages") as messages:
        messages.add_column(sa.Column("retracted_at", sa.DateTime(timezone=True), nullable=True))
    json = sa.JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")
    with op.batch_alter_table("memories") as memories:
        memories.add_column(sa.Column("metadata", json, nullable=False, server_default="{}"))


def downgrade() -> None:
    with op.batch_alter_table("memories") as memories:
        memories.drop_column("metadata")
    with op.batch_alter_table("messages") as messages:
        messages.drop_column("retracted_at")
