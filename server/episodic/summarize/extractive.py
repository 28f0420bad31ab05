"""The default summarizer: the most informative sentences of the conversation and key facts
found by pattern. No model, no network; the same transcript always gives the same digest.

Named things the user states (`named.py`: names, numbers, dates) keep their place when a
rolling summary is compacted again (`keep_named`, see `ExtractiveSummarizer`): the previous
summary's sentences are read as their speakers said them (a fact of the user's is found again
as one, not lost for being in an assistant-role message), a sentence scores for each named
thing of the user's that no sentence chosen before it holds, and key facts that name one come
first (`NamedFirst`), the previous summary's oldest of them pinned. All of it is a bounded
amount of work per sentence read: at most `named.MAX_NAMED` things each, one more fact
candidate, and choosing re-scores a sentence at most once per sentence chosen."""

from __future__ import annotations

import heapq
import re
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass

from episodic.domain.model import Message, Role
from episodic.domain.recall import DigestText
from episodic.summarize.facts import (
    Candidate,
    FactMatch,
    Kind,
    Order,
    fact_matches,
    select_facts,
    sentence_candidates,
    tool_candidates,
    tool_names,
)
from episodic.summarize.named import named_things
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
_NAMED = 2.0  # per named thing of the user's that no chosen sentence holds yet
_MAX_SPEAKERS = 16  # the speakers' names a named thing is told apart from


@dataclass(frozen=True, slots=True)
class ExtractiveSummarizer:
    """Summary: up to `max_summary_sentences` of the best-scoring sentences in their original
    order, then the tools used, within `max_summary_words` and `max_summary_chars`. Key facts:
    up to `max_facts` clauses matched by pattern, each within `max_fact_chars`. Each message is
    read up to `max_message_chars`, so a summary costs at most that much per message.

    `keep_named`: when a previous summary re-enters (a live episode's rolling summary
    compacted again), the user's named things weigh in. A sentence scores `_NAMED` for each
    one no sentence chosen before it holds; key facts that name one come first
    (`NamedFirst`), and a statement of the user's that names one is a fact even when no
    pattern matches it (`Kind.NAMED`). The user: user messages, and in the previous summary
    the sentences under the user's labels ("User", or the speaker name of the user's
    messages: "Caroline: ...") and its unlabelled key facts. A transcript without a previous
    summary (a closed episode's digest, which recall searches, or a first compaction) is
    summarized as before, so recall does not move. Off: the summarizer as it was, for
    comparison (`episodic-lab eval-names`)."""

    max_summary_words: int = 60
    max_summary_chars: int = 400
    max_summary_sentences: int = 4
    max_facts: int = 8
    max_fact_chars: int = 120
    max_message_chars: int = MAX_MESSAGE_CHARS
    keep_named: bool = True

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if not isinstance(value, bool) and value < 1:
                raise ValueError(f"{name} must be at least 1")

    def summarize(self, transcript: Sequence[Message]) -> DigestText:
        spoken = utterances(transcript, self.max_message_chars)
        keep_named = self.keep_named and any(utterance.rolled for utterance in spoken)
        found = read(spoken, keep_named)
        summary = self._summary(rank(found), tools_note(tool_names(transcript)))
        return DigestText(summary, self._facts(found, transcript, keep_named))

    def _facts(
        self, found: Sequence[Read], transcript: Sequence[Message], keep_named: bool
    ) -> tuple[str, ...]:
        candidates = [fact for item in found for fact in sentence_candidates(item.sentence, item.hits)]
        candidates.extend(tool_candidates(transcript))
        if not keep_named:
            return tuple(select_facts(candidates, self.max_facts, self.max_fact_chars))
        candidates.extend(named_candidates(found))
        named = NamedFirst(frozenset(id(item.sentence) for item in found if item.named))
        pinned = sorted(filter(named.kept, candidates), key=named.age)
        facts = select_facts(
            candidates, self.max_facts, self.max_fact_chars, named.importance, pinned, self.max_facts // 2
        )
        return tuple(facts)

    def _summary(self, ranked: Sequence[tuple[float, Read]], note: str) -> str:
        chosen = self._choose(ranked, note)
        if chosen:
            return compose(chosen, note)
        return self._clip(compose([ranked[0][1].sentence], "") if ranked else "", note)

    def _choose(self, ranked: Sequence[tuple[float, Read]], note: str) -> list[Sentence]:
        """Best first, skipping what would overflow or repeat a chosen sentence; stops at
        sentences far below the best. A named thing counts for the first sentence chosen
        that holds it only: a sentence whose named things are already held is scored again
        (lazily: popped, re-scored and pushed back, at most once per sentence chosen)."""
        chosen: list[Read] = []
        floor = _floor(ranked)
        held: set[str] = set()
        queue = [(-value, index) for index, (value, _) in enumerate(ranked)]  # sorted: a heap
        while queue and len(chosen) < self.max_summary_sentences:
            negated, index = heapq.heappop(queue)
            value, item = ranked[index]
            now = value - _named_loss(item, held)
            if now < -negated:
                heapq.heappush(queue, (-now, index))
                continue
            if now < floor:
                break
            sentences = [*(kept.sentence for kept in chosen), item.sentence]
            if not _repeats(item, chosen) and self._fits(compose(sentences, note)):
                chosen.append(item)
                held.update(item.named)
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
    named: tuple[str, ...] = ()  # named things the user states in it (when keeping them)
    named_at: int = 0  # where the first of them is in the sentence


@dataclass(frozen=True, slots=True)
class _Speakers:
    """Who speaks in a transcript: the labels a rolled summary gives the user's sentences,
    and every speaker's folded name (never a named thing said)."""

    user_labels: frozenset[str]
    names: frozenset[str]

    @classmethod
    def of(cls, spoken: Sequence[Utterance]) -> _Speakers:
        user = {Role.USER.value.capitalize()}
        names: dict[str, None] = {}
        for utterance in spoken:
            if utterance.speaker and not utterance.rolled:
                if utterance.role is Role.USER:
                    user.add(utterance.speaker)
                if len(names) < _MAX_SPEAKERS:
                    names.update(dict.fromkeys(fold(utterance.speaker).split()))
        return cls(frozenset(user), frozenset(names))


def read(spoken: Sequence[Utterance], keep_named: bool = False) -> list[Read]:
    """Every sentence, read once. The first user message is the opening request."""
    opening = next((utterance.position for utterance in spoken if utterance.role is Role.USER), -1)
    speakers = _Speakers.of(spoken) if keep_named else None
    return [
        item
        for utterance in spoken
        for item in _read_utterance(utterance, utterance.position == opening, speakers)
    ]


def _read_utterance(utterance: Utterance, opening: bool, speakers: _Speakers | None) -> list[Read]:
    folded = fold(utterance.text)
    return [_read(sentence, folded, opening, speakers) for sentence in sentences_of(utterance)]


def _read(sentence: Sentence, folded_utterance: str, opening: bool, speakers: _Speakers | None) -> Read:
    end = sentence.start + len(sentence.text)
    folded = folded_utterance[sentence.start : end]
    tokens = folded_words(folded)
    present = frozenset(tokens)
    first_person = not present.isdisjoint(_FIRST_PERSON)
    rolled = sentence.utterance.rolled
    # A previous summary's sentence said by a person (any label but the assistant's; the key
    # facts of the user carry none) states facts as that person did.
    person = None
    if speakers is not None and rolled:
        person = sentence.speaker != Role.ASSISTANT.value.capitalize()
    hits = fact_matches(sentence, folded, tokens, person)
    named: tuple[str, ...] = ()
    if speakers is not None and _said_by_user(sentence, speakers):
        named = named_things(sentence.text, speakers.names)
    named_at = max(folded.find(named[0]), 0) if named else 0
    return Read(
        sentence,
        words=present - STOPWORDS,
        hits=tuple(hits),
        first_person=first_person,
        opening=opening,
        length=len(tokens),
        numbers=sum(map(str.isdigit, tokens)),
        named=named,
        named_at=named_at,
    )


def _said_by_user(sentence: Sentence, speakers: _Speakers) -> bool:
    """A user's message; in a previous summary, a sentence under a label of the user's, or an
    unlabelled key fact: a conversation without speaker names labels only its summary line,
    and its key facts are the user's as a rule (first-person patterns count for the user only,
    and a fact that no pattern finds is a statement of the user's)."""
    if not sentence.utterance.rolled:
        return sentence.utterance.role is Role.USER
    return sentence.speaker in speakers.user_labels or (sentence.key_fact and not sentence.speaker)


@dataclass(frozen=True, slots=True)
class NamedFirst:
    """How key facts rank when the user's named things weigh in: tool failures; then, pinned,
    the facts of the previous summary that name a thing of the user's, the oldest first, up to
    half the facts (a pet's name said first is not pushed out by the names of a later topic,
    and the other half still takes in what is new); then the new facts that name a thing of
    the user's, by kind; then the previous summary's others of them, the newest first (when
    there is no room for them all, the oldest go first); then every other fact by kind, the
    new before the kept, the kept newest first."""

    sentences: frozenset[int]  # id() of the sentences in which the user names a thing

    def names(self, candidate: Candidate) -> bool:
        source = candidate[2]
        return isinstance(source, Sentence) and id(source) in self.sentences

    def kept(self, candidate: Candidate) -> bool:
        """A fact of the previous summary's that names a thing of the user's."""
        return _kept(candidate) and self.names(candidate)

    @staticmethod
    def age(candidate: Candidate) -> tuple[bool, Order]:
        """Oldest first: the previous summary's key facts (in the order they were stated), then
        its summary sentences (newer, as a rule: they are re-chosen each time)."""
        source = candidate[2]
        return not (isinstance(source, Sentence) and source.key_fact), candidate[1]

    def importance(self, candidate: Candidate) -> tuple[object, ...]:
        kind, order, _ = candidate
        if kind is Kind.TOOL_FAILURE:
            return (0,)
        newest = tuple(-part for part in order)
        if not self.names(candidate):
            return (3, kind, True, newest) if _kept(candidate) else (3, kind, False, order)
        return (2, newest) if _kept(candidate) else (1, kind, order)


def _kept(candidate: Candidate) -> bool:
    source = candidate[2]
    return isinstance(source, Sentence) and source.utterance.rolled


def named_candidates(found: Sequence[Read]) -> Iterator[Candidate]:
    """The user's statements that name a thing but match no fact pattern, each from the
    clause of the first thing it names."""
    for item in found:
        if item.named and not item.hits and not item.sentence.is_question:
            yield Kind.NAMED, (*item.sentence.order, item.named_at), item.sentence


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
    """Content words (more for words of the conversation's topic), numbers, names, facts, the
    stance (see _stance) and the user's named things (see _named_credit); length beyond 20
    words counts against."""
    text = item.sentence.text
    value = len(item.words) + 0.5 * len(item.words & topic)
    value += 2.0 * item.numbers + 1.5 * len(names(text))
    value += 2.0 * bool(item.hits) + _stance(item) + _named_credit(item)
    return value / _length_factor(item)


def _length_factor(item: Read) -> float:
    return 1 + max(0, item.length - 20) / 20


def _floor(ranked: Sequence[tuple[float, Read]]) -> float:
    """The least score worth a place: a share of the best, named things aside (they order
    the sentences worth one, they do not push the others below the floor)."""
    if not ranked:
        return 0.0
    best = max(value - _named_credit(item) / _length_factor(item) for value, item in ranked)
    return min(best, _KEEP_RATIO * best)


def _named_credit(item: Read, held: Collection[str] = ()) -> float:
    """What the user's named things in the sentence add to its score, past those `held`.
    Nothing for a key fact of the previous summary that names no speaker: taken into the
    summary it would read as said by whoever spoke before it there (it counts as the user's
    for the key facts only)."""
    sentence = item.sentence
    if sentence.key_fact and not sentence.speaker:
        return 0.0
    return _NAMED * sum(thing not in held for thing in item.named)


def _named_loss(item: Read, held: Collection[str]) -> float:
    """How much of its score a sentence loses to named things already `held`."""
    if not item.named or not held:
        return 0.0
    return (_named_credit(item) - _named_credit(item, held)) / _length_factor(item)


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
