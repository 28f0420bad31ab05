"""The change feed (what each replica tails to keep its caches and indexes in step with
SQL), its prune mark, and scope indexes for loading one scope's vectors on first use.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # SQLite autoincrements INTEGER keys only
_SCOPE = ["tenant_id", "agent_id", "user_id"]


def upgrade() -> None:
    op.create_table(
        "changes",
        sa.Column("seq", SEQ, primary_key=True, autoincrement=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("tenant_id", sa.String(length=128), nullable=False),
        sa.Column("user_hash", sa.String(length=64), nullable=False, server_default=""),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("origin", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_changes_tenant_id_user_hash", "changes", ["tenant_id", "user_hash"])
    op.create_table(
        "feed_marks",
        sa.Column("name", sa.String(length=32), primary_key=True),
        sa.Column("seq", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_digest_vectors_tenant_id_agent_id_user_id", "digest_vectors", _SCOPE)
    op.create_index("ix_memories_tenant_id_agent_id_user_id_state", "memories", [*_SCOPE, "state"])


def downgrade() -> None:
    op.drop_index("ix_memories_tenant_id_agent_id_user_id_state", table_name="memories")
    op.drop_index("ix_digest_vectors_tenant_id_agent_id_user_id", table_name="digest_vectors")
    op.drop_table("feed_marks")
    op.drop_index("ix_changes_tenant_id_user_hash", table_name="changes")
    op.drop_table("changes")
