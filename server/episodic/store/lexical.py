"""Full-text search over digest texts, the one part of recall
whose SQL differs by backend. Both read only the searched scope's texts: SQLite ANDs the
scope token into the FTS5 query (so the index, not a filter, bounds the work); PostgreSQL
filters by the scope's btree index and matches the stored tsvector of those rows. Queries
are reduced to OR-ed word tokens (words and stop words as `domain/text_analysis.py` reads
them), so no user text is ever parsed as query syntax. On SQLite, words in nearly every text
are left out (CommonWords). (Agents' knowledge is matched by words in RAM instead:
index/words.py.)"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from sqlalchemy import Connection, text

from episodic.domain import text_analysis
from episodic.domain.recall import Hit, Scope
from episodic.store.schema import DIGEST_FTS

MAX_TERMS = 32


# The statements that rank one scope's digest texts, best first (`:q` the query, `:n` the limit).
_RANK_SQLITE = text(
    "SELECT t.episode_id, -bm25(digest_fts, 0.0, 1.0) AS score "
    "FROM digest_fts JOIN digest_texts AS t ON t.rowid = digest_fts.rowid "
    "WHERE digest_fts MATCH :q AND t.tenant_id = :t AND t.agent_id = :a AND t.user_id = :u "
    "ORDER BY bm25(digest_fts, 0.0, 1.0) LIMIT :n"
)
_RANK_POSTGRES = text(
    "SELECT episode_id, ts_rank_cd(body_tsv, q) AS score "
    "FROM digest_texts, to_tsquery('english', :q) AS q "
    "WHERE tenant_id = :t AND agent_id = :a AND user_id = :u AND body_tsv @@ q "
    "ORDER BY score DESC, episode_id LIMIT :n"
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
        for piece in text_analysis.term_pieces(word):  # what reaches SQL: letters and digits
            seen.setdefault(piece, None)
        if len(seen) >= MAX_TERMS:
            break
    return list(seen)[:MAX_TERMS]


class CommonWords:
    """The words in more than COMMON_DOCS digest texts of a SQLite store, which its queries
    leave out.
    FTS5's bm25() weighs each query word by counting every text that holds it, in all
    scopes: one such word cost a walk of its whole posting list (11 ms at 300k texts with
    it, growing linearly; 55 ms p99 at 1M episodes), against 0.3 ms for rare words, while
    BM25 gives it little weight. Whether a word is common is found by a walk capped at
    COMMON_DOCS + 1 texts (under 1 ms) and remembered for RECHECK_SECONDS."""

    def __init__(self, common_docs: int = COMMON_DOCS, clock: Callable[[], float] = time.monotonic) -> None:
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
            parts.append(f"({_TEXTS_WITH_WORD_OF.format(fts=DIGEST_FTS, q=f'q{i}')})")
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
    """Digest texts of one recall scope, best first; none when the query has no words to
    match."""
    words = terms(query)
    if not words:
        return []
    params = {"t": scope.tenant_id, "a": scope.agent_id, "u": scope.user_id, "n": limit}
    if conn.dialect.name == "sqlite":
        words = common.rare(conn, words)
        if not words:  # only words nearly every text holds: nothing to rank by
            return []
        any_word = " OR ".join(f'"{w}"' for w in words)
        rows = conn.execute(_RANK_SQLITE, {**params, "q": f'scope : "{scope_token(scope)}" AND ({any_word})'})
    else:
        rows = conn.execute(_RANK_POSTGRES, {**params, "q": " | ".join(words)})
    return [Hit(str(r[0]), float(r[1])) for r in rows]
