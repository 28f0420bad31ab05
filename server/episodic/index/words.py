"""BM25 over one agent's knowledge chunks, in RAM: the word half of knowledge search.

Why not the database's full-text index: SQLite's FTS5 ranks with bm25() by walking every
posting of every query word in every agent (the statistics are global) and ANDs a scope
token whose posting list holds all of the agent's chunks. At 100k chunks in one agent that
cost 8-33 ms p50/p99 per query, of which 3 ms was the scope token alone (bench-knowledge;
PostgreSQL's ts_rank_cd has no index-side ranking either). Here each agent has its own
inverted index, so a query costs what its words' posting lists in that agent hold (scored in
C without the GIL, _postings.c: ~0.2/1 ms p50/p99 at 100k chunks), the
statistics are the agent's own (a word common in another tenant's documents weighs nothing
here), and no tenant's documents slow another's searches.

Words are `text_analysis` words (folded, stop words out), cut into letters-and-digits pieces,
then stemmed (Snowball English, PyStemmer): "visited" finds "visit".

The index is a few segments (a term's rows and counts in each) plus per-row lengths and a
liveness flag: adding a document appends a segment, removing one clears its rows' flags;
small segments are merged when there are too many, and the dead rows are dropped, rows
renumbered, when they pass a quarter of all. Thread-safe: searches may run off the event
loop while the change owner writes."""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain, islice

import numpy as np
import Stemmer
from numpy.typing import NDArray

from episodic.domain import text_analysis
from episodic.domain.knowledge import split_chunk_key
from episodic.domain.recall import Hit
from episodic.index import _postings

K1, B = 1.2, 0.75  # the customary BM25 constants, not tuned
MAX_QUERY_TERMS = 32
MAX_SEGMENTS = 8
ADD_BATCH = 8192  # chunks analysed and indexed at a time
COMMON_SHARE = 0.5  # a word in more of an agent's chunks than this finds nothing alone,
COMMON_MIN = 1000  # once it is in more chunks than this (a small agent has no such words)
POSTING_BYTES = 12  # an int32 row, its float32 count and the count's BM25 weight
REWEIGH_DRIFT = 0.1  # weights are recomputed when the mean chunk length moved this much
ROW_BYTES = 124  # the key string, its slots in the row maps, its length, flag and score slot
MAX_KNOWN_WORDS = 200_000  # words whose terms a thread remembers (~30 MB); then it starts over
_local = threading.local()

# rows, counts, and each count's BM25 weight before idf (its saturation by chunk length)
Postings = tuple[NDArray[np.int32], NDArray[np.float32], NDArray[np.float32]]
Segment = dict[str, Postings]


def analyse(text: str) -> tuple[str, ...]:
    """The text's words as the index holds them, in order (repeats kept). Each distinct word
    is cut and stemmed once per thread (a cache): stemming every occurrence took 10 s of the
    14 s an agent of 100k chunks took to index. The terms returned are the cache's own
    strings, so a chunk's terms cost a pointer a word, not a new string; a tuple, which the
    garbage collector stops tracking once it has seen it (100k chunks are read in at once)."""
    words = text_analysis.only_terms(text_analysis.words(text))
    known = _known()
    missing = set(words).difference(known)
    if missing:
        if len(known) + len(missing) > MAX_KNOWN_WORDS:
            known.clear()
        _learn(known, missing)
    return tuple(chain.from_iterable(map(known.__getitem__, words)))


def _learn(known: dict[str, tuple[str, ...]], words: Iterable[str]) -> None:
    """Each word's index terms: its stem, or the stems of its letters-and-digits pieces
    ("caroline's" -> "carolin"), or none (no piece of two letters)."""
    stemmer = _stemmer()
    for word in words:
        known[word] = tuple(sys.intern(stem) for stem in stemmer.stemWords(text_analysis.term_pieces(word)))


def _known() -> dict[str, tuple[str, ...]]:
    known: dict[str, tuple[str, ...]] | None = getattr(_local, "known", None)
    if known is None:
        known = _local.known = {}
    return known


def _stemmer() -> Stemmer.Stemmer:
    """One per thread: a Stemmer is not safe to share. Its own cache is off (ours is
    cheaper: it thrashed at 10k words)."""
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = Stemmer.Stemmer("english", 0)
    return stemmer


def query_terms(query: str) -> list[str]:
    """The query's distinct index words, at most MAX_QUERY_TERMS (first come first)."""
    return list(dict.fromkeys(analyse(query)))[:MAX_QUERY_TERMS]


class Bm25WordIndex:
    """Implements the `WordIndex` port (domain/ports/indexes.py): one agent's chunks, by key
    ("<document>#<n>"), each with its analysed words.

    Removed rows keep counting in the word statistics (how many chunks hold a word, the mean
    length) until the next compaction, a quarter of the rows at most: scores then differ a
    little from a fresh build's, never the set of chunks that match."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._segments: list[Segment] = []
        self._keys: list[str | None] = []  # row -> key (None: removed)
        self._rows: dict[str, int] = {}  # live key -> row
        self._by_document: dict[str, list[int]] = {}
        self._lengths: NDArray[np.float32] = np.zeros(0, dtype=np.float32)
        self._alive: NDArray[np.bool_] = np.zeros(0, dtype=np.bool_)
        self._scores: NDArray[np.float32] = np.zeros(0, dtype=np.float32)  # a search's, all zero between
        self._total_length = 0.0  # of every row, removed ones too
        self._weighed_at = 1.0  # the mean length the weights were computed with
        self._postings = 0

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def held_bytes(self) -> int:
        return self._postings * POSTING_BYTES + len(self._keys) * ROW_BYTES

    def add(self, chunks: Iterable[tuple[str, str]]) -> None:
        """Chunks as (key, text); a key held already is replaced. Analysed before the lock
        is taken (searches go on meanwhile), ADD_BATCH chunks at a time: building 100k chunks
        in one go peaked at ~800 MiB of temporaries."""
        pending = iter(chunks)
        batches = 0
        while batch := list(islice(pending, ADD_BATCH)):
            self.add_analysed([(key, analyse(text)) for key, text in batch])
            batches += 1
        if batches > 1:  # a bulk load ends as one segment (a list a word), weighed by its mean
            with self._lock:
                self._weighed_at = self._mean_length()
                self._segments = [self._weighed(_merged(self._segments, None))]

    def add_analysed(self, chunks: Iterable[tuple[str, Sequence[str]]]) -> None:
        """Chunks as (key, `analyse`d words)."""
        chunks = list(dict(chunks).items())  # a key given twice: the last one
        if not chunks:
            return
        with self._lock:
            self._remove_keys([key for key, _ in chunks if key in self._rows])
            first = len(self._keys)
            rows = list(range(first, first + len(chunks)))
            for row, (key, _) in zip(rows, chunks, strict=True):
                self._keys.append(key)
                self._rows[key] = row
                self._by_document.setdefault(split_chunk_key(key)[0], []).append(row)
            lengths = np.array([len(words) for _, words in chunks], dtype=np.float32)
            self._lengths = np.concatenate([self._lengths, lengths])
            self._alive = np.concatenate([self._alive, np.ones(len(chunks), dtype=np.bool_)])
            self._total_length += float(lengths.sum())
            if len(self._keys) == len(chunks):  # the first rows: weigh by their own mean
                self._weighed_at = self._mean_length()
            segment = self._weighed(_segment(rows, [words for _, words in chunks]))
            self._postings += _size(segment)
            self._segments.append(segment)
            self._tidy()

    def remove_documents(self, document_ids: Iterable[str]) -> None:
        with self._lock:
            rows = [r for d in document_ids for r in self._by_document.get(d, ())]
            self._remove_keys([k for k in (self._keys[r] for r in rows) if k is not None])
            self._tidy()

    def search(self, query: str, k: int) -> list[Hit]:
        """The k best chunks holding the query's words, best first, ties by key."""
        terms = query_terms(query)
        if not terms:
            return []
        with self._lock:
            return self._search(terms, k)

    # --- internals -----------------------------------------------------------------------

    def _search(self, terms: Sequence[str], k: int) -> list[Hit]:
        """BM25 over the chunks holding the query's uncommon words. A word held by more than
        COMMON_SHARE of the chunks (and more than COMMON_MIN) never finds a chunk: it is this
        agent's stop word, and only adds to chunks rarer words found (Lucene's common-terms
        rule), so a query of such words alone finds nothing by words. The postings are scored
        in C without the GIL (_postings.c): a pass over each other word's posting lists (a
        stop word's, or a lookup of each chunk found in it, whichever is cheaper), then a
        heap of k over the chunks found."""
        k = min(k, len(self._keys))
        if not self._rows or k <= 0:
            return []
        counted = len(self._keys)
        words = self._matched(terms, counted)
        most = max(COMMON_SHARE * counted, COMMON_MIN)  # chunks an uncommon word is in, at most
        if not any(w.holding <= most for w in words):
            return []
        if len(self._scores) != counted:  # rows were added or compacted since the last search
            self._scores = np.zeros(counted, dtype=np.float32)
        parts = [(rows, weights, w.idf, w.holding <= most) for w in words for rows, _, weights in w.parts]
        best_rows, best_scores = np.empty(k, dtype=np.int64), np.empty(k, dtype=np.float32)
        found = _postings.best_rows(parts, self._scores, self._alive, best_rows, best_scores)
        keys = [self._keys[r] for r in best_rows[:found].tolist()]
        # (-score, key) pairs sort best first, ties by key, without a key function
        ranked = sorted(zip((-best_scores[:found]).tolist(), keys, strict=True))
        return [Hit(str(key), -negated) for negated, key in ranked]

    def _matched(self, terms: Sequence[str], counted: int) -> list[_Word]:
        """The query's words the index holds, rarest first (the order their scores add up in)."""
        words = []
        for term in dict.fromkeys(terms):
            parts = [segment[term] for segment in self._segments if term in segment]
            holding = sum(len(p[0]) for p in parts)
            if holding:
                words.append(_Word(parts, math.log(1 + (counted - holding + 0.5) / (holding + 0.5)), holding))
        words.sort(key=lambda w: w.holding)
        return words

    def _mean_length(self) -> float:
        return max(self._total_length / max(len(self._keys), 1), 1.0)

    def _weighed(self, segment: Segment) -> Segment:
        """The segment with each count's weight at the current `_weighed_at`."""
        lengths, average = self._lengths, self._weighed_at
        out: Segment = {}
        for term, (rows, counts, _) in segment.items():
            norm = K1 * (1 - B + B * lengths[rows] / average)
            out[term] = (rows, counts, (counts * (K1 + 1) / (counts + norm)).astype(np.float32))
        return out

    def _remove_keys(self, keys: Sequence[str]) -> None:
        for key in keys:
            row = self._rows.pop(key)
            self._keys[row] = None
            self._alive[row] = False
            document = split_chunk_key(key)[0]
            held = self._by_document.get(document, [])
            if row in held:
                held.remove(row)
            if not held:
                self._by_document.pop(document, None)

    def _tidy(self) -> None:
        dead = len(self._keys) - len(self._rows)
        if dead and dead * 4 >= len(self._keys):
            self._compact()
        elif len(self._segments) > MAX_SEGMENTS:
            self._merge_small()
        if abs(self._mean_length() - self._weighed_at) > REWEIGH_DRIFT * self._weighed_at:
            self._weighed_at = self._mean_length()
            self._segments = [self._weighed(s) for s in self._segments]

    def _merge_small(self) -> None:
        """All segments but the largest into one (cheap: they are the small ones), or all of
        them when the small ones together are half the largest's size."""
        sizes = [_size(s) for s in self._segments]
        largest = int(np.argmax(sizes))
        small = [s for i, s in enumerate(self._segments) if i != largest]
        if sum(sizes) - sizes[largest] >= sizes[largest] // 2:
            self._segments = [_merged(self._segments, None)]
        else:
            self._segments = [self._segments[largest], _merged(small, None)]

    def _compact(self) -> None:
        """Drops removed rows and numbers the live ones from 0."""
        alive = self._alive
        renumber = (np.cumsum(alive) - 1).astype(np.int32)
        segment = _merged(self._segments, (alive, renumber))
        self._keys = [k for k in self._keys if k is not None]
        self._rows = {str(k): i for i, k in enumerate(self._keys)}
        self._by_document = {}
        for key, row in self._rows.items():
            self._by_document.setdefault(split_chunk_key(key)[0], []).append(row)
        self._lengths = self._lengths[alive]
        self._alive = np.ones(len(self._keys), dtype=np.bool_)
        self._total_length = float(self._lengths.sum())
        self._weighed_at = self._mean_length()
        self._segments = [self._weighed(segment)] if segment else []
        self._postings = _size(segment)


@dataclass(slots=True)
class _Word:
    parts: list[Postings]  # one per segment holding it
    idf: float
    holding: int


def _size(segment: Segment) -> int:
    return sum(len(p[0]) for p in segment.values())


def _segment(rows: Sequence[int], words: Sequence[Sequence[str]]) -> Segment:
    """Postings of these rows (weights left to `_weighed`): each term's rows ascending, with
    its count in each."""
    vocabulary: dict[str, int] = {}
    ids = np.fromiter((vocabulary.setdefault(w, len(vocabulary)) for ws in words for w in ws), dtype=np.int64)
    if not len(ids):
        return {}
    row_of = np.repeat(np.asarray(rows, dtype=np.int64), [len(ws) for ws in words])
    span = int(row_of.max()) + 1
    pairs, counts = np.unique(ids * span + row_of, return_counts=True)
    term_ids, term_rows = pairs // span, (pairs % span).astype(np.int32)
    bounds = np.searchsorted(term_ids, np.arange(len(vocabulary) + 1))
    tf = counts.astype(np.float32)
    return {
        word: (term_rows[bounds[i] : bounds[i + 1]], tf[bounds[i] : bounds[i + 1]], _NO_WEIGHTS)
        for i, word in enumerate(vocabulary)
    }


def _merged(segments: Sequence[Segment], keep: tuple[NDArray[np.bool_], NDArray[np.int32]] | None) -> Segment:
    """One segment of these (weights kept); with `keep` (liveness, new row numbers), dead
    rows dropped and weights left to be recomputed."""
    merged: Segment = {}
    for term in {t for s in segments for t in s}:
        parts = [s[term] for s in segments if term in s]
        rows = np.concatenate([p[0] for p in parts])
        counts = np.concatenate([p[1] for p in parts])
        weights = np.concatenate([p[2] for p in parts])
        if keep is not None:
            alive = keep[0][rows]
            rows, counts, weights = keep[1][rows[alive]], counts[alive], weights[alive]
            if not len(rows):
                continue
        order = np.argsort(rows, kind="stable")
        merged[term] = (rows[order], counts[order], weights[order])
    return merged


_NO_WEIGHTS: NDArray[np.float32] = np.zeros(0, dtype=np.float32)
