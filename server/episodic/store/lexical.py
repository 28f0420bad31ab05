"""Full-text search over digest texts, the one part of recall whose SQL differs by
backend: SQLite FTS5 with BM25, PostgreSQL to_tsvector/ts_rank_cd over a GIN index.
Queries are reduced to OR-ed word tokens, so no user text is ever parsed as syntax."""

from __future__ import annotations

import re

from sqlalchemy import Connection, text

from episodic.domain.recall import Hit, Scope

_WORD = re.compile(r"[^\W_]{2,}", re.UNICODE)
MAX_TERMS = 32

_SQLITE_SEARCH = text(
    "SELECT episode_id, -bm25(digest_fts) AS score FROM digest_fts "
    "WHERE digest_fts MATCH :q AND tenant_id = :t AND agent_id = :a AND user_id = :u "
    "ORDER BY bm25(digest_fts) LIMIT :n"
)
_SQLITE_DELETE = text("DELETE FROM digest_fts WHERE tenant_id = :t AND episode_id = :e")
_SQLITE_INSERT = text(
    "INSERT INTO digest_fts (tenant_id, agent_id, user_id, episode_id, body) VALUES (:t, :a, :u, :e, :body)"
)
_POSTGRES_SEARCH = text(
    "SELECT episode_id, ts_rank_cd(to_tsvector('english', body), q) AS score "
    "FROM digest_texts, to_tsquery('english', :q) AS q "
    "WHERE tenant_id = :t AND agent_id = :a AND user_id = :u AND to_tsvector('english', body) @@ q "
    "ORDER BY score DESC, episode_id LIMIT :n"
)


def terms(query: str) -> list[str]:
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        seen.setdefault(word, None)
    return list(seen)[:MAX_TERMS]


def search(conn: Connection, scope: Scope, query: str, limit: int) -> list[Hit]:
    words = terms(query)
    if not words:
        return []
    sqlite = conn.dialect.name == "sqlite"
    expression = " OR ".join(f'"{w}"' for w in words) if sqlite else " | ".join(words)
    params = {"q": expression, "t": scope.tenant_id, "a": scope.agent_id, "u": scope.user_id, "n": limit}
    rows = conn.execute(_SQLITE_SEARCH if sqlite else _POSTGRES_SEARCH, params)
    return [Hit(str(r[0]), float(r[1])) for r in rows]


def replace_body(conn: Connection, scope: Scope, episode_id: str, body: str) -> None:
    """Keeps SQLite's FTS5 copy in step with digest_texts (PostgreSQL indexes the table)."""
    if conn.dialect.name != "sqlite":
        return
    key = {"t": scope.tenant_id, "e": episode_id}
    conn.execute(_SQLITE_DELETE, key)
    conn.execute(_SQLITE_INSERT, {**key, "a": scope.agent_id, "u": scope.user_id, "body": body})
