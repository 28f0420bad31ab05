"""The default summarizer: the most informative sentences of the conversation and key facts
found by pattern. No model, no network; the same transcript always gives the same digest."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from episodic.domain.model import Message, Role
from episodic.domain.recall import DigestText
from episodic.summarize.facts import (
    FactMatch,
    fact_matches,
    select_facts,
    sentence_candidates,
    tool_candidates,
    tool_names,
)
from episodic.summarize.text import (
    MAX_MESSAGE_CHARS,
    STOPWORDS,
    Sentence,
    Utterance,
    fold,
    folded_words,
    sentences_of,
    shorten,
    utterances,
)

_CAPITALISED = re.compile(r"[\s(\"']([A-Z][a-z]+[\w'-]*|[A-Z]{2,}\w*)")
_NOT_NAMES = frozenset({"OK", "AM", "PM"})
_FIRST_PERSON = frozenset({"i", "i'm", "i've", "i'd", "i'll", "my", "we", "we're", "we've", "we'll", "our"})
_END = ".!?…"
_TOOLS_SHOWN = 5
_KEEP_RATIO = 0.4
_QUESTION = -2.0
_OPENING_QUESTION = 2.0
_FIRST_PERSON_STATEMENT = 1.0
_REPEAT_RATIO = 0.5


@dataclass(frozen=True, slots=True)
class ExtractiveSummarizer:
    """Summary: up to `max_summary_sentences` of the best-scoring sentences in their original
    order, then the tools used, within `max_summary_words` and `max_summary_chars`. Key facts:
    up to `max_facts` clauses matched by pattern, each within `max_fact_chars`. Each message is
    read up to `max_message_chars`, so a summary costs at most that much per message."""

    max_summary_words: int = 60
    max_summary_chars: int = 400
    max_summary_sentences: int = 4
    max_facts: int = 8
    max_fact_chars: int = 120
    max_message_chars: int = MAX_MESSAGE_CHARS

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")

    def summarize(self, transcript: Sequence[Message]) -> DigestText:
        found = read(utterances(transcript, self.max_message_chars))
        summary = self._summary(rank(found), tools_note(tool_names(transcript)))
        return DigestText(summary, self._facts(found, transcript))

    def _facts(self, found: Sequence[Read], transcript: Sequence[Message]) -> tuple[str, ...]:
        candidates = [fact for item in found for fact in sentence_candidates(item.sentence, item.hits)]
        candidates.extend(tool_candidates(transcript))
        return tuple(select_facts(candidates, self.max_facts, self.max_fact_chars))

    def _summary(self, ranked: Sequence[tuple[float, Read]], note: str) -> str:
        chosen = self._choose(ranked, note)
        if chosen:
            return compose(chosen, note)
        return self._clip(compose([ranked[0][1].sentence], "") if ranked else "", note)

    def _choose(self, ranked: Sequence[tuple[float, Read]], note: str) -> list[Sentence]:
        """Best first, skipping what would overflow or repeat a chosen sentence; stops at
        sentences far below the best."""
        chosen: list[Read] = []
        floor = min(ranked[0][0], _KEEP_RATIO * ranked[0][0]) if ranked else 0.0
        for value, item in ranked:
            if len(chosen) == self.max_summary_sentences or value < floor:
                break
            sentences = [*(kept.sentence for kept in chosen), item.sentence]
            if not _repeats(item, chosen) and self._fits(compose(sentences, note)):
                chosen.append(item)
        return [item.sentence for item in chosen]

    def _fits(self, text: str) -> bool:
        return len(text) <= self.max_summary_chars and len(text.split()) <= self.max_summary_words

    def _clip(self, text: str, note: str = "") -> str:
        """Cuts `text` so that it and the tools note fit the summary's limits."""
        words = max(self.max_summary_words - len(note.split()), 1)
        chars = max(self.max_summary_chars - len(note) - 1, 1)
        clipped = shorten(" ".join(text.split()[:words]), chars)
        return " ".join(part for part in (clipped, note) if part)[: self.max_summary_chars]


@dataclass(slots=True)
class Read:
    """A sentence with what scoring and fact finding both need."""

    sentence: Sentence
    words: frozenset[str]
    hits: tuple[FactMatch, ...]
    first_person: bool
    opening: bool
    length: int
    numbers: int


def read(spoken: Sequence[Utterance]) -> list[Read]:
    """Every sentence, read once. The first user message is the opening request."""
    opening = next((utterance.position for utterance in spoken if utterance.role is Role.USER), -1)
    return [
        item for utterance in spoken for item in _read_utterance(utterance, utterance.position == opening)
    ]


def _read_utterance(utterance: Utterance, opening: bool) -> list[Read]:
    folded = fold(utterance.text)
    return [_read(sentence, folded, opening) for sentence in sentences_of(utterance)]


def _read(sentence: Sentence, folded_utterance: str, opening: bool) -> Read:
    end = sentence.start + len(sentence.text)
    folded = folded_utterance[sentence.start : end]
    tokens = folded_words(folded)
    hits = fact_matches(sentence, folded, tokens)
    present = frozenset(tokens)
    return Read(
        sentence,
        words=present - STOPWORDS,
        hits=tuple(hits),
        first_person=not present.isdisjoint(_FIRST_PERSON),
        opening=opening,
        length=len(tokens),
        numbers=sum(map(str.isdigit, tokens)),
    )


def topic_words(found: Sequence[Read]) -> frozenset[str]:
    """The content words that occur in more than one message."""
    per_message: dict[int, frozenset[str]] = {}
    for item in found:
        position = item.sentence.utterance.position
        per_message[position] = per_message.get(position, frozenset()) | item.words
    counts = Counter(word for words in per_message.values() for word in words)
    return frozenset(word for word, count in counts.items() if count > 1)


def rank(found: Sequence[Read]) -> list[tuple[float, Read]]:
    """Best first; ties go to the earlier sentence."""
    topic = topic_words(found)
    scored = [(score(item, topic), item) for item in found]
    return sorted(scored, key=lambda pair: (-pair[0], pair[1].sentence.order))


def _repeats(item: Read, chosen: Sequence[Read]) -> bool:
    """Whether most of the sentence's content words are shared with a chosen one (Jaccard)."""
    return any(
        len(item.words & kept.words) >= _REPEAT_RATIO * len(item.words | kept.words) > 0 for kept in chosen
    )


def score(item: Read, topic: frozenset[str]) -> float:
    """Content words (more for words of the conversation's topic), numbers, names, facts and the
    stance (see _stance); length beyond 20 words counts against."""
    text = item.sentence.text
    value = len(item.words) + 0.5 * len(item.words & topic)
    value += 2.0 * item.numbers + 1.5 * len(names(text))
    value += 2.0 * bool(item.hits) + _stance(item)
    return value / (1 + max(0, item.length - 20) / 20)


def names(text: str) -> list[str]:
    """Capitalised words past the start of the sentence: names, places, products."""
    return [word for word in dict.fromkeys(_CAPITALISED.findall(text)) if word not in _NOT_NAMES]


def _stance(item: Read) -> float:
    """Statements about oneself count more; questions less, except the user's opening request."""
    if item.sentence.is_question:
        return _OPENING_QUESTION if item.opening else _QUESTION
    return _FIRST_PERSON_STATEMENT if item.first_person else 0.0


def compose(chosen: Sequence[Sentence], note: str) -> str:
    """The sentences in their original order, each run of one speaker labelled once."""
    parts: list[str] = []
    last_label = ""
    for sentence in sorted(chosen, key=lambda item: item.order):
        label = sentence.label
        text = sentence.text if sentence.text[-1] in _END else f"{sentence.text}."
        parts.append(text if label in ("", last_label) else f"{label}: {text}")
        last_label = label or last_label
    return " ".join([*parts, note] if note else parts)


def tools_note(tools: Sequence[str]) -> str:
    if not tools:
        return ""
    shown = ", ".join(tools[:_TOOLS_SHOWN])
    more = len(tools) - _TOOLS_SHOWN
    return f"Tools used: {shown}{f' and {more} more' if more > 0 else ''}."
