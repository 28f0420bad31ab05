"""Alembic environment: always driven programmatically by episodic.store.migrate, which
hands over a live connection in config.attributes["connection"]."""

from __future__ import annotations

from alembic import context

from episodic.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
