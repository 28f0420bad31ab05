"""Full-text search over digest texts, the one part of recall
whose SQL differs by backend. Both read only the searched scope's texts: SQLite ANDs the
scope token into the FTS5 query (so the index, not a filter, bounds the work); PostgreSQL
filters by the scope's btree index and matches the stored tsvector of those rows. Queries
are reduced to OR-ed word tokens (words and stop words as `domain/text_analysis.py` reads
them), so no user text is ever parsed as query syntax. On SQLite, words in nearly every text
are left out (CommonWords).

Each full-text index is a `FullText`: its FTS5 table and the two statements that rank a
scope's rows (`:q` the query, `:n` the limit, and the scope's own parameters)."""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, TextClause, text

from episodic.domain import text_analysis
from episodic.domain.recall import Hit, Scope

MAX_TERMS = 32
# What reaches SQL: letters and digits only, as both backends' tokenizers split them (and so
# no query syntax, whatever the text).
_PIECE = re.compile(r"[^\W_]{2,}")


@dataclass(frozen=True, slots=True)
class FullText:
    """One full-text index: the SQLite FTS5 table (external content over rows carrying a
    `scope` token) and each backend's ranking statement, best first."""

    table: str
    sqlite: TextClause
    postgres: TextClause


DIGESTS = FullText(
    "digest_fts",
    sqlite=text(
        "SELECT t.episode_id, -bm25(digest_fts, 0.0, 1.0) AS score "
        "FROM digest_fts JOIN digest_texts AS t ON t.rowid = digest_fts.rowid "
        "WHERE digest_fts MATCH :q AND t.tenant_id = :t AND t.agent_id = :a AND t.user_id = :u "
        "ORDER BY bm25(digest_fts, 0.0, 1.0) LIMIT :n"
    ),
    postgres=text(
        "SELECT episode_id, ts_rank_cd(body_tsv, q) AS score "
        "FROM digest_texts, to_tsquery('english', :q) AS q "
        "WHERE tenant_id = :t AND agent_id = :a AND user_id = :u AND body_tsv @@ q "
        "ORDER BY score DESC, episode_id LIMIT :n"
    ),
)

# one word's count (a parameter per word): several are counted in one statement
_TEXTS_WITH_WORD_OF = "SELECT count(*) FROM (SELECT rowid FROM {fts} WHERE {fts} MATCH :{q} LIMIT :n)"
COMMON_DOCS = 10_000
RECHECK_SECONDS = 600.0
MAX_REMEMBERED_WORDS = 100_000


def scope_token(scope: Scope) -> str:
    """One indexable word per scope (digits after letters, so stemming leaves it alone)."""
    key = f"{scope.tenant_id}\x1f{scope.agent_id}\x1f{scope.user_id}"
    return f"scope{int(hashlib.sha256(key.encode()).hexdigest()[:15], 16)}"


def terms(query: str) -> list[str]:
    """The query's words as the index matches them, each once, at most MAX_TERMS: the words
    and stop words of `text_analysis` (accents kept as typed: SQLite's tokenizer folds them on
    both sides, PostgreSQL's 'english' configuration on neither), then cut into
    letters-and-digits pieces where a word holds more ("caroline's" -> "caroline"), which is
    how both backends index it."""
    seen: dict[str, None] = {}
    for word in text_analysis.terms(query, keep_accents=True):
        for piece in (word,) if word.isalnum() else _PIECE.findall(word):
            if text_analysis.is_term(piece):
                seen.setdefault(piece, None)
        if len(seen) >= MAX_TERMS:
            break
    return list(seen)[:MAX_TERMS]


class CommonWords:
    """The words in more than COMMON_DOCS texts of one full-text index of a SQLite store
    (digest texts unless `table` names another FTS5 table), which its queries leave out.
    FTS5's bm25() weighs each query word by counting every text that holds it, in all
    scopes: one such word cost a walk of its whole posting list (11 ms at 300k texts with
    it, growing linearly; 55 ms p99 at 1M episodes), against 0.3 ms for rare words, while
    BM25 gives it little weight. Whether a word is common is found by a walk capped at
    COMMON_DOCS + 1 texts (under 1 ms) and remembered for RECHECK_SECONDS."""

    def __init__(
        self,
        common_docs: int = COMMON_DOCS,
        clock: Callable[[], float] = time.monotonic,
        table: str = DIGESTS.table,
    ) -> None:
        self.table = table
        self._common_docs = common_docs
        self._clock = clock
        self._known: OrderedDict[str, tuple[bool, float]] = OrderedDict()
        self._lock = threading.Lock()  # searches run on several reader threads

    def rare(self, conn: Connection, words: list[str]) -> list[str]:
        """The words not known to be common; those not checked lately are counted in one
        statement (a new question brings several new words)."""
        now = self._clock()
        with self._lock:
            known = {w: self._known.get(w) for w in words}
        unknown = [w for w, k in known.items() if k is None or now - k[1] >= RECHECK_SECONDS]
        common = {w: k[0] for w, k in known.items() if k is not None and w not in unknown}
        if unknown:
            common |= self._count(conn, unknown, now)
        return [w for w in words if not common[w]]

    def _count(self, conn: Connection, words: list[str], now: float) -> dict[str, bool]:
        params: dict[str, str | int] = {"n": self._common_docs + 1}
        parts = []
        for i, word in enumerate(words):
            params[f"q{i}"] = f'"{word}"'
            parts.append(f"({_TEXTS_WITH_WORD_OF.format(fts=self.table, q=f'q{i}')})")
        counts = conn.execute(text(f"SELECT {', '.join(parts)}"), params).one()
        found = {w: bool(n > self._common_docs) for w, n in zip(words, counts, strict=True)}
        with self._lock:
            for word, common in found.items():
                self._known[word] = (common, now)
                self._known.move_to_end(word)
            while len(self._known) > MAX_REMEMBERED_WORDS:
                self._known.popitem(last=False)
        return found


def search(conn: Connection, scope: Scope, query: str, limit: int, common: CommonWords) -> list[Hit]:
    """Digest texts of one recall scope, best first."""
    params = {"t": scope.tenant_id, "a": scope.agent_id, "u": scope.user_id}
    rows = ranked(conn, DIGESTS, scope, params, query, limit, common)
    return [Hit(str(r[0]), float(r[1])) for r in rows]


def ranked(
    conn: Connection,
    index: FullText,
    scope: Scope,
    params: Mapping[str, Any],
    query: str,
    limit: int,
    common: CommonWords,
) -> list[tuple[Any, ...]]:
    """The rows of `index`'s statement for the query's words in `scope` (whose rows
    `params` name), at most `limit`, best first; none when the query has no words to match.
    `common` must count words of `index`'s own FTS5 table."""
    words = terms(query)
    if not words:
        return []
    params = {**params, "n": limit}
    if conn.dialect.name == "sqlite":
        assert common.table == index.table, "CommonWords of another full-text index"
        words = common.rare(conn, words)
        if not words:  # only words nearly every text holds: nothing to rank by
            return []
        any_word = " OR ".join(f'"{w}"' for w in words)
        q = f'scope : "{scope_token(scope)}" AND ({any_word})'
        rows = conn.execute(index.sqlite, {**params, "q": q})
    else:
        rows = conn.execute(index.postgres, {**params, "q": " | ".join(words)})
    return [tuple(r) for r in rows]
