"""A draft's text as pieces, one row per push, instead of one column rewritten by every
push (whose cost grew with the reply).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

ID = sa.String(length=128)
_KEY = ["tenant_id", "episode_id", "draft_id"]


def upgrade() -> None:
    op.create_table(
        "draft_pieces",
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("episode_id", ID, nullable=False),
        sa.Column("draft_id", ID, nullable=False),
        sa.Column("start", sa.BigInteger(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            _KEY, [f"drafts.{c}" for c in _KEY], name="fk_draft_pieces_drafts", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint(*_KEY, "start", name="pk_draft_pieces"),
    )
    op.execute(
        "INSERT INTO draft_pieces (tenant_id, episode_id, draft_id, start, text) "
        "SELECT tenant_id, episode_id, draft_id, 0, text FROM drafts WHERE length > 0"
    )
    # In place on both dialects (SQLite >= 3.35): a batch rebuild of `drafts` would drop the
    # table, and with foreign keys on, its pieces with it.
    op.execute("ALTER TABLE drafts DROP COLUMN text")


def downgrade() -> None:
    op.execute("ALTER TABLE drafts ADD COLUMN text TEXT NOT NULL DEFAULT ''")
    op.execute(
        "UPDATE drafts SET text = COALESCE((SELECT string_agg(p.text, '' ORDER BY p.start) "
        "FROM draft_pieces p WHERE p.tenant_id = drafts.tenant_id AND p.episode_id = drafts.episode_id "
        "AND p.draft_id = drafts.draft_id), '')"
        if op.get_bind().dialect.name == "postgresql"
        else "UPDATE drafts SET text = COALESCE((SELECT group_concat(text, '') FROM (SELECT p.text "
        "FROM draft_pieces p WHERE p.tenant_id = drafts.tenant_id AND p.episode_id = drafts.episode_id "
        "AND p.draft_id = drafts.draft_id ORDER BY p.start)), '')"
    )
    op.drop_table("draft_pieces")
