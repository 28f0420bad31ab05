"""Recall inside the live episode: the spoken messages of this conversation that its history
tail no longer holds (a summary covers them), searched each turn with the turn's query.

`CompactedLog` is part of a working set: derived from SQL (a cold read brings the newest
`MAX_MESSAGES` of them; afterwards each compaction hands over what it folded in), bounded,
and dropped with the working set. It holds each message as columns and its text in zlib blocks
(`CompactedLog`), its words as postings and, once the background embedder has got to it,
the message's vector (int8, scaled per row: 384 bytes at 384 dimensions where float16 took
768). The postings are flat arrays: each word's hash once with its number of messages, then
its messages (a byte each while the log holds at most 256) and only the counts above 1, not
a dict of a word to two arrays (~300 bytes per distinct word: the postings of a log held
several times the bytes of its text). A turn decompresses the blocks of the lines it renders
(~7 us a message here, ~0.6 ms when it renders a whole 87-message log). `ranked` scores a
query the way past-episode recall does: BM25 over passages (a message with its neighbours,
statistics from this log only) and cosine similarity by meaning, fused by reciprocal rank.
Linear in the postings of the query's words and in the messages held.
"""

from __future__ import annotations

import zlib
from array import array
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from episodic.domain.excerpts import bm25, neighbour_sums, unlabelled
from episodic.domain.model import Message, Role
from episodic.domain.recall import Hit, Signal, reciprocal_rank_fusion
from episodic.domain.tail import Kind, from_micros, kind_index, micros
from episodic.domain.text_analysis import only_terms, terms, words

MAX_MESSAGES = 2000  # held per episode: RSS stays flat however long the conversation grows
MAX_BYTES = 4 << 20  # and at most about this much: 2,000 messages of the largest size would be 512 MiB
HELD_CHARS = 4000  # of each message: what a passage renders is clipped far shorter (earlier_block)
CANDIDATES = 40  # per signal: the head each ranking contributes to the fusion
_SPOKEN = (Role.USER, Role.ASSISTANT)
_FIXED_BYTES = 30  # a held message's columns: seq, time, kind, tokens, words, text end (26) and slack
_BLOCK_BYTES = 33  # a bytes object's own, beside its data
BLOCK = 4  # messages a zlib block holds: ~1.9x smaller than their text on the seed's, and a
# block decompresses in ~20 us (16 messages: ~2.1x, but a rendered line costs 4x the work)
_MOST_TIMES = 255  # a word's count in one message, held up to this (BM25 saturates far below)
MARK = 16  # every MARK-th word's first posting is held; a word's start is summed on from there
_STEPS = np.arange(MARK)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A held message that matched the turn, by position in the log, best first."""

    position: int
    score: float
    signals: tuple[Signal, ...]


@dataclass(slots=True)
class CompactedLog:
    """The spoken messages before the tail, oldest first, with their words and vectors.

    A message is held as columns, not a `Message` (~200 bytes of objects and a datetime
    beside its text): its seq, its time, its kind (role, encoding, time zone) and its text in
    a zlib block of BLOCK messages (about half the bytes of the text). `message(i)` rebuilds
    one for the few a turn renders; what rendering never reads (metadata, client ids, tool
    calls) is not held."""

    episode_id: str = ""
    seqs: array[int] = field(default_factory=lambda: _no_column("q"))
    # wall-clock microseconds since 1970 (the datetime's fields, whatever its zone), and the
    # index of (role, encoding, zone) in `kinds`: rebuilt, a datetime equals the one held
    times_us: array[int] = field(default_factory=lambda: _no_column("q"))
    kind: array[int] = field(default_factory=lambda: _no_column("H"))
    kinds: list[Kind] = field(default_factory=lambda: _NO_ITEMS)
    token_counts: array[int] = field(default_factory=lambda: _no_column("i"))
    # message i's UTF-8 text: blocks[i // BLOCK][ends[i - 1] : ends[i]] decompressed (from 0
    # for the first of a block); only the last block may hold fewer than BLOCK
    blocks: list[bytes] = field(default_factory=lambda: _NO_ITEMS)
    # 16 bits: a block is at most BLOCK x HELD_CHARS characters of up to 4 UTF-8 bytes (64,000)
    ends: array[int] = field(default_factory=lambda: _no_column("H"))
    sizes: array[int] = field(default_factory=lambda: _no_column("H"))  # words per message (1 to 2,000)
    # the words' postings, by the word's hash: `terms` each hash once, ascending, and
    # `term_sizes` its number of messages; the word's messages are `where[start : start +
    # term_sizes[t]]`, ascending, where start is `term_marks[t // MARK]` plus the sizes of the
    # words from t - t % MARK to t (a byte a word, where each word's end took two); a word's
    # count in a message is 1 but at the postings `repeated` (ascending), `repeats` there (~4%
    # of them). ~2.3 bytes a posting where flat (hash, message, count) took 7.
    # The hash is str's (stable within a process), 32 bits of it: a query word shares one with
    # another word of the log about once in a million turns, and then counts that word's
    # occurrences too.
    terms: NDArray[np.uint32] = field(default_factory=lambda: _empty(np.uint32))
    term_sizes: NDArray[np.unsignedinteger[Any]] = field(default_factory=lambda: _empty(np.uint8))
    term_marks: NDArray[np.unsignedinteger[Any]] = field(default_factory=lambda: _empty(np.uint16))
    where: NDArray[np.unsignedinteger[Any]] = field(default_factory=lambda: _empty(np.uint8))
    repeated: NDArray[np.unsignedinteger[Any]] = field(default_factory=lambda: _empty(np.uint16))
    repeats: NDArray[np.uint8] = field(default_factory=lambda: _empty(np.uint8))
    # row i: message i's vector once embedded, as int8 times scales[i] / 127 (its largest
    # component maps to 127: the cosine's error stays under ~1%)
    vectors: NDArray[np.int8] | None = None
    scales: NDArray[np.float32] = field(default_factory=lambda: _empty(np.float32))
    embedded: int = 0  # the first `embedded` messages have their vector
    dropped: int = 0  # messages dropped from the front over the bound, since this log was made
    # per position, the tokens of its rendered line (earlier_block's, the same turn after turn)
    # times 2, plus 1 when the line was clipped; -1: not counted yet. `quoted` for the line,
    # `headed` for the other rendering (the passage's header). The lines are not kept: a turn
    # costs candidates by these counts and renders only the passages it shows, and holding
    # every candidate's line took ~0.7 of the text again.
    quoted: array[int] = field(default_factory=lambda: _no_column("i"))
    headed: array[int] = field(default_factory=lambda: _no_column("i"))
    _bytes: int = 0

    @classmethod
    def of(cls, messages: Sequence[Message]) -> CompactedLog:
        log = cls()
        log.extend(messages)
        return log

    @property
    def last_seq(self) -> int:
        return self.seqs[-1] if self.seqs else 0

    def __len__(self) -> int:
        return len(self.seqs)

    @property
    def messages(self) -> list[Message]:
        """Every held message rebuilt (for inspection and tests; a turn rebuilds only the
        ones it renders, by `message`)."""
        return [self.message(i) for i in range(len(self))]

    def message(self, position: int) -> Message:
        """The held message at `position`, rebuilt from its columns and its block."""
        role, encoding, _ = self.kinds[self.kind[position]]
        return Message(
            self.episode_id, self.seqs[position], role, self.text(position),
            self.token_counts[position], encoding, self.created_at(position),
        )  # fmt: skip

    def role(self, position: int) -> Role:
        return self.kinds[self.kind[position]][0]

    def created_at(self, position: int) -> datetime:
        """The held message's time, as `message(position).created_at`."""
        zone = self.kinds[self.kind[position]][2]
        return from_micros(self.times_us[position], zone)

    def text(self, position: int) -> str:
        return _opened(self.blocks[position // BLOCK], self.ends, position - position % BLOCK)[
            position % BLOCK
        ]

    def size(self) -> int:
        """Estimated bytes held (kept as messages come and go: a turn never walks them)."""
        vectors = self.vectors.nbytes + self.scales.nbytes if self.vectors is not None else 0
        counted = 4 * (len(self.quoted) + len(self.headed))
        held = (self.terms, self.term_sizes, self.term_marks, self.where, self.repeated, self.repeats)
        index = sum(a.nbytes for a in held)
        return self._bytes + vectors + counted + index

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
        if not self.seqs:
            self.episode_id = fresh[0].episode_id
            self._own_columns()
        texts = [m.content[:HELD_CHARS] for m in fresh]
        for m, content in zip(fresh, texts, strict=True):
            position = len(self.seqs)
            self._hold_columns(m)
            said = Counter(only_terms(words(unlabelled(content))))
            self.sizes.append(max(sum(said.values()), 1))
            hashes.extend([_hashed(w) for w in said])
            where.extend([position] * len(said))
            times.extend([min(n, _MOST_TIMES) for n in said.values()])
            self._bytes += _FIXED_BYTES
        self._hold_texts(texts)
        self._add_postings(hashes, where, times)
        if len(self.seqs) > MAX_MESSAGES or self.size() > MAX_BYTES:
            self._keep_newest(min(MAX_MESSAGES, len(self.seqs)) // 2)

    def _own_columns(self) -> None:
        """An empty log's columns are shared by every empty log (~530 bytes of arrays a
        conversation never compacted would hold): its own, before it takes a message."""
        self.seqs, self.times_us, self.kind = array("q"), array("q"), array("H")
        self.kinds, self.token_counts, self.blocks = [], array("i"), []
        self.ends, self.sizes, self.quoted, self.headed = array("H"), array("H"), array("i"), array("i")

    def _hold_columns(self, m: Message) -> None:
        self.seqs.append(m.seq)
        self.times_us.append(micros(m.created_at))
        self.kind.append(kind_index(self.kinds, m))
        self.token_counts.append(m.token_count)

    def _hold_texts(self, texts: list[str]) -> None:
        """The texts (the newest `len(texts)` positions, their columns already held) into
        blocks: the last block, when short, is opened and filled first."""
        first = len(self.seqs) - len(texts)
        start = first - first % BLOCK
        if start < first:  # a short last block: opened, refilled, compressed again
            texts = [*_opened(self.blocks[-1], self.ends, start), *texts]
            self._bytes -= _BLOCK_BYTES + len(self.blocks.pop())
            del self.ends[start:first]
        for at in range(0, len(texts), BLOCK):
            encoded = [t.encode() for t in texts[at : at + BLOCK]]
            end = 0
            for e in encoded:
                end += len(e)
                self.ends.append(end)
            blob = zlib.compress(b"".join(encoded))
            self.blocks.append(blob)
            self._bytes += _BLOCK_BYTES + len(blob)

    def _add_postings(self, hashes: list[int], where: list[int], times: list[int]) -> None:
        """The new messages' postings merged in, kept sorted by word (a stable sort: each
        word's messages stay in order)."""
        held = np.repeat(self.terms, self.term_sizes)
        counts = np.ones(len(self.where), dtype=np.uint8)
        counts[self.repeated] = self.repeats
        flat = np.concatenate([held, np.array(hashes, dtype=np.uint32)])
        order = np.argsort(flat, kind="stable")
        flat = flat[order]
        # positions and indexes in the narrowest type that holds them (concatenate widens)
        self.where = np.concatenate([self.where, np.array(where, dtype=_index_type(len(self)))])[order]
        counts = np.concatenate([counts, np.array(times, dtype=np.uint8)])[order]
        self.terms, firsts, sizes = np.unique(flat, return_index=True, return_counts=True)
        index = _index_type(len(flat) + 1)
        self.term_sizes = sizes.astype(_index_type(int(sizes.max(initial=0)) + 1))
        self.term_marks = firsts[::MARK].astype(index)
        self.repeated = np.flatnonzero(counts > 1).astype(index)
        self.repeats = counts[self.repeated]

    def postings(self, word: str) -> tuple[NDArray[np.unsignedinteger[Any]], NDArray[np.uint8]]:
        """The positions of the held messages that say `word`, ascending, and its count in each."""
        ((where, times),) = self._postings([word])
        return where, times

    def _postings(
        self, words: Sequence[str]
    ) -> list[tuple[NDArray[np.unsignedinteger[Any]], NDArray[np.uint8]]]:
        """`postings` of each word, found together (a few numpy calls for the query, not per word)."""
        terms, sizes = self.terms, self.term_sizes
        if not len(terms):
            return [(self.where[:0], self.repeats[:0])] * len(words)
        keys = np.array([_hashed(w) for w in words], dtype=np.uint32)
        at = np.minimum(np.searchsorted(terms, keys), len(terms) - 1)
        steps = (at - at % MARK)[:, np.newaxis] + _STEPS
        before = np.where(steps < at[:, np.newaxis], sizes[np.minimum(steps, len(terms) - 1)], 0)
        starts = self.term_marks[at // MARK] + before.sum(axis=1)
        ends = np.where(terms[at] == keys, starts + sizes[at], starts)
        lows, highs = np.searchsorted(self.repeated, starts), np.searchsorted(self.repeated, ends)
        found = []
        for start, end, low, high in zip(
            starts.tolist(), ends.tolist(), lows.tolist(), highs.tolist(), strict=True
        ):
            times = np.ones(end - start, dtype=np.uint8)
            times[self.repeated[low:high] - start] = self.repeats[low:high]
            found.append((self.where[start:end], times))
        return found

    def _keep_newest(self, keep: int) -> None:
        n, vectors, scales = len(self), self.vectors, self.scales
        kept = [self.message(i) for i in range(n - keep, n)]
        embedded_kept = max(self.embedded - (n - keep), 0)
        dropped = self.dropped + n - keep
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
        line = render(self.message(key if key >= 0 else -1 - key))
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
        if len(held) < len(self):
            held.extend([-1] * (len(self) - len(held)))
        packed = held[position]
        if packed < 0:
            if line is None:
                assert render is not None
                line = render(self.message(position))
            packed = held[position] = 2 * count(line) + line.endswith("…")
        return packed >> 1, bool(packed & 1)

    # --- vectors (computed off the loop by the service, handed back here) -----------------

    def unembedded(self, most: int) -> tuple[int, list[str]]:
        """The position and texts of the next messages without a vector (at most `most`)."""
        positions = range(self.embedded, min(self.embedded + most, len(self)))
        texts = [_unlabelled_or_whole(self.text(i)) for i in positions]
        return self.dropped + self.embedded, texts

    def add_vectors(self, start: int, vectors: Sequence[Sequence[float]] | NDArray[np.floating]) -> None:
        """Vectors of the messages from absolute position `start` (as `unembedded` gave it);
        ignored when the log was rebuilt meanwhile (a stale batch) or they do not follow."""
        local = start - self.dropped
        if local != self.embedded or not len(vectors):
            return
        rows = np.asarray(vectors, dtype=np.float32)[: len(self) - local]
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
        n = len(self)
        if not wanted or n == 0:
            return []
        counts = np.zeros((len(wanted), n))
        for row, (where, times) in enumerate(self._postings(wanted)):
            counts[row, where] = times
        if not counts.any():
            return []
        sizes = np.frombuffer(self.sizes, dtype=np.uint16).astype(np.float64)
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
_NO_COLUMNS: dict[str, array[int]] = {}
_NO_ITEMS: list[Any] = []  # an empty log's kinds and blocks: never appended to (`_own_columns`)


def _no_column(typecode: str) -> array[int]:
    """One empty array of the type for every empty log's columns: never appended to, the
    log takes its own first (`_own_columns`)."""
    return _NO_COLUMNS.setdefault(typecode, array(typecode))


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
    return _unlabelled_or_whole(m.content)


def _unlabelled_or_whole(content: str) -> str:
    return unlabelled(content) or content


def _index_type(n: int) -> type[np.unsignedinteger[Any]]:
    """The narrowest unsigned type that holds indexes below `n`: a live log's positions are
    mostly below 256 (a byte a posting)."""
    return np.uint8 if n <= 0x100 else np.uint16 if n <= 0x10000 else np.uint32


_OPENED: OrderedDict[int, tuple[bytes, tuple[str, ...]]] = OrderedDict()  # by id of the block
_MOST_OPENED = 64  # blocks: a turn renders a few passages, a first one costs up to ~80 candidates


def _opened(block: bytes, ends: array[int], first: int) -> tuple[str, ...]:
    """The texts of a block whose first message is at position `first`, decompressed once
    for the turns that read it close together: a small LRU for the whole process (blocks of
    every log, none kept per conversation). An entry holds its block, so its id is not
    reused while it is held."""
    held = _OPENED.get(id(block))
    if held is not None and held[0] is block:
        with suppress(KeyError):  # another thread's turn evicted it meanwhile
            _OPENED.move_to_end(id(block))
        return held[1]
    data = zlib.decompress(block)
    cuts = [0, *ends[first : first + BLOCK]]
    texts = tuple(data[cuts[i] : cuts[i + 1]].decode() for i in range(len(cuts) - 1))
    _OPENED[id(block)] = (block, texts)
    while len(_OPENED) > _MOST_OPENED:
        with suppress(KeyError):
            _OPENED.popitem(last=False)
    return texts
