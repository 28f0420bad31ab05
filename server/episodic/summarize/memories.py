"""Memories by pattern: the user's first-person statements in a closed episode, each trimmed to
the clause that states it and classed as a preference, an event or a fact. Pure and
deterministic; no model, no network.

Only user messages speak for the user. Questions, hypotheticals and requests to the assistant
state nothing. Cues are looked for only at first-person words ("I", "my", "we"...), at most
`_MAX_ANCHORS` per sentence, with bounded patterns; besides them, each sentence gets one search
each for what matters to the speaker ("... is so special to me") and for what something does
for them ("Painting helps me unwind"). Every rule has a name (`RULES`); an extractor can be
built without some, which is how `episodic-lab eval-extraction --ablate` measures each (issue
46 kept only those that raise precision on both LoCoMo dev conversations without losing on the
chats set). Sentences and messages are bounded by `text.py`; so hostile text costs what prose
of the same size costs."""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from episodic.domain.memories import ExtractedMemory, MemoryKind, normalized
from episodic.domain.model import Message, Role
from episodic.domain.when import period_in
from episodic.summarize.facts import ClauseBreaks, Kind, fact_matches
from episodic.summarize.memory_patterns import (
    COUNTS,
    HYPOTHETICAL_START,
    MONTH_NAMES,
    NOT_NAMES,
    REQUEST_START,
    SEASONS,
    TOPICS,
    WEEKDAY_NAMES,
)
from episodic.summarize.text import (
    Sentence,
    content_words,
    fold,
    folded_words,
    sentences_of,
    shorten,
    tidy,
    tokens,
    utterances,
)

MAX_MEMORIES = 24
MAX_MEMORY_CHARS = 300
MAX_ENTITIES = 8
MAX_TOPICS = 4
_MAX_ANCHORS = 16
_MIN_CONTENT_WORDS = 2
_FRAGMENT_WORDS = 3
_SUBJECT_WORDS = 4
_MIN_ONGOING_WORDS = 3
# A plan, or what matters to one (no fact, no deed), must say this much to be worth keeping
# ("I'm going to start soon" is not).
_MIN_STATE_WORDS = 4
_BREAK_WORDS = re.compile(
    r"\W{0,8}(?:(?:and|but|so|because|although|though|whereas|while|which|who)\W{1,4})?"
)


class Cue(enum.Enum):
    """What a clause says about the speaker; a clause's kind follows from its cues."""

    PREFERENCE = "preference"
    FACT = "fact"
    PAST = "past"  # something done
    PLAN = "plan"  # something to be done
    MATTERS = "matters"  # what something does or means to one, said of the thing ("... is special to me")
    HAVE_DONE = (
        "have done"  # a perfect: something done that still holds ("I've known my neighbours for years")
    )
    ONGOING = "ongoing"  # something being done: a fact, or an event when it has a time
    TIME = "time"  # a time expression
    AFFECTS = "affects"  # what something does to one ("Painting helps me relax")


_ADVERB = r"(?:just|finally|also|actually|recently|already|once|even|then|first|still|really|all|both|always)"
# Past tenses that are states or wishes rather than things done.
_NOT_DONE = r"(?:wanted|needed|wondered|hoped|wished|guessed|supposed|used|meant|thought|liked|loved)\b"
_IRREGULAR_PAST = (
    r"(?:went|ran|took|made|got|lost|bought|saw|met|had|did|found|won|left|began|flew|drove|wrote"
    r"|became|came|gave|sold|built|broke|fell|caught|taught|quit|swam|sang|spent|threw|grew|rode|ate"
    r"|kept|held|sent|joined|started|chose|read)\b"
)
# Past participles that are not "-ed" ("I've known", "I've given"), after "have".
_PARTICIPLE = (
    r"(?:known|seen|done|given|taken|gone|written|grown|begun|been\s+[a-z]{2,20}ed|gotten|chosen|won)\b"
)
# Verbs of talk, thought and mood, modals and auxiliaries: "I think", "I can", "I hope" state no doing.
_NOT_PRESENT = (
    r"(?:think|know|guess|hope|mean|wish|bet|want|need|can|could|will|would|should|must|might|may|am|was"
    r"|were|have|had|has|do|did|does|feel|felt|believe|love|like|hate|see|saw|get|got|agree|understand"
    r"|appreciate|remember|forgot|suppose|wonder|miss|hear|heard|say|said|told|tell|thought|imagine|doubt"
    r"|try|tried|totally|really|definitely|bet|just|also|recently|finally|actually|always|usually|often"
    r"|sometimes|never|still|guess|find|found|hear|cannot|shall|wanna|gotta|gonna|kinda|too|to)\b"
)
_AM_DOING = (
    r"(?:i'm|i\s+am|we're|we\s+are)\s+(?:(?:also|just|now|currently|actually|still|really|always)\s+)?"
)
# Passing states and talk, not things the speaker is doing in their life.
_NOT_DOING = (
    r"(?:looking(?!\s+(?:into|for(?!ward)|forward\s+to\s+[a-z]{2,20}ing))|wondering|asking|trying|hoping"
    r"|getting(?!\s+ready)|feeling|doing|having(?!\s+(?:a|an|my|our)\s)|talking|saying|kidding|joking|guessing"
    r"|thinking(?!\s+(?:of|about)\s+[a-z]{2,20}ing)|staying|seeing|using|stepping|going\s+to\s+bed)\b"
)
_FIRST_PERSON = re.compile(r"(?<![\w'])(?:i'm|i've|i'd|i'll|i|my|we're|we've|we'll|we|our)(?![\w'])")
_CUES = (
    (
        "diet",
        Cue.PREFERENCE,
        r"(?:i'm|i\s+am)\s+(?:a\s+|also\s+|strictly\s+)?(?:vegetarian|vegan|pescatarian|lactose|gluten"
        r"|kosher|halal|allergic|intolerant|teetotal)\b|i\s+(?:try\s+to\s+)?avoid\b",
    ),
    (
        "loved",
        Cue.PREFERENCE,
        rf"i\s+(?:{_ADVERB}\s+)?(?:loved|enjoyed|adored|hated)\s+(?!it\b|that\b|this\b|them\b)",
    ),
    ("used-to", Cue.FACT, r"(?:i|we)\s+used\s+to\s+(?!be\b|think\b)[a-z]"),
    (
        "was-done",
        Cue.PAST,
        rf"(?:i|we)(?:\s+{_ADVERB})?\s+(?:was|were)\s+(?:[a-z]{{2,20}}(?<!e)ed|born|at|in|on)\b",
    ),
    ("have-done", Cue.HAVE_DONE, rf"(?:i|we)(?:'ve|\s+have)(?:\s+{_ADVERB})?\s+{_PARTICIPLE}"),
    (
        "past",
        Cue.PAST,
        rf"(?:i|we)(?:'ve|\s+have)?(?:\s+{_ADVERB})?\s+(?!{_NOT_DONE})(?:[a-z]{{2,20}}(?<!e)ed\b|{_IRREGULAR_PAST})",
    ),
    ("been-doing", Cue.FACT, rf"(?:i|we)(?:'ve|\s+have)\s+been\s+(?!{_NOT_DOING})[a-z]{{2,20}}ing\b"),
    # Tried before the plan below, which also takes "going": "I'm going to" alone is no fact.
    ("ongoing", Cue.ONGOING, rf"{_AM_DOING}(?!{_NOT_DOING}|going)[a-z]{{2,20}}ing\b"),
    ("plan", Cue.PLAN, rf"{_AM_DOING}(?!{_NOT_DOING})[a-z]{{2,20}}ing\b"),
    (
        "habit",
        Cue.FACT,
        r"(?:i|we)\s+(?:usually|always|often|normally|mostly|regularly|generally|typically|sometimes"
        r"|rarely|never)\b",
    ),
    (
        "have-a",
        Cue.FACT,
        rf"i\s+(?:{_ADVERB}\s+)?(?:don't\s+|do\s+not\s+)?have\s+(?:a|an|any|no|two|three|four|five|\d{{1,3}})\s",
    ),
    (
        "my-x-is",
        Cue.FACT,
        r"my\s+(?:[a-z'-]{1,20},?\s+(?:and\s+)?){1,4}?(?:still\s+)?(?:is|are|was|were|lives|works|has|have)\b",
    ),
    ("age", Cue.FACT, r"i'm\s+\d{1,3}\b(?!\s?%)"),
    # What one is: "I'm a student", "I'm the only admin" (not "I'm a bit tired").
    (
        "identity",
        Cue.FACT,
        r"(?:i'm|i\s+am)\s+(?:(?:also|still|now)\s+)?(?:a|an|the\s+only)\s+(?!(?:bit|little|lot|fan|big\s+fan)\b)[a-z]",
    ),
    # What one does, said in the present: "I work from home", "I don't use Face ID", "I mentor a teen".
    (
        "present",
        Cue.FACT,
        rf"i\s+(?:(?:only|mostly|still|also|just)\s+)?(?:(?:don't|dont|do\s+not|never)\s+)?"
        rf"(?!{_NOT_PRESENT})[a-z]{{2,20}}(?<!ed)(?<!n't)\s+(?!(?:it|that|this|so|you|too|to)\b)[a-z]",
    ),
)
# "I'll keep going", "I'm gonna stay positive": resolutions to carry on state nothing new.
_CARRY_ON = re.compile(
    r"\b(?:will|'ll|gonna|going\s+to|want\s+to|need\s+to|hope\s+to)\s+(?:just\s+)?(?:keep|stay|try|do\s+my\s+best)\b",
    re.IGNORECASE,
)
# What matters to the speaker, said of the thing: "The painting above the fireplace is so special to me".
_MATTERS_TO_ME = re.compile(
    r"\b(?:special|important|significant|precious|dear|meaningful|everything|a\s+lot)\s+(?:to|for)\s+me\b"
    r"|\bsignificance\s+for\s+me\b",
    re.IGNORECASE,
)
# What something does to the speaker, said of the thing: "Painting helps me express my feelings".
_AFFECTS_ME = re.compile(
    r"\b(?:helps|helped)\s+(?:to\s+)?(?:keep\s+|get\s+)?me\b",
    re.IGNORECASE,
)
# Cues that need not open their clause.
_ANYWHERE = frozenset({Cue.TIME, Cue.MATTERS, Cue.AFFECTS})
_DOINGS = frozenset({Cue.PAST, Cue.PLAN, Cue.ONGOING, Cue.HAVE_DONE})
_FACTS = frozenset({Cue.FACT, Cue.ONGOING})
# Facts only with enough words (`_thin`): what one means to do, has done, or what matters.
_STATES = frozenset({Cue.PLAN, Cue.HAVE_DONE, Cue.MATTERS, Cue.AFFECTS})
_FROM_FACT_KIND = {
    Kind.PREFERENCE: Cue.PREFERENCE,
    Kind.PERSONAL: Cue.FACT,
    Kind.DECISION: Cue.PLAN,
    Kind.DATE: Cue.TIME,
}
_FACT_RULES = {kind: f"facts-{kind.name.lower()}" for kind in _FROM_FACT_KIND}
# Every rule by name, for an extractor built without some (`episodic-lab eval-extraction
# --ablate` measures each). The cues above; the key-fact patterns of facts.py, by kind; the
# sentence-level cues; and the filters and joins.
RULES = (
    *(name for name, _, _ in _CUES),
    *_FACT_RULES.values(),
    "matters",
    "affects",
    "fragment",
    "asking-tail",
    "not-a-statement",
    "carry-on",
    "thin",
)

# A question, request or proposal to the listener after a statement: "I'm vegan, can you ...?",
# "I'm moving in May, so let's find a flat".
_ASKING_TAIL = re.compile(
    r"[,;]\s*(?:so\s+|and\s+|but\s+)?(?:please|can|could|would|will|do|does|did|what|how|where|when"
    r"|which|who|why|any|is|are|should|shall|let's)\b",
    re.IGNORECASE,
)
# Hypothetical, addressed to the assistant, or someone else's words: not the user's memory.
_NOT_A_STATEMENT = re.compile(
    r"\b(?:if|unless|whether|you|your|yourself|wish|congrats|congratulations)\b"
    r"|\b(?:i|we)\s+(?:would|could|might)\s+(?!rather|prefer|love|like)"
    r"|\bi'd\s+(?!rather|prefer|love|like)|\bmy\s+[a-z]{2,20}\s+(?:said|says|told|thinks|thought|asked|wants)\b"
    r"|\b(?:love|like|enjoy|hate|prefer)\s+(?:to\s+[a-z]{2,20}\s+)?(?:that|it|this|them|those|these|something)\b"
    r"|\bmy\s+(?:question|problem|issue|point|guess|bad|pleasure|turn|fault)\b"
    r"|\bi\s+(?:have|had|'ve\s+got)\s+(?:a|another|one)\s+(?:quick\s+)?(?:question|idea|problem)\b"
    # A hedged intention ("I think I'll just go to bed") is a mood, not a plan.
    r"|\bi\s+(?:think|guess|suppose|might)\s+(?:i'll|i\s+will|i\s+might|i\s+should|i'd)\b",
    re.IGNORECASE,
)
_GOES_ON = re.compile(r"(?:it|it's|it\s+was|they|they're|they've|she|he|she's|he's)\s", re.IGNORECASE)
_INTERJECTION_START = re.compile(r"(?:(?:yeah|yes|yep|well|so|oh|wow|hey|also|and|but|plus)\b[\s,!.]*){1,3}")
_NAME = re.compile(r"(?<![\w'])[A-Z][\w'-]{0,30}(?:\s(?:of\s|de\s|the\s)?[A-Z][\w'-]{0,30}){0,3}")


@dataclass(frozen=True, slots=True)
class _Rules:
    """The rules an extractor applies, and its cue patterns compiled as one regex."""

    on: frozenset[str]
    cues: tuple[Cue, ...]
    regex: re.Pattern[str]

    @classmethod
    def without(cls, off: frozenset[str]) -> _Rules:
        unknown = off.difference(RULES)
        if unknown:
            raise ValueError(f"unknown extraction rules: {', '.join(sorted(unknown))}")
        kept = [(cue, pattern) for name, cue, pattern in _CUES if name not in off]
        alternatives = "|".join(f"({pattern})" for _, pattern in kept) or r"(?!)"
        return cls(
            frozenset(RULES) - off, tuple(cue for cue, _ in kept), re.compile(alternatives, re.IGNORECASE)
        )


_ALL_RULES = _Rules.without(frozenset())


@dataclass(frozen=True, slots=True)
class _Clause:
    sentence: Sentence
    start: int
    end: int
    cues: frozenset[Cue]
    message: Message

    @property
    def text(self) -> str:
        return self.sentence.text[self.start : self.end]


class ExtractiveMemoryExtractor:
    """Up to `MAX_MEMORIES` memories, the ones with the most names and topics first, returned in
    the order they were stated. `instructions` are for model-backed extractors and ignored."""

    def __init__(self, without: Iterable[str] = ()) -> None:
        off = frozenset(without)
        self._rules = _Rules.without(off) if off else _ALL_RULES

    @property
    def name(self) -> str:
        return "extractive-v1"

    def extract(self, transcript: Sequence[Message], instructions: str = "") -> list[ExtractedMemory]:
        found: dict[str, tuple[int, int, ExtractedMemory]] = {}
        for order, clause in enumerate(_clauses(transcript, self._rules)):
            memory = _memory(clause, self._rules)
            if memory is not None and normalized(memory.text) not in found:
                found[normalized(memory.text)] = (_rank(memory), order, memory)
        best = sorted(found.values(), key=lambda item: (-item[0], item[1]))[:MAX_MEMORIES]
        return [memory for _, _, memory in sorted(best, key=lambda item: item[1])]


def _clauses(transcript: Sequence[Message], rules: _Rules) -> Iterator[_Clause]:
    """Clauses of the user's statements that carry at least one cue about the user."""
    for utterance in utterances(transcript):
        if utterance.role is Role.USER:
            message = transcript[utterance.position]
            for sentence in sentences_of(utterance):
                yield from _clauses_of(_statement(sentence, rules), message, rules)


def _statement(sentence: Sentence, rules: _Rules) -> Sentence | None:
    """The sentence, or its statement part before a question or request ("I'm vegan, can
    you...?"); None for questions, hypotheticals and requests."""
    tail = _ASKING_TAIL.search(sentence.text) if "asking-tail" in rules.on else None
    if tail is not None:
        sentence = Sentence(sentence.utterance, sentence.index, sentence.start, sentence.text[: tail.start()])
    elif sentence.is_question:
        return None
    opening = _INTERJECTION_START.match(fold(sentence.text[:40]))  # "And sure, check out..."
    start = opening.end() if opening else 0
    first = tokens(tidy(sentence.text[start : start + 40]))[:2]
    if not first or first[0] in HYPOTHETICAL_START or first[0] in REQUEST_START:
        return None
    return sentence


def _clauses_of(sentence: Sentence | None, message: Message, rules: _Rules) -> Iterator[_Clause]:
    """The sentence's clauses that carry a cue about the speaker."""
    if sentence is None:
        return
    for start, end, found in _cued_clauses(sentence.text, _cues(sentence, rules), rules):
        yield _Clause(sentence, start, end, frozenset(found), message)


def _cued_clauses(text: str, cues: list[tuple[int, Cue]], rules: _Rules) -> list[tuple[int, int, set[Cue]]]:
    """The clauses that the cues open (or, for `_ANYWHERE` cues, lie in), in order, with their
    cues. What "it" or "they" does for one ("It helps me relax") says nothing on its own."""
    breaks = ClauseBreaks(text)
    by_clause: dict[tuple[int, int], set[Cue]] = {}
    for at, cue in cues:
        start, end = span = _whole_clause(text, breaks, at, "fragment" in rules.on)
        if cue is Cue.AFFECTS and _GOES_ON.match(tidy(text[start:end])):
            continue
        if cue in _ANYWHERE or _opens(text, start, at):
            by_clause.setdefault(span, set()).add(cue)
    kept: list[tuple[int, int, set[Cue]]] = []
    for (start, end), found in sorted(by_clause.items()):
        if kept and end <= kept[-1][1]:  # within a fragment's run-on clause: one memory
            kept[-1][2].update(found)
        else:
            kept.append((start, end, found))
    return kept


def _whole_clause(text: str, breaks: ClauseBreaks, at: int, runs_on: bool = True) -> tuple[int, int]:
    """The clause around `at`; a fragment of a few words ("My husband Tom" and I ...) runs on
    into the next clause."""
    start, end = breaks.clause_span(at)
    if (
        runs_on
        and end < len(text)
        and len(text[start:end].split(maxsplit=_FRAGMENT_WORDS)) <= _FRAGMENT_WORDS
    ):
        after = _BREAK_WORDS.match(text, end)
        end = breaks.clause_span(after.end() if after else end)[1]
    return start, end


def _opens(text: str, start: int, at: int) -> bool:
    """Whether the speaker's word at `at` is the clause's subject: within its first few words
    ("Last week I went...", "My husband Tom and I..."), not deep inside ("It gave me the push I
    needed to do what I love")."""
    return len(text[start:at].split(maxsplit=_SUBJECT_WORDS)) <= _SUBJECT_WORDS


def _cues(sentence: Sentence, rules: _Rules) -> list[tuple[int, Cue]]:
    """Cues by offset: the key-fact patterns of facts.py, and this module's own at each
    first-person word."""
    folded = fold(sentence.text)
    found = [
        (at, _FROM_FACT_KIND[kind])
        for at, kind in fact_matches(sentence, folded, folded_words(folded))
        if kind in _FROM_FACT_KIND and _FACT_RULES[kind] in rules.on
    ]
    if "matters" in rules.on and (matters := _MATTERS_TO_ME.search(folded)) is not None:
        found.append((matters.start(), Cue.MATTERS))
    if "affects" in rules.on and (affects := _AFFECTS_ME.search(folded)) is not None:
        found.append((affects.start(), Cue.AFFECTS))
    for count, anchor in enumerate(_FIRST_PERSON.finditer(folded)):
        if count == _MAX_ANCHORS:
            break
        match = rules.regex.match(sentence.text, anchor.start())
        if match is not None:
            found.append((anchor.start(), rules.cues[(match.lastindex or 1) - 1]))
    return found


def _memory(clause: _Clause, rules: _Rules) -> ExtractedMemory | None:
    kind = _kind(clause)
    text = tidy(clause.text)
    if kind is None:
        return None
    if "not-a-statement" in rules.on and _NOT_A_STATEMENT.search(text):
        return None
    if "thin" in rules.on and _thin(text, clause.cues):
        return None
    if "carry-on" in rules.on and clause.cues <= {Cue.PLAN, Cue.TIME} and _CARRY_ON.search(text):
        return None
    labelled = shorten(clause.sentence.labelled(text), MAX_MEMORY_CHARS)
    seq = clause.message.seq
    when = _event_time(clause, text) if kind is MemoryKind.EVENT else None
    return ExtractedMemory(labelled, kind, seq, seq, topics(text), entities(labelled), when)


def _thin(text: str, cues: frozenset[Cue]) -> bool:
    """Too little to remember: one content word is enough only when the clause ends on it ("I'm
    vegan", "I don't have any kids"), not on a pronoun ("I love it"); what one is doing takes
    more ("I'm learning a ton" is not worth keeping), and a feeling, a plan or what matters
    to one, with no fact or deed, more still ("I'm so excited to start")."""
    words = tokens(text)
    meaning = content_words(text)
    if cues.isdisjoint({Cue.FACT, Cue.PREFERENCE, Cue.TIME}) and len(meaning) < _MIN_ONGOING_WORDS:
        return True
    if cues <= _STATES and len(meaning) < _MIN_STATE_WORDS:
        return True
    return len(meaning) < _MIN_CONTENT_WORDS and not (meaning and words[-1] == meaning[-1])


def _kind(clause: _Clause) -> MemoryKind | None:
    """A preference wins; a thing done or planned at a stated time is an event, and so is a
    thing done without one (it happened by the time it was said) and an answer with a time ("Our
    town held a fair last weekend"); a plan without a time, or something done that still holds
    ("I've known my neighbours for years"), is a fact, and so is an answer without a time. A time
    alone states nothing. (`_thin` asks more words of the clauses without a fact cue.)"""
    cues = clause.cues
    if Cue.PREFERENCE in cues:
        return MemoryKind.PREFERENCE
    if Cue.TIME in cues and not cues.isdisjoint(_DOINGS):
        return MemoryKind.EVENT
    if not cues.isdisjoint(_FACTS | _STATES):
        return MemoryKind.FACT
    return MemoryKind.EVENT if Cue.PAST in cues else None


def _event_time(clause: _Clause, text: str) -> datetime:
    """When it happened: a past time resolved as recall resolves one, a planned one forward;
    the message's own time when neither resolves."""
    said = clause.message.created_at
    if Cue.PAST not in clause.cues and (ahead := future_time(text, said)) is not None:
        return ahead
    period = period_in(text, said)
    return period.start if period is not None else said


def _rank(memory: ExtractedMemory) -> int:
    return min(len(memory.entities), 3) + len(memory.topics) + (memory.event_time is not None)


_AHEAD = re.compile(
    r"\b(?:(?P<day>tomorrow|tonight)|next (?P<next>week|weekend|month|year|"
    + "|".join([*WEEKDAY_NAMES, *SEASONS])
    + r")|in (?P<count>\d{1,2}|a|an|one|two|three|four|five|six) (?P<unit>day|week|month)s?"
    + r"|(?:in|this|next) (?P<month>"
    + "|".join(MONTH_NAMES)
    + r"))\b",
    re.IGNORECASE,
)


def future_time(text: str, now: datetime) -> datetime | None:
    """The start of the day or period a plan points at ("tomorrow", "next week", "in August",
    "in 3 days"), or None. One regex search: linear in the text."""
    found = _AHEAD.search(text)
    if found is None:
        return None
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    g = {key: value.lower() for key, value in found.groupdict().items() if value}
    if "day" in g:
        return today + timedelta(days=1 if g["day"] == "tomorrow" else 0)
    if "next" in g:
        return _next(today, g["next"])
    if "unit" in g:
        count = int(g["count"]) if g["count"].isdigit() else COUNTS[g["count"]]
        return today + timedelta(days=count * {"day": 1, "week": 7, "month": 30}[g["unit"]])
    return _month_ahead(today, MONTH_NAMES.index(g["month"]) + 1)


def _next(today: datetime, what: str) -> datetime:
    if what in ("week", "weekend"):
        monday = today + timedelta(days=7 - today.weekday())
        return monday + timedelta(days=5 if what == "weekend" else 0)
    if what == "month":
        return _month_ahead(today, today.month % 12 + 1)
    if what == "year":
        return today.replace(year=today.year + 1, month=1, day=1)
    if what in SEASONS:
        return _month_ahead(today, SEASONS[what], strictly=True)
    return today + timedelta(days=(WEEKDAY_NAMES.index(what) - today.weekday() - 1) % 7 + 1)


def _month_ahead(today: datetime, month: int, strictly: bool = False) -> datetime:
    """The first day of the next `month` from today (this month's, unless `strictly`)."""
    later = month > today.month or (month == today.month and not strictly)
    return today.replace(year=today.year + (0 if later else 1), month=month, day=1)


def entities(text: str) -> tuple[str, ...]:
    """Capitalised names ("St Mary's Hospital", "University of Oslo"), the speaker's label
    included; a capitalised word that only opens the sentence is not a name."""
    label, _, rest = text.partition(": ") if _is_labelled(text) else ("", "", text)
    found = [label] if label else []
    for match in _NAME.finditer(rest):
        name = match.group()
        if (match.start() == 0 and " " not in name) or name in NOT_NAMES or name.startswith("I'"):
            continue
        found.append(name)
        if len(found) == MAX_ENTITIES:
            break
    return tuple(dict.fromkeys(found))


def _is_labelled(text: str) -> bool:
    head = text[:64].split(": ", 1)[0]
    return head != text[:64] and bool(_NAME.fullmatch(head))


def topics(text: str) -> tuple[str, ...]:
    """Up to `MAX_TOPICS` topics of the fixed lexicon, in order of their first word."""
    words = tokens(text)
    found: dict[str, None] = {}
    for word in words:
        for topic, lexicon in TOPICS.items():
            if word in lexicon:
                found.setdefault(topic)
        if len(found) >= MAX_TOPICS:
            break
    return tuple(found)[:MAX_TOPICS]
