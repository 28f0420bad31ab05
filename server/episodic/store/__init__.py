"""SQL adapter: SQLAlchemy 2 async over SQLite (default) or PostgreSQL."""
