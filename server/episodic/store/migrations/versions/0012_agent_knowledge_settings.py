"""Knowledge settings of agents: whether each turn searches the agent's documents, how many
chunks and how close, and the share of the budget each optional section may take.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_COLUMNS = (
    sa.Column("knowledge", sa.Boolean(), nullable=False, server_default=sa.true()),
    sa.Column("knowledge_top_k", sa.Integer(), nullable=False, server_default="5"),
    sa.Column("knowledge_min_score", sa.Float(), nullable=False, server_default="0.3"),
    sa.Column("knowledge_budget_percent", sa.Integer(), nullable=False, server_default="25"),
    sa.Column("known_facts_budget_percent", sa.Integer(), nullable=False, server_default="25"),
    sa.Column("recall_budget_percent", sa.Integer(), nullable=False, server_default="50"),
)


def upgrade() -> None:
    with op.batch_alter_table("agents") as agents:
        for column in _COLUMNS:
            agents.add_column(column)


def downgrade() -> None:
    with op.batch_alter_table("agents") as agents:
        for column in reversed(_COLUMNS):
            agents.drop_column(column.name)
