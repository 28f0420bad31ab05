"""Full-text search over digest texts, the one part of recall whose SQL differs by
backend. Both read only the searched scope's texts: SQLite ANDs the scope token into the
FTS5 query (so the index, not a filter, bounds the work); PostgreSQL filters by the
scope's btree index and matches the stored tsvector of those rows. Queries are reduced
to OR-ed word tokens, so no user text is ever parsed as query syntax."""

from __future__ import annotations

import hashlib
import re

from sqlalchemy import Connection, text

from episodic.domain.recall import Hit, Scope

_WORD = re.compile(r"[^\W_]{2,}", re.UNICODE)
MAX_TERMS = 32
# Words in nearly every text: BM25 gives them almost no weight, but matching them means
# walking long posting lists. Dropped from queries (a query of only these matches nothing).
STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "just",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "she",
        "so",
        "some",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "they",
        "this",
        "to",
        "too",
        "us",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)

_SQLITE_SEARCH = text(
    "SELECT t.episode_id, -bm25(digest_fts, 0.0, 1.0) AS score "
    "FROM digest_fts JOIN digest_texts AS t ON t.rowid = digest_fts.rowid "
    "WHERE digest_fts MATCH :q AND t.tenant_id = :t AND t.agent_id = :a AND t.user_id = :u "
    "ORDER BY bm25(digest_fts, 0.0, 1.0) LIMIT :n"
)
_POSTGRES_SEARCH = text(
    "SELECT episode_id, ts_rank_cd(body_tsv, q) AS score "
    "FROM digest_texts, to_tsquery('english', :q) AS q "
    "WHERE tenant_id = :t AND agent_id = :a AND user_id = :u AND body_tsv @@ q "
    "ORDER BY score DESC, episode_id LIMIT :n"
)


def scope_token(scope: Scope) -> str:
    """One indexable word per scope (digits after letters, so stemming leaves it alone)."""
    key = f"{scope.tenant_id}\x1f{scope.agent_id}\x1f{scope.user_id}"
    return f"scope{int(hashlib.sha256(key.encode()).hexdigest()[:15], 16)}"


def terms(query: str) -> list[str]:
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        if word not in STOP_WORDS:
            seen.setdefault(word, None)
    return list(seen)[:MAX_TERMS]


def search(conn: Connection, scope: Scope, query: str, limit: int) -> list[Hit]:
    words = terms(query)
    if not words:
        return []
    params = {"t": scope.tenant_id, "a": scope.agent_id, "u": scope.user_id, "n": limit}
    if conn.dialect.name == "sqlite":
        any_word = " OR ".join(f'"{w}"' for w in words)
        rows = conn.execute(
            _SQLITE_SEARCH, {**params, "q": f'scope : "{scope_token(scope)}" AND ({any_word})'}
        )
    else:
        rows = conn.execute(_POSTGRES_SEARCH, {**params, "q": " | ".join(words)})
    return [Hit(str(r[0]), float(r[1])) for r in rows]
