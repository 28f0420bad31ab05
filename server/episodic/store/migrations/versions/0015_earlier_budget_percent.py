"""The share of the budget the "[Earlier in this conversation]" section may take: passages
of a live episode's compacted history recalled for the turn.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agents") as agents:
        agents.add_column(
            sa.Column("earlier_budget_percent", sa.Integer(), nullable=False, server_default="50")
        )


def downgrade() -> None:
    with op.batch_alter_table("agents") as agents:
        agents.drop_column("earlier_budget_percent")
