"""The passages of recalled episodes that match this turn's query: the detail a summary
leaves out is what people ask about. Messages of the recalled episodes are ranked by BM25
against the query (statistics from those messages only; speaker labels are not matched; words
as `text_analysis` reads them, the query's and the messages' alike), the
best few per episode are kept verbatim (clipped) with the reply after each, in their original
order. Linear in the text read."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from episodic.domain.model import Message, Role
from episodic.domain.text_analysis import only_terms, words
from episodic.domain.text_analysis import terms as terms  # a query's words, as every reader reads them

_K1, _B = 1.2, 0.75  # the customary BM25 constants, not tuned
_SPOKEN = (Role.USER, Role.ASSISTANT)
_LABELLED = re.compile(r"^[A-Z][\w'.-]{0,30}(?: [A-Z][\w'.-]{0,30})?: ")


@dataclass(frozen=True, slots=True)
class Transcript:
    """An episode's user and assistant messages, read once (closed episodes never change),
    with what every query scores them by: words per message, words per passage (a message with
    the one before and the one after) and, per word, where it occurs and how often. A turn's
    scoring then reads only the postings of its query's words, and scores in numpy."""

    messages: tuple[Message, ...]
    sizes: NDArray[np.float64]  # words per message, at least 1
    passage_sizes: NDArray[np.float64]  # words per passage, at least 1
    # Postings in compressed rows: word w's occurrences are where[start[w]:start[w + 1]] (message
    # indices) with counts[...] times each; `vocabulary` numbers the words.
    vocabulary: Mapping[str, int]
    start: NDArray[np.int64]
    where: NDArray[np.int64]
    times: NDArray[np.float64]
    # (message index, max_chars) -> its excerpt line: the same few are quoted turn after turn
    quoted: dict[tuple[int, int], str] = field(default_factory=dict, compare=False)

    def __len__(self) -> int:
        return len(self.messages)

    def quote(self, i: int, max_chars: int) -> str:
        line = self.quoted.get((i, max_chars))
        if line is None:
            line = self.quoted[(i, max_chars)] = verbatim(self.messages[i], max_chars)
        return line

    def counts(self, wanted: Sequence[str]) -> NDArray[np.float64]:
        """Counts of each wanted word (rows) in each message (columns)."""
        found = np.zeros((len(wanted), len(self.messages)))
        for row, word in enumerate(wanted):
            w = self.vocabulary.get(word)
            if w is not None:
                span = slice(self.start[w], self.start[w + 1])
                found[row, self.where[span]] = self.times[span]
        return found


def spoken(messages: Sequence[Message]) -> Transcript:
    """The speaker's "Name: " label is not matched: it names the speaker of half the messages,
    so a question naming that person would otherwise pick any of their lines."""
    kept = tuple(m for m in messages if m.role in _SPOKEN)
    postings: dict[str, tuple[list[int], list[int]]] = {}
    sizes = np.zeros(len(kept))
    for i, m in enumerate(kept):
        said = words(unlabelled(m.content))
        sizes[i] = len(said)
        said_times = Counter(said)
        for word in only_terms(said_times):  # never a query's word: no postings kept for it
            where, counts = postings.setdefault(word, ([], []))
            where.append(i)
            counts.append(said_times[word])
    lengths = [len(where) for where, _ in postings.values()]
    return Transcript(
        kept,
        np.maximum(sizes, 1),
        np.maximum(neighbour_sums(sizes[np.newaxis, :])[0], 1),
        {word: w for w, word in enumerate(postings)},
        np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64),
        np.fromiter((i for where, _ in postings.values() for i in where), np.int64, sum(lengths)),
        np.fromiter((n for _, counts in postings.values() for n in counts), np.float64, sum(lengths)),
    )


def neighbour_sums(per_message: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per column, the sum of it and its neighbours (within one episode's columns)."""
    summed = per_message.copy()
    summed[:, 1:] += per_message[:, :-1]
    summed[:, :-1] += per_message[:, 1:]
    return summed


def unlabelled(content: str) -> str:
    label = _LABELLED.match(content)
    return content[label.end() :] if label else content


def choose_excerpts(
    query: str, transcripts: Mapping[str, Transcript], per_episode: int, max_chars: int
) -> dict[str, tuple[str, ...]]:
    """Episode id -> its best-matching spoken messages (at most `per_episode`), each followed by
    the message after it, each clipped to `max_chars`, oldest first; episodes with no match are
    left out. The reply is kept because a matching message is often the question, and what
    people later ask about is its answer (on LoCoMo dev: 0.788 -> 0.871 of answers covered)."""
    wanted = sorted(set(terms(query)))
    if not wanted or per_episode < 1 or not transcripts:
        return {}
    episodes = list(transcripts.values())
    counts = [t.counts(wanted) for t in episodes]
    scores = bm25(np.hstack(counts), np.concatenate([t.sizes for t in episodes]))
    chosen: dict[str, tuple[str, ...]] = {}
    start = 0
    for episode, t in transcripts.items():
        mine = scores[start : start + len(t)]
        start += len(t)
        matching = np.flatnonzero(mine > 0)
        best = sorted(matching.tolist(), key=lambda i: (-mine[i], i))[:per_episode]
        shown = sorted({j for i in best for j in (i, i + 1) if j < len(t)})
        if shown:
            chosen[episode] = tuple(t.quote(j, max_chars) for j in shown)
    return chosen


def passage_scores(query: str, transcripts: Mapping[str, Transcript]) -> dict[str, float]:
    """Episode id -> the BM25 score of its best passage (a message with the one before and the
    one after) against the query, statistics from these passages only. A whole episode's text
    dilutes one exchange about the thing asked; its best passage does not."""
    wanted = sorted(set(terms(query)))
    if not wanted or not transcripts:
        return {}
    episodes = list(transcripts.values())
    counts = [neighbour_sums(t.counts(wanted)) for t in episodes]
    scores = bm25(np.hstack(counts), np.concatenate([t.passage_sizes for t in episodes]))
    best: dict[str, float] = {}
    start = 0
    for episode, t in transcripts.items():
        best[episode] = float(scores[start : start + len(t)].max(initial=0.0))
        start += len(t)
    return best


def bm25(counts: NDArray[np.float64], lengths: NDArray[np.float64]) -> NDArray[np.float64]:
    """BM25 of each column (a text's counts of the query's words, one row per word) against the
    query, statistics from these columns only."""
    if counts.shape[1] == 0:
        return np.zeros(0)
    holding = (counts > 0).sum(axis=1, keepdims=True)
    idf = np.log(1 + (counts.shape[1] - holding + 0.5) / (holding + 0.5))
    norm = _K1 * (1 - _B + _B * lengths / lengths.mean())
    scores: NDArray[np.float64] = (idf * counts * (_K1 + 1) / (counts + norm)).sum(axis=0)
    return scores


def verbatim(m: Message, max_chars: int) -> str:
    """One line, speaker-attributed (a message not already labelled "Name: " gets its role)."""
    return spoken_line(m.role, m.content, max_chars)


def spoken_line(role: Role, content: str, max_chars: int) -> str:
    """`verbatim` of a message with this role and content."""
    text = " ".join(content.split())
    if not _LABELLED.match(text):
        text = f"{role.value.capitalize()}: {text}"
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars - 1]
    return cut[: cut.rfind(" ")] + "…" if " " in cut[max_chars // 2 :] else cut + "…"
