"""Recall inside the live episode: the spoken messages of this conversation that its history
tail no longer holds (a summary covers them), searched each turn with the turn's query.

`CompactedLog` is part of a working set: derived from SQL (a cold read brings the newest
`MAX_MESSAGES` of them; afterwards each compaction hands over what it folded in), bounded,
and dropped with the working set. It holds each message's words as postings and, once the
background embedder has got to it, the message's vector (int8, scaled per row: 384 bytes at
384 dimensions where float16 took 768, about the message's own text). The postings are three
flat arrays sorted by word (a 32-bit hash of the word, its message, its count there: 7 bytes
a posting), not a dict of a word to two arrays (~300 bytes per distinct word: the postings of
a log held several times the bytes of its text). `ranked` scores a query
the way past-episode recall does: BM25 over passages (a message with its neighbours,
statistics from this log only) and cosine similarity by meaning, fused by reciprocal rank.
Linear in the postings of the query's words and in the messages held.
"""

from __future__ import annotations

import dataclasses
import sys
from array import array
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from episodic.domain.excerpts import bm25, neighbour_sums, unlabelled
from episodic.domain.model import Message, Role, lean
from episodic.domain.recall import Hit, Signal, reciprocal_rank_fusion
from episodic.domain.text_analysis import only_terms, terms, words

MAX_MESSAGES = 2000  # held per episode: RSS stays flat however long the conversation grows
MAX_BYTES = 4 << 20  # and at most about this much: 2,000 messages of the largest size would be 512 MiB
HELD_CHARS = 4000  # of each message: what a passage renders is clipped far shorter (earlier_block)
CANDIDATES = 40  # per signal: the head each ranking contributes to the fusion
_SPOKEN = (Role.USER, Role.ASSISTANT)
_FIXED_BYTES = 200  # a held message's share of lists, arrays and small objects (tracemalloc)
_POSTING_BYTES = 7  # a word's hash (4), its message (2: uint16 while positions fit) and count (1)
_MOST_TIMES = 255  # a word's count in one message, held up to this (BM25 saturates far below)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A held message that matched the turn, by position in the log, best first."""

    position: int
    score: float
    signals: tuple[Signal, ...]


@dataclass(slots=True)
class CompactedLog:
    """The spoken messages before the tail, oldest first, with their words and vectors."""

    messages: list[Message] = field(default_factory=list)
    sizes: array[int] = field(default_factory=lambda: array("I"))  # words per message, at least 1
    # every (word, message) once, sorted by the word's hash (then by message): the hash, the
    # message's position, the word's count in it. The hash is str's (stable within a process),
    # 32 bits of it: a query word shares one with another word of the log about once in a
    # million turns, and then counts that word's occurrences too.
    terms: NDArray[np.uint32] = field(default_factory=lambda: _empty(np.uint32))
    where: NDArray[np.unsignedinteger[Any]] = field(default_factory=lambda: _empty(np.uint16))
    times: NDArray[np.uint8] = field(default_factory=lambda: _empty(np.uint8))
    # row i: message i's vector once embedded, as int8 times scales[i] / 127 (its largest
    # component maps to 127: the cosine's error stays under ~1%)
    vectors: NDArray[np.int8] | None = None
    scales: NDArray[np.float32] = field(default_factory=lambda: _empty(np.float32))
    embedded: int = 0  # messages[:embedded] have their vector
    dropped: int = 0  # messages dropped from the front over the bound, since this log was made
    # per position, the tokens of its rendered line (earlier_block's, the same turn after turn)
    # times 2, plus 1 when the line was clipped; -1: not counted yet. `quoted` for the line,
    # `headed` for the other rendering (the passage's header). The lines are not kept: a turn
    # costs candidates by these counts and renders only the passages it shows, and holding
    # every candidate's line took ~0.7 of the text again.
    quoted: array[int] = field(default_factory=lambda: array("i"))
    headed: array[int] = field(default_factory=lambda: array("i"))
    _bytes: int = 0

    @classmethod
    def of(cls, messages: Sequence[Message]) -> CompactedLog:
        log = cls()
        log.extend(messages)
        return log

    @property
    def last_seq(self) -> int:
        return self.messages[-1].seq if self.messages else 0

    def __len__(self) -> int:
        return len(self.messages)

    def size(self) -> int:
        """Estimated bytes held (kept as messages come and go: a turn never walks them)."""
        vectors = self.vectors.nbytes + self.scales.nbytes if self.vectors is not None else 0
        counted = 4 * (len(self.quoted) + len(self.headed))
        return self._bytes + vectors + counted

    def extend(self, messages: Sequence[Message]) -> None:
        """Takes the spoken, unretracted messages after the last held one; over the bound,
        the oldest half goes (one rebuild per MAX_MESSAGES / 2 messages taken)."""
        fresh = [
            m for m in messages if m.seq > self.last_seq and m.role in _SPOKEN and m.retracted_at is None
        ]
        if not fresh:
            return
        hashes: list[int] = []
        where: list[int] = []
        times: list[int] = []
        episode_id = (self.messages or fresh)[0].episode_id
        for m in fresh:
            m = lean(m, episode_id)
            if len(m.content) > HELD_CHARS:
                m = dataclasses.replace(m, content=m.content[:HELD_CHARS])
            position = len(self.messages)
            self.messages.append(m)
            said = Counter(only_terms(words(unlabelled(m.content))))
            self.sizes.append(max(sum(said.values()), 1))
            hashes.extend([_hashed(w) for w in said])
            where.extend([position] * len(said))
            times.extend([min(n, _MOST_TIMES) for n in said.values()])
            self._bytes += _FIXED_BYTES + sys.getsizeof(m.content) + _POSTING_BYTES * len(said)
        self._add_postings(hashes, where, times)
        if len(self.messages) > MAX_MESSAGES or self._bytes > MAX_BYTES:
            self._keep_newest(min(MAX_MESSAGES, len(self.messages)) // 2)

    def _add_postings(self, hashes: list[int], where: list[int], times: list[int]) -> None:
        """The new messages' postings merged in, kept sorted by word (a stable sort: each
        word's messages stay in order)."""
        terms = np.concatenate([self.terms, np.array(hashes, dtype=np.uint32)])
        order = np.argsort(terms, kind="stable")
        self.terms = terms[order]
        # positions stay below MAX_MESSAGES plus one batch: uint16, unless a batch is huge
        # (concatenate widens the old ones then)
        dtype = np.uint16 if len(self.messages) <= 0xFFFF else np.uint32
        self.where = np.concatenate([self.where, np.array(where, dtype=dtype)])[order]
        self.times = np.concatenate([self.times, np.array(times, dtype=np.uint8)])[order]

    def postings(self, word: str) -> tuple[NDArray[np.unsignedinteger[Any]], NDArray[np.uint8]]:
        """The positions of the held messages that say `word`, ascending, and its count in each."""
        key = np.uint32(_hashed(word))
        start = int(np.searchsorted(self.terms, key, side="left"))
        end = int(np.searchsorted(self.terms, key, side="right"))
        return self.where[start:end], self.times[start:end]

    def _keep_newest(self, keep: int) -> None:
        kept, vectors, scales = self.messages[-keep:], self.vectors, self.scales
        embedded_kept = max(self.embedded - (len(self.messages) - keep), 0)
        dropped = self.dropped + len(self.messages) - keep
        fresh = CompactedLog.of(kept)
        if vectors is not None and embedded_kept:
            start = self.embedded - embedded_kept
            fresh.vectors = vectors[start : self.embedded].copy()
            fresh.scales = scales[start : self.embedded].copy()
            fresh.embedded = embedded_kept
        for name in self.__slots__:
            setattr(self, name, getattr(fresh, name))
        self.dropped = dropped

    def quote(
        self, key: int, render: Callable[[Message], str], count: Callable[[str], int]
    ) -> tuple[str, int]:
        """What `render` makes of message `key` (a negative key: of message -1 - key, for
        another rendering), with its tokens (counted once in the log's life)."""
        line = render(self.messages[key if key >= 0 else -1 - key])
        return line, self._cost(key, line, count)[0]

    def cost(
        self, key: int, render: Callable[[Message], str], count: Callable[[str], int]
    ) -> tuple[int, bool]:
        """The tokens of `quote`'s line and whether it ends clipped ("…"), rendered only the
        first time in the log's life."""
        return self._cost(key, None, count, render)

    def _cost(
        self, key: int, line: str | None, count: Callable[[str], int],
        render: Callable[[Message], str] | None = None,
    ) -> tuple[int, bool]:  # fmt: skip
        held, position = (self.quoted, key) if key >= 0 else (self.headed, -1 - key)
        if len(held) < len(self.messages):
            held.extend([-1] * (len(self.messages) - len(held)))
        packed = held[position]
        if packed < 0:
            if line is None:
                assert render is not None
                line = render(self.messages[position])
            packed = held[position] = 2 * count(line) + line.endswith("…")
        return packed >> 1, bool(packed & 1)

    # --- vectors (computed off the loop by the service, handed back here) -----------------

    def unembedded(self, most: int) -> tuple[int, list[str]]:
        """The position and texts of the next messages without a vector (at most `most`)."""
        texts = [unlabelled_or_whole(m) for m in self.messages[self.embedded : self.embedded + most]]
        return self.dropped + self.embedded, texts

    def add_vectors(self, start: int, vectors: Sequence[Sequence[float]] | NDArray[np.floating]) -> None:
        """Vectors of the messages from absolute position `start` (as `unembedded` gave it);
        ignored when the log was rebuilt meanwhile (a stale batch) or they do not follow."""
        local = start - self.dropped
        if local != self.embedded or not len(vectors):
            return
        rows = np.asarray(vectors, dtype=np.float32)[: len(self.messages) - local]
        if self.vectors is None or self.vectors.shape[1] != rows.shape[1]:
            self.vectors = np.zeros((0, rows.shape[1]), dtype=np.int8)
            self.scales = np.zeros(0, dtype=np.float32)
        scales = np.abs(rows).max(axis=1)
        steps = np.where(scales > 0, 127 / np.where(scales > 0, scales, 1), 0)
        quantized = np.rint(rows * steps[:, np.newaxis]).astype(np.int8)
        self.vectors = np.concatenate([self.vectors[:local], quantized])
        self.scales = np.concatenate([self.scales[:local], scales.astype(np.float32)])
        self.embedded = local + len(rows)

    # --- search ---------------------------------------------------------------------------

    def ranked(self, query: str, vector: Sequence[float] | None) -> list[Candidate]:
        """The held messages that match `query`, best first: passages by words and messages
        by meaning, each ranking's head fused by reciprocal rank."""
        rankings: dict[Signal, list[Hit]] = {}
        lexical = self._by_words(sorted(set(terms(query))))
        if lexical:
            rankings[Signal.LEXICAL] = lexical
        if vector is not None and self.embedded:
            rankings[Signal.SEMANTIC] = self._by_meaning(vector)
        fused = reciprocal_rank_fusion(rankings)
        return [Candidate(int(hit.episode_id), hit.score, signals) for hit, signals in fused]

    def _by_words(self, wanted: Sequence[str]) -> list[Hit]:
        n = len(self.messages)
        if not wanted or n == 0:
            return []
        counts = np.zeros((len(wanted), n))
        for row, word in enumerate(wanted):
            where, times = self.postings(word)
            counts[row, where] = times
        if not counts.any():
            return []
        sizes = np.frombuffer(self.sizes, dtype=np.uint32).astype(np.float64)
        scores = bm25(neighbour_sums(counts), neighbour_sums(sizes[np.newaxis, :])[0])
        return _head(scores, scores > 0)

    def _by_meaning(self, vector: Sequence[float]) -> list[Hit]:
        assert self.vectors is not None
        query = np.asarray(vector, dtype=np.float32)
        if query.shape[0] != self.vectors.shape[1]:
            return []  # another model's vectors (the embedder changed): words only
        held = self.vectors[: self.embedded]
        scores = (held.astype(np.float32) @ query) * (self.scales[: self.embedded] / 127)
        return _head(scores, np.ones(len(scores), dtype=bool))


_EMPTY: dict[type, NDArray[Any]] = {}


def _empty(dtype: type) -> NDArray[Any]:
    """One read-only empty array of the type for every log (the arrays are replaced, never
    changed in place): a conversation never compacted holds none of its own (~450 bytes)."""
    held = _EMPTY.get(dtype)
    if held is None:
        held = _EMPTY[dtype] = np.zeros(0, dtype=dtype)
        held.flags.writeable = False
    return held


def _hashed(word: str) -> int:
    return hash(word) & 0xFFFFFFFF


def _head(scores: NDArray[np.floating], keep: NDArray[np.bool_]) -> list[Hit]:
    """The CANDIDATES best positions among those kept, best first (ties: the newer first)."""
    positions = np.flatnonzero(keep)
    if len(positions) > CANDIDATES:
        part = np.argpartition(-scores[positions], CANDIDATES - 1)[:CANDIDATES]
        positions = positions[part]
    order = sorted(positions.tolist(), key=lambda i: (-float(scores[i]), -i))
    return [Hit(str(i), float(scores[i])) for i in order]


def unlabelled_or_whole(m: Message) -> str:
    """What a message's vector is made of: its words, without a speaker's "Name: " label."""
    return unlabelled(m.content) or m.content
