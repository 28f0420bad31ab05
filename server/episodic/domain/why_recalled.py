"""Why a past episode was recalled for a model call, or why it was not (issue 28): for each
episode the call's recall found, its rank and score, the query's words that its rendered
entry (summary, key facts, excerpts) holds, highlighted where they occur, and the passages
(excerpts: its messages that matched the query's words) the call rendered with it.

Computed from the stored call alone, never re-run: a call keeps, of recall, each candidate's
id, fused score, end time, whether it was rendered and the signals that found it (semantic,
lexical, recency; calls stored before 2026-11-27 have none), and the rendered "[Past
Conversations]" text; it does not keep the recall query (a caller's `recall_query`
overrides the user message, and is not stored). The query is therefore taken to be the
call's user message, and the explanation says so; the words are read as every reader of the project reads them
(`text_analysis.terms`: folded, stop words out), so "Roses" in the query is "roses" in an
excerpt. Pure; linear in the call's rendered text."""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from episodic.domain.assembly import EXCERPTS_HEADER, KEY_FACTS_LABEL, RECALL_FOOTER, RECALL_HEADER
from episodic.domain.context import ModelCall, RecalledEpisode, Section
from episodic.domain.text_analysis import fold, terms

ENTRY_END = "\n---\n"  # each episode's entry in "[Past Conversations]" ends with it
_SUMMARY_LABEL = "Summary: "
_DATE_LABEL = "Date: "
_EXCERPT_BULLET = "- "
# A word as `text_analysis.split_words` reads folded text: letters and digits, apostrophes kept
# inside it. Used only to find where a query word stands in a text (to highlight it).
_WORD = re.compile(r"[^\W_]+(?:'+[^\W_]+)*")


class QuerySource(enum.StrEnum):
    USER_MESSAGE = "user_message"  # the call's user message (a recall_query, if sent, is not stored)
    NONE = "none"  # the call rendered no user message: recall had nothing to match by words


class PartKind(enum.StrEnum):
    SUMMARY = "summary"
    KEY_FACTS = "key_facts"
    EXCERPT = "excerpt"  # one of its messages that matched the query's words, verbatim
    BLOCK = "block"  # the whole rendered block, when it cannot be split per episode


class Basis(enum.StrEnum):
    """What the rendered text says about why the episode ranked."""

    PASSAGES = "passages"  # passages of it matched the query's words (a lexical match)
    WORDS = "words"  # its summary or key facts hold query words, no passage was rendered
    MEANING = "meaning"  # it holds no query word: ranked by meaning (semantic) or recency
    NOT_RENDERED = "not_rendered"  # found, over the recall allowance: the call has none of its text


class Verdict(enum.StrEnum):
    RENDERED = "rendered"  # a candidate the model saw
    OVER_ALLOWANCE = "over_allowance"  # a candidate, left out for lack of room
    NOT_FOUND = "not_found"  # not among the candidates, or in none of their rendered text


@dataclass(frozen=True, slots=True)
class Segment:
    """A piece of a part's text; `word` is the query word it is (to highlight), else ""."""

    text: str
    word: str = ""


@dataclass(frozen=True, slots=True)
class Part:
    kind: PartKind
    text: str
    matched: tuple[str, ...]  # the query's words it holds, in the query's order
    segments: tuple[Segment, ...]  # `text`, cut where a matched word stands


@dataclass(frozen=True, slots=True)
class WhyRecalled:
    episode_id: str
    rank: int  # 1: the best candidate of the call's recall
    candidates: int
    score: float  # the fused score the call recorded
    rendered: bool
    basis: Basis
    matched: tuple[str, ...]  # the query's words its rendered entry holds, in the query's order
    missing: tuple[str, ...]  # the query's words it does not hold
    parts: tuple[Part, ...]  # its rendered entry: summary, key facts, each excerpt
    signals: tuple[str, ...] = ()  # what found it (semantic, lexical, recency), as the call recorded

    @property
    def passages(self) -> tuple[Part, ...]:
        """The rendered excerpts that hold a query word: the passages that made it match."""
        return tuple(p for p in self.parts if p.kind is PartKind.EXCERPT and p.matched)


@dataclass(frozen=True, slots=True)
class RecallExplanation:
    query: str
    source: QuerySource
    words: tuple[str, ...]  # the query's words, each once, in order
    episodes: tuple[WhyRecalled, ...]  # every candidate, best first
    unmatched: tuple[str, ...]  # query words no rendered episode holds: the hop recall missed
    split: bool  # the rendered block was split into one entry per rendered episode


@dataclass(frozen=True, slots=True)
class Candidacy:
    """Whether an episode (by id) or a phrase was among what the call's recall found."""

    about: str
    verdict: Verdict
    episode_ids: tuple[str, ...]  # the candidates it is, or whose rendered entry holds the phrase
    shared: tuple[str, ...]  # the phrase's words that are also the query's
    unseen: int  # candidates over the allowance, whose text the call does not hold


def query_of(call: ModelCall) -> tuple[str, QuerySource]:
    """What recall matched by, as far as the call records it: its user message."""
    for m in call.messages:
        if m.section is Section.USER_MESSAGE:
            return m.content, QuerySource.USER_MESSAGE
    return "", QuerySource.NONE


def query_words(query: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(terms(query)))


def explain_recall(call: ModelCall) -> RecallExplanation:
    """For each episode the call's recall found, why it ranked as it did (see the module)."""
    query, source = query_of(call)
    words = query_words(query)
    recalled = call.report.recalled
    rendered = [e for e in recalled if e.rendered]
    texts, split = _entry_texts(call)
    episodes = tuple(
        _why(e, rank, len(recalled), words, texts.get(e.episode_id, "") if e.rendered else "", split)
        for rank, e in enumerate(recalled, start=1)
    )
    held = {w for e in episodes for w in e.matched}
    unmatched = tuple(w for w in words if w not in held) if rendered else words
    return RecallExplanation(query, source, words, episodes, unmatched, split)


def candidacy(call: ModelCall, about: str) -> Candidacy:
    """Why not recalled: `about` is an episode id of the candidates (rendered, or over the
    allowance), else a phrase looked for (folded) in each rendered episode's entry."""
    about = about.strip()
    recalled = call.report.recalled
    unseen = sum(1 for e in recalled if not e.rendered)
    words = query_words(query_of(call)[0])
    phrase_words = query_words(about)
    shared = tuple(w for w in phrase_words if w in words)
    by_id = [e for e in recalled if e.episode_id == about]
    if by_id:
        verdict = Verdict.RENDERED if by_id[0].rendered else Verdict.OVER_ALLOWANCE
        return Candidacy(about, verdict, (about,), shared, unseen)
    texts, _ = _entry_texts(call)
    folded = fold(about)
    holding = tuple(episode_id for episode_id, text in texts.items() if folded and folded in fold(text))
    verdict = Verdict.RENDERED if holding else Verdict.NOT_FOUND
    return Candidacy(about, verdict, holding, shared, unseen)


def _why(
    e: RecalledEpisode, rank: int, candidates: int, words: Sequence[str], entry: str, split: bool
) -> WhyRecalled:
    parts = tuple(_part(kind, text, words) for kind, text in (_parts(entry) if split else _whole(entry)))
    held = {w for p in parts for w in p.matched}
    matched = tuple(w for w in words if w in held)
    missing = tuple(w for w in words if w not in held)
    if not e.rendered:
        basis = Basis.NOT_RENDERED
    elif any(p.kind is PartKind.EXCERPT and p.matched for p in parts):
        basis = Basis.PASSAGES
    elif matched:
        basis = Basis.WORDS
    else:
        basis = Basis.MEANING
    signals = tuple(s.value for s in e.signals)
    return WhyRecalled(
        e.episode_id, rank, candidates, e.score, e.rendered, basis, matched, missing, parts, signals
    )


def _entry_texts(call: ModelCall) -> tuple[dict[str, str], bool]:
    """Each rendered episode's entry in the call's block (in the report's order), or the whole
    block for each when it does not split; and whether it split."""
    rendered = [e.episode_id for e in call.report.recalled if e.rendered]
    entries, split = _entries(_block(call), len(rendered))
    if not entries:
        return {}, split
    return {episode_id: entries[i] if split else entries[0] for i, episode_id in enumerate(rendered)}, split


def _block(call: ModelCall) -> str:
    return next((m.content for m in call.messages if m.section is Section.PAST_CONVERSATIONS), "")


def _entries(block: str, rendered: int) -> tuple[list[str], bool]:
    """The entries of the rendered block, one per rendered episode, in their order, and True;
    when the block does not split into that many (an entry's own text holding the separator),
    the whole block once, and False."""
    if not block or rendered == 0:
        return [], False
    body = block.removeprefix(RECALL_HEADER + "\n").removesuffix(RECALL_FOOTER)
    pieces = body.split(ENTRY_END)
    if len(pieces) == rendered + 1 and pieces[-1] == "":
        return pieces[:-1], True
    return [body], False


def _whole(entry: str) -> list[tuple[PartKind, str]]:
    return [(PartKind.BLOCK, entry)] if entry else []


def _parts(entry: str) -> list[tuple[PartKind, str]]:
    """An entry's summary, key facts and excerpts (a line that starts none continues the one
    before: a summary or an excerpt may span lines)."""
    parts: list[tuple[PartKind, str]] = []
    in_excerpts = False
    for line in entry.split("\n"):
        if not parts and line.startswith(_DATE_LABEL):
            continue
        if not in_excerpts and line.startswith(_SUMMARY_LABEL):
            parts.append((PartKind.SUMMARY, line.removeprefix(_SUMMARY_LABEL)))
        elif not in_excerpts and line.startswith(KEY_FACTS_LABEL):
            parts.append((PartKind.KEY_FACTS, line.removeprefix(KEY_FACTS_LABEL)))
        elif not in_excerpts and line == EXCERPTS_HEADER:
            in_excerpts = True
        elif in_excerpts and line.startswith(_EXCERPT_BULLET):
            parts.append((PartKind.EXCERPT, line.removeprefix(_EXCERPT_BULLET)))
        elif parts:
            kind, text = parts[-1]
            parts[-1] = (kind, f"{text}\n{line}")
    return parts


def _part(kind: PartKind, text: str, words: Sequence[str]) -> Part:
    own = set(terms(text))
    matched = tuple(w for w in words if w in own)
    return Part(kind, text, matched, tuple(highlight(text, matched)))


def highlight(text: str, words: Iterable[str]) -> list[Segment]:
    """`text` cut into plain pieces and the pieces that are one of `words` (folded query
    words), as `text_analysis` reads words; a text whose folding changes its length (a
    character that lowers to two) is left whole."""
    wanted = set(words)
    folded = fold(text)
    if not wanted or len(folded) != len(text):
        return [Segment(text)] if text else []
    segments: list[Segment] = []
    cursor = 0
    for found in _WORD.finditer(folded):
        word = found.group()
        if word not in wanted:
            continue
        if found.start() > cursor:
            segments.append(Segment(text[cursor : found.start()]))
        segments.append(Segment(text[found.start() : found.end()], word))
        cursor = found.end()
    if cursor < len(text):
        segments.append(Segment(text[cursor:]))
    return segments
