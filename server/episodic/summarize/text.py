"""Reading a transcript for summarizing: which messages count, speaker labels, sentences,
clauses and content words (folding, words and stop words are `domain/text_analysis.py`'s).
Pure and deterministic.

Every step is linear in the text read, and the text read is bounded: a message is read up
to `MAX_MESSAGE_CHARS` and a sentence is at most `MAX_SENTENCE_CHARS` (a longer one is cut
at a word boundary), so hostile text (one giant unpunctuated "sentence" that repeats
itself) costs what prose of the same size costs."""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from episodic.domain.assembly import KEY_FACTS_LABEL, SUMMARY_HEADER
from episodic.domain.model import Message, Role
from episodic.domain.text_analysis import SUMMARY_STOPWORDS, split_words, words
from episodic.domain.text_analysis import fold as fold  # the same folding for every reader

folded_words = split_words  # the words of already folded text

SPOKEN_ROLES = frozenset({Role.USER, Role.ASSISTANT})
_ROLE_LABELS = frozenset(role.value.capitalize() for role in SPOKEN_ROLES)

# "Maya: I went to ..." - a speaker name prefixed to the content.
_LABEL = re.compile(r"^([A-Z][\w'.-]{0,30}(?: [A-Z][\w'.-]{0,30})?):\s+(?=\S)")
_NOT_SPEAKERS = frozenset(
    {"note", "summary", "answer", "update", "error", "warning", "tip", "example", "step", "q", "a", "re"}
)
_CODE_FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_LINE = re.compile(r"[^\n]+")
_BULLET = re.compile(r"\s*(?:[-*•]+|\d{1,2}[.)])\s+")
_MARKUP = re.compile(r'[{}<>|]|":|\\[nt]')
# Starts only at the first mark of a run, and never gives marks back: a long run of marks
# followed by a letter is one failed attempt, not one per mark.
_SENTENCE_END = re.compile(r"(?<![.!?…])[.!?…]++[\"'”’)\]]*+(?=\s|$)")
_LETTER = re.compile(r"[^\W\d_]")
_DROP_ASCII_LETTERS = str.maketrans("", "", string.ascii_letters + " ")
_ABBREVIATION_TEXT = "mr mrs ms dr prof st jr sr vs etc approx no inc ltd dept e.g i.e"
_ABBREVIATIONS = frozenset(_ABBREVIATION_TEXT.split())
_INTERJECTION = re.compile(
    r"^(?:(?:oh|ah|wow|well|yeah|yep|yes|no|nope|ok|okay|so|hey|hi|hello|sure|great|cool|haha|lol|hmm|um|"
    r"actually|honestly|anyway|also|btw|by the way|thanks|thank you)\b[\s,!.]*)+",
    re.IGNORECASE,
)
_TRAILING_FILLERS = ("by the way", "btw", "lol", "haha", "though", "anyway", "honestly")
_LONGEST_FILLER = max(map(len, _TRAILING_FILLERS))
_APOSTROPHES = str.maketrans({"’": "'", "‘": "'"})

# A summary is a few hundred characters: what lies past these bounds would not change it.
MAX_MESSAGE_CHARS = 16 * 1024
MAX_SENTENCE_CHARS = 1000

# The words a sentence's score does not count: the one stop-word list and the summarizer's
# own extension of it (chat fillers, vague words, single letters; text_analysis says why).
STOPWORDS = SUMMARY_STOPWORDS


@dataclass(frozen=True, slots=True)
class Utterance:
    """The readable part of one user or assistant message."""

    position: int
    role: Role
    speaker: str
    text: str
    # The previous summary, rolled into the next one: its sentences carry their speakers'
    # labels inline ("User: ... Assistant: ..."), so it has no speaker of its own.
    rolled: bool = False

    @property
    def label(self) -> str:
        """Who said it: the speaker's name, else the role."""
        return self.speaker or self.role.value.capitalize()

    @property
    def speaks_for_a_person(self) -> bool:
        """First-person statements describe a person: the user, or any labelled speaker."""
        return self.role is Role.USER or bool(self.speaker)


@dataclass(slots=True)
class Sentence:
    """One sentence of an utterance; `start` is its offset in the utterance's text."""

    utterance: Utterance
    index: int
    start: int
    text: str
    speaker: str = ""  # in a rolled summary: the label its speaker's run started with
    key_fact: bool = False  # in a rolled summary: on its key facts line

    @property
    def label(self) -> str:
        """Who said it, as a summary labels it ("" when a rolled summary does not say)."""
        if self.utterance.rolled:
            return self.speaker
        return self.utterance.label

    @property
    def order(self) -> tuple[int, int]:
        return (self.utterance.position, self.index)

    @property
    def is_question(self) -> bool:
        return self.text.rstrip("\"')]”’").endswith("?")

    def labelled(self, text: str) -> str:
        """`text` said by this sentence's speaker, labelled with their name (a role is no name:
        a fact of the user or the assistant is not labelled)."""
        speaker = self.speaker if self.utterance.rolled and self.speaker not in _ROLE_LABELS else ""
        speaker = speaker or self.utterance.speaker
        return f"{speaker}: {text}" if speaker else text


def utterances(transcript: Sequence[Message], max_chars: int = MAX_MESSAGE_CHARS) -> list[Utterance]:
    """User and assistant messages with visible text, each read up to `max_chars`; system,
    context and tool messages are not conversation."""
    spoken: list[Utterance] = []
    for position, message in enumerate(transcript):
        if message.role not in SPOKEN_ROLES:
            continue
        text = clean(prefix(message.content, max_chars))
        if message.content.startswith(SUMMARY_HEADER):
            spoken.append(Utterance(position, message.role, "", text, rolled=True))
            continue
        speaker, text = split_label(text)
        if text:
            spoken.append(Utterance(position, message.role, speaker, text))
    return spoken


def prefix(text: str, max_chars: int) -> str:
    """At most `max_chars` of the start of `text`, cut after a whole word when there is one."""
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    space = max(cut.rfind(" "), cut.rfind("\n"))
    return cut[:space] if space > max_chars // 2 else cut


def clean(content: str) -> str:
    """Drops code blocks, unifies apostrophes and trims every line."""
    text = _CODE_FENCE.sub(" ", content.translate(_APOSTROPHES))
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def split_label(text: str) -> tuple[str, str]:
    match = _LABEL.match(text)
    if match is None or match.group(1).lower() in _NOT_SPEAKERS:
        return "", text
    return match.group(1), text[match.end() :]


def sentences_of(utterance: Utterance) -> list[Sentence]:
    text = utterance.text
    spans = sentence_spans(text)
    if utterance.rolled:
        return list(_rolled_sentences(utterance, spans))
    return [Sentence(utterance, index, start, text[start:end]) for index, (start, end) in enumerate(spans)]


def _rolled_sentences(utterance: Utterance, spans: Sequence[tuple[int, int]]) -> Iterator[Sentence]:
    """A previous summary's sentences without their inline labels, each with the speaker
    whose run it is in: a label starts a run, which lasts to the next label or the end of
    its line. On the key facts line each fact is labelled on its own (or not at all: the
    user's and the assistant's facts carry no label), so there a sentence's speaker is its
    own label only. Labelled again when they are composed into the next summary, never
    labelled twice ("Assistant: User: ...")."""
    text, speaker, line, facts = utterance.text, "", -1, False
    for index, (start, end) in enumerate(spans):
        line_start = text.rfind("\n", 0, start)
        piece = text[start:end]
        if line_start != line:
            speaker, line, facts = "", line_start, piece.startswith(KEY_FACTS_LABEL)
        if facts:
            speaker = ""
        label, rest = split_label(piece.removeprefix(KEY_FACTS_LABEL))
        if label:
            speaker = label
        yield Sentence(utterance, index, start + len(piece) - len(rest), rest, speaker, facts)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Where the sentences of a cleaned text are: prose lines only, bullets left out."""
    spans: list[tuple[int, int]] = []
    for line in _LINE.finditer(text):
        if _is_prose(line.group()):
            bullet = _BULLET.match(line.group())
            spans.extend(_pieces(text, line.start() + (bullet.end() if bullet else 0), line.end()))
    return spans


def _pieces(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Sentences of one line; clean() left exactly one space between them."""
    for stop in _SENTENCE_END.finditer(text, start, end):
        if not _after_abbreviation(text, stop):
            yield from _capped(text, start, stop.end())
            start = stop.end() + 1
    if start < end:
        yield from _capped(text, start, end)


def _capped(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """The sentence from `start` to `end` if it has a letter, in pieces of at most
    MAX_SENTENCE_CHARS, of even length (so none is short enough to pass for a sentence of
    a summary) and cut after a word where there is one."""
    while end - start > MAX_SENTENCE_CHARS:
        pieces = -(-(end - start) // MAX_SENTENCE_CHARS)
        limit = start + -(-(end - start) // pieces)
        space = text.rfind(" ", (start + limit) // 2, limit)
        cut = space if space != -1 else limit
        if _LETTER.search(text, start, cut):
            yield start, cut
        start = cut + 1 if space != -1 else cut
    if _LETTER.search(text, start, end):
        yield start, end


def _after_abbreviation(text: str, stop: re.Match[str]) -> bool:
    if stop.group() != ".":
        return False
    before = text[max(stop.start() - 6, 0) : stop.start()].replace("\n", " ")
    word = before.rsplit(" ", 1)[-1].lstrip("(\"'")
    return (len(word) == 1 and word.isalpha()) or word.lower() in _ABBREVIATIONS


def _is_prose(text: str) -> bool:
    """Lines that are mostly letters; JSON, markup, ids and tables are not prose."""
    if _MARKUP.search(text) or not _LETTER.search(text):
        return False
    visible = len(text) - text.count(" ")
    if 2 * len(text.translate(_DROP_ASCII_LETTERS)) <= visible:
        return True  # the quick answer, counting only ASCII letters
    return 2 * sum(map(str.isalpha, text)) >= visible


def tokens(text: str) -> list[str]:
    """Folded words (with their apostrophes: "i'm") and numbers."""
    return words(text)


def content_words(text: str) -> list[str]:
    return meaningful(tokens(text))


def meaningful(words: Iterable[str]) -> list[str]:
    """The words that carry meaning, in order: no stop words, no single letters."""
    return [word for word in words if word not in STOPWORDS]


def tidy(text: str) -> str:
    """Trims a clause to its words: no leading filler, no edge punctuation, a capital first letter."""
    text = _INTERJECTION.sub("", text.strip(" ,;:-–—\"'")).rstrip(" ,;:-–—.!?\"'")
    text = _without_trailing_fillers(text)
    return text[:1].upper() + text[1:]


def _without_trailing_fillers(text: str) -> str:
    """Drops ", lol", " though" and the like from the end, one at a time: a regex anchored at
    the end would be tried from every space of a long run of them."""
    while (shorter := _without_last_filler(text)) is not None:
        text = shorter
    return text


def _without_last_filler(text: str) -> str | None:
    """The text without its last filler word (and the spaces and comma before it), if it
    ends with one that stands as a word of its own."""
    tail = text[-_LONGEST_FILLER:].lower()
    for filler in _TRAILING_FILLERS:
        if tail.endswith(filler):
            before = text[: len(text) - len(filler)]
            spaced = before.rstrip()
            if len(spaced) < len(before):
                return spaced[:-1] if spaced.endswith(",") else spaced
    return None


def shorten(text: str, limit: int) -> str:
    """Cuts at a word boundary to at most `limit` characters, marking the cut with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 1, 0)]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:-–—") + "…"
