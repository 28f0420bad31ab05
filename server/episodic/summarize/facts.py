"""Key facts by pattern: preferences, personal facts, decisions and plans, quantities, dates
and tool outcomes, each trimmed to the clause that states it. Pure and deterministic.

Every pattern is tried only where one of its anchor words occurs, so a sentence costs a word
lookup or two rather than a scan with every pattern. Each try reads a bounded stretch of text
(no pattern has an unbounded run), and a fact's clause is found by bisection among breaks
found once per sentence, so hostile text full of anchors stays linear."""

from __future__ import annotations

import bisect
import enum
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from episodic.domain.model import Message, Role, ToolResult
from episodic.summarize.text import Sentence, content_words, shorten, tidy


class Kind(enum.IntEnum):
    """What a fact is about; a lower value is kept first when there are too many facts."""

    TOOL_FAILURE = 0
    PREFERENCE = 1
    PERSONAL = 2
    DECISION = 3
    QUANTITY = 4
    DATE = 5
    NAMED = 6  # a statement of the user's that names a thing and matches no pattern (`named.py`)
    TOOL_SUCCESS = 7


@dataclass(frozen=True, slots=True)
class _Rule:
    kind: Kind
    anchors: tuple[str, ...]
    pattern: str
    first_person: bool


def _rule(kind: Kind, anchors: str, pattern: str, first_person: bool = False) -> _Rule:
    """`anchors` are the folded words the pattern starts at ("#": any number)."""
    return _Rule(kind, tuple(anchors.split()), pattern, first_person)


def _me(kind: Kind, anchors: str, pattern: str) -> _Rule:
    """A first-person pattern: it says something about whoever speaks, so it only counts for a
    person (the user, or a named speaker), never for the assistant talking about itself."""
    return _rule(kind, anchors, pattern, first_person=True)


_FULL_MONTHS: tuple[str, ...] = ("January", "February", "March", "April", "May", "June", "July")
_FULL_MONTHS += ("August", "September", "October", "November", "December")
_MONTHS = (*_FULL_MONTHS, "Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sept", "Sep", "Oct", "Nov", "Dec")
_MONTH = rf"(?-i:{'|'.join(_MONTHS)})\b"
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_DAY_ABBREVIATIONS = ("Mon", "Tue", "Tues", "Wed", "Thu", "Thur", "Thurs", "Fri", "Sat", "Sun")
_COUNTS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "twelve", "twenty")
# Bounded: it is tried at every run of digits, so "1,1,1,…" must not read to the end each time.
_NUMBER = r"\d[\d,]{0,39}(?:\.\d{1,20})?"
_ORDINAL = r"\d{1,2}(?:st|nd|rd|th)?"
_UNIT = (
    r"(?:days?|weeks?|months?|years?|hours?|hrs?|minutes?|mins?|seconds?|secs?|km|kms|kilomet(?:er|re)s?"
    r"|miles?|mi|meters?|metres?|m|cm|mm|ft|feet|foot|inch(?:es)?|kg|kgs|g|grams?|lbs?|oz|ml|l|liters?"
    r"|litres?|gb|mb|tb|kb|people|persons?|guests?|nights?|times|kids|children|items|pages|steps|rooms?"
    r"|tickets?|seats?|calories|kcal|mph|kph|km/h|°\s?[cf]|degrees?|usd|eur|gbp|dollars?|euros?|pounds?"
    r"|bucks|cents?|percent|per cent|%)(?!\w)"
)
_CLOSE_ONES = (
    r"(?:wife|husband|partner|boyfriend|girlfriend|son|daughter|kids?|children|mom|mum|mother|dad|father"
    r"|parents|sister|brother|family|dog|cat|pet|job|boss|team|company|birthday|address|email|phone|home"
    r"|house|car)\b"
)
_AM = r"I(?:'m| am)\s+"

# Most important kinds first: where several patterns match at one word, the first one wins.
_RULES = (
    _me(
        Kind.PREFERENCE,
        "i",
        r"I\s+(?:(?:really|also|still|absolutely|just|do|totally|much)\s+)?"
        r"(?:prefer|like|love|enjoy|hate|dislike|adore|detest|can't stand|cannot stand)\b",
    ),
    _me(
        Kind.PREFERENCE,
        "i'm i",
        _AM + r"(?:(?:really|very|not|so)\s+)?(?:keen on|into|a fan of|fond of|allergic to|afraid of"
        r"|passionate about|interested in)\b",
    ),
    _me(
        Kind.PREFERENCE,
        "i",
        r"I\s+(?:don't|do not|didn't|never|can't|cannot|won't)\s+(?:really\s+)?"
        r"(?:like|love|want|eat|drink|enjoy|use|care for)\b",
    ),
    _me(Kind.PREFERENCE, "i'd i", r"I(?:'d| would)\s+(?:rather|prefer|love|like)\b"),
    _me(Kind.PREFERENCE, "my", r"my\s+(?:all-time\s+)?(?:favou?rites?|preferred|go-to)\b"),
    _me(Kind.PREFERENCE, "please", r"please\s+(?:always|never|don't|do not)\b"),
    _me(Kind.PERSONAL, "my", r"my name(?:'s| is)\b"),
    _me(
        Kind.PERSONAL,
        "i'm i",
        _AM + r"(?:a|an|from|based in|originally from|married|single|divorced|engaged|pregnant|retired"
        r"|vegetarian|vegan|\d+\s+years?\s+old)\b",
    ),
    _me(
        Kind.PERSONAL, "i", r"I\s+(?:live|work|study|grew up|moved|was born)\s+(?:in|at|for|to|on|as|with)\b"
    ),
    _me(Kind.PERSONAL, "i've i", r"I(?:'ve| have)\s+(?:got\s+)?(?:a|an|two|three|four|five|\d+|no)\s"),
    _me(Kind.PERSONAL, "i'm i", _AM + r"(?:working|studying|training|learning|volunteering)\b"),
    _me(Kind.PERSONAL, "my", r"my\s+" + _CLOSE_ONES),
    _me(
        Kind.DECISION,
        "i've i",
        r"I(?:'ve| have)?\s+(?:just\s+|finally\s+)?"
        r"(?:decided|agreed|chose|booked|signed up|registered|scheduled|enrolled)\b",
    ),
    _me(
        Kind.DECISION,
        "i'll i'm i",
        r"I(?:'ll| will| shall|'m going to| am going to|'m gonna| am gonna| plan to| intend to| want to"
        r"| need to|'m planning to| am planning to| hope to)\b",
    ),
    _me(Kind.DECISION, "gonna", r"gonna\b"),
    _rule(
        Kind.DECISION,
        "we've we",
        r"we(?:'ve| have)?\s+(?:decided|agreed|chose|booked|scheduled|settled on)\b",
    ),
    _rule(Kind.DECISION, "we'll we're we", r"we(?:'ll| will|'re going to| are going to| plan to| should)\b"),
    _rule(Kind.DECISION, "let's let", r"let(?:'s| us)\b"),
    _rule(Kind.DECISION, "decided agreed settled", r"(?:decided|agreed|settled)\s+(?:to|on|that)\b"),
    _rule(
        Kind.DECISION,
        "confirmed booked scheduled cancelled canceled approved rescheduled",
        r"(?:confirmed|booked|scheduled|cancell?ed|approved|rescheduled)\b",
    ),
    _rule(Kind.QUANTITY, "#", rf"(?<=[$€£¥]){_NUMBER}|(?<=[$€£¥]\s){_NUMBER}"),
    _rule(Kind.QUANTITY, "#", rf"{_NUMBER}\s?(?:-\s?)?{_UNIT}"),
    _rule(
        Kind.QUANTITY,
        " ".join(_COUNTS),
        rf"(?:{'|'.join(_COUNTS)})\s+(?:days|weeks|months|years|hours|kids|children|people|nights|times)\b",
    ),
    _rule(Kind.DATE, "#", rf"{_ORDINAL}\s+(?:of\s+)?{_MONTH}"),
    _rule(Kind.DATE, " ".join(_MONTHS).lower(), rf"{_MONTH}\s+{_ORDINAL}\b"),
    _rule(
        Kind.DATE,
        " ".join(month for month in _FULL_MONTHS if month != "May").lower(),
        rf"(?-i:{'|'.join(_FULL_MONTHS)})\b",
    ),
    _rule(Kind.DATE, " ".join(f"{day} {day}s" for day in _DAYS).lower(), rf"(?-i:(?:{'|'.join(_DAYS)})s?)\b"),
    _rule(Kind.DATE, " ".join(_DAY_ABBREVIATIONS).lower(), rf"(?-i:{'|'.join(_DAY_ABBREVIATIONS)})\b(?!')"),
    _rule(
        Kind.DATE,
        "next last this coming past",
        r"(?:next|last|this|coming|past)\s+(?:week|weekend|month|year|summer|winter|spring|autumn|fall"
        r"|semester|quarter|morning|afternoon|evening|night)\b",
    ),
    _rule(
        Kind.DATE,
        "yesterday today tonight tomorrow noon midnight",
        r"(?:yesterday|today|tonight|tomorrow|noon|midnight)\b",
    ),
    _rule(
        Kind.DATE,
        "day days week weeks month months year years",
        r"(?:days?|weeks?|months?|years?)\s+(?:ago|from now|later|earlier)\b",
    ),
    _rule(Kind.DATE, "#", r"\d{4}-\d{2}-\d{2}\b|\d{1,2}/\d{1,2}(?:/\d{2,4})?\b|(?:19|20)\d{2}\b"),
    _rule(
        Kind.DATE, "#", r"\d{1,2}(?::[0-5]\d)?\s?(?:am|pm|a\.m\.|p\.m\.)(?!\w)|(?:[01]?\d|2[0-3]):[0-5]\d\b"
    ),
)


@dataclass(frozen=True, slots=True)
class _Matcher:
    """All patterns of one anchor word in one regex, most important kind first."""

    regex: re.Pattern[str]
    kinds: tuple[Kind, ...]

    def kind_at(self, text: str, position: int) -> Kind | None:
        match = self.regex.match(text, position)
        return None if match is None else self.kinds[(match.lastindex or 1) - 1]


def _matchers(person: bool) -> dict[str, _Matcher]:
    grouped: dict[str, list[_Rule]] = {}
    for rule in _RULES:
        for anchor in rule.anchors if person or not rule.first_person else ():
            grouped.setdefault(anchor, []).append(rule)
    return {anchor: _matcher(rules) for anchor, rules in grouped.items()}


def _matcher(rules: list[_Rule]) -> _Matcher:
    ordered = sorted(rules, key=lambda rule: rule.kind)
    alternatives = "|".join(f"({rule.pattern})" for rule in ordered)
    return _Matcher(re.compile(rf"\b(?:{alternatives})", re.IGNORECASE), tuple(rule.kind for rule in ordered))


def _finder(anchor: str) -> re.Pattern[str]:
    """Where an anchor occurs as a whole word of folded text. The literal comes first so that the
    regex engine scans for it quickly; apostrophes belong to words ("i" is not in "i'm")."""
    if anchor == "#":
        return re.compile(r"\d+")
    word = re.escape(anchor)
    return re.compile(rf"{word}(?<![\w']{word})(?![\w'])")


# Keyed by whether first-person patterns apply.
_MATCHERS = {person: _matchers(person) for person in (True, False)}
_ANCHORS = {person: frozenset(table) - {"#"} for person, table in _MATCHERS.items()}
_FINDERS = {anchor: _finder(anchor) for anchor in _MATCHERS[True]}
_CLAUSE_BREAK = re.compile(
    r"[;–—]\s*|\s-\s+"
    # A colon that only names what went before ("my dream job: a dance teacher") breaks nothing.
    r"|:\s+(?!(?:\S+\s){0,4}\S+$)"
    r"|(?:,\s*|\s+)(?:and|but|so|because|although|though|whereas|while)\s+"
    r"(?=(?:I|it|we|he|she|they|you|that|this|there|my|our)\b)"
    # A time clause of its own: "I moved here after I graduated" (not "a room for when I have kids").
    r"|(?<!\sfor)(?:,\s*|\s+)(?:since|when|after|before|until|once)\s+"
    r"(?=(?:I|it|we|he|she|they|you|that|this|there|my|our)\b)|,\s*(?:which|who)\b"
    # A comma splice before a new first-person subject: "We met at work, I've known her since 2015".
    r"|,\s+(?=(?:I|I'm|I've|I'd|I'll|we're|we've)\s)"
)
_DIGIT = re.compile(r"\d")
_NUMBERS = frozenset({"#"})
_MIN_CONTENT_WORDS = 2
# A sentence of prose states a few facts; past this many hits it is a list or hostile text,
# and rendering each hit (a clause, tidied and split into words) would cost per hit.
_MAX_HITS_PER_SENTENCE = 16

FactMatch = tuple[int, Kind]
"""Where in a sentence a fact pattern matched, and the kind of fact."""

Order = tuple[int, int, int]
"""Message position, sentence index, offset in the sentence."""

Candidate = tuple[Kind, Order, "Sentence | str"]
"""A possible fact: its kind, where it was said, and its sentence (or its final text)."""


def fact_matches(
    sentence: Sentence, folded: str, words: Iterable[str], person: bool | None = None
) -> list[FactMatch]:
    """Pattern hits in a sentence, in order. `folded` is the sentence lower-cased with the same
    offsets and `words` its folded tokens: only anchors among them are looked for. `person`:
    whether first-person patterns apply (by default, whether its utterance speaks for one)."""
    person = sentence.utterance.speaks_for_a_person if person is None else person
    present = _ANCHORS[person].intersection(words)
    if _DIGIT.search(folded):
        present |= _NUMBERS
    found: list[FactMatch] = []
    for anchor in present:
        matcher = _MATCHERS[person][anchor]
        for at in _FINDERS[anchor].finditer(folded):
            kind = matcher.kind_at(sentence.text, at.start())
            if kind is not None:
                found.append((at.start(), kind))
    found.sort()
    return found[:_MAX_HITS_PER_SENTENCE]


def sentence_candidates(sentence: Sentence, hits: Iterable[FactMatch]) -> Iterator[Candidate]:
    """Every hit of a statement; questions state nothing."""
    if not sentence.is_question:
        for start, kind in hits:
            yield kind, (*sentence.order, start), sentence


def tool_candidates(transcript: Sequence[Message]) -> Iterator[Candidate]:
    """What each tool call came to: "weather tool failed: timeout" or "weather tool succeeded"."""
    names = tool_names_by_call(transcript)
    for position, message in enumerate(transcript):
        result = message.tool_result
        if message.role is Role.TOOL and result is not None:
            kind = Kind.TOOL_SUCCESS if result.succeeded else Kind.TOOL_FAILURE
            yield kind, (position, 0, 0), f"{names.get(result.tool_call_id, 'unknown')} tool {_verb(result)}"


def _verb(result: ToolResult) -> str:
    if result.succeeded:
        return "succeeded"
    reason = " ".join(result.error.split())
    return f"failed: {reason}" if reason else "failed"


def tool_names_by_call(transcript: Sequence[Message]) -> dict[str, str]:
    return {call.tool_call_id: call.tool_name for message in transcript for call in message.tool_calls}


def tool_names(transcript: Sequence[Message]) -> list[str]:
    """Distinct tool names in order of first use."""
    return list(dict.fromkeys(tool_names_by_call(transcript).values()))


def by_kind(candidate: Candidate) -> tuple[Kind, Order]:
    """Most important kind first, then the earliest said."""
    return candidate[0], candidate[1]


def select_facts(
    candidates: Iterable[Candidate],
    most: int,
    limit: int,
    importance: Callable[[Candidate], tuple[object, ...]] = by_kind,
    pinned: Sequence[Candidate] = (),
    most_pinned: int = 0,
) -> list[str]:
    """The `most` most important distinct facts (`importance`: least first), in the order they
    were stated. A fact whose words are within an already chosen one (or the other way round)
    adds nothing. The `pinned` candidates (some of `candidates`) are tried first, in their
    order, until `most_pinned` facts are chosen; those left are ranked with the others."""
    chosen: list[tuple[Order, str, str]] = []
    breaks = _BreaksBySentence()
    tried: set[int] = set()
    for candidate in pinned:
        if len(chosen) >= min(most, most_pinned):
            break
        tried.add(id(candidate))
        _choose(candidate, chosen, limit, breaks)
    for candidate in sorted(candidates, key=importance):
        if len(chosen) >= most:
            break
        if id(candidate) not in tried:
            _choose(candidate, chosen, limit, breaks)
    return [text for _, text, _ in sorted(chosen)]


def _choose(
    candidate: Candidate, chosen: list[tuple[Order, str, str]], limit: int, breaks: _BreaksBySentence
) -> None:
    """Adds the candidate's fact to `chosen` unless it is too thin or adds nothing."""
    _, order, source = candidate
    rendered = _render(source, order, limit, breaks)
    if rendered is not None:
        where, text = rendered
        key = f" {' '.join(content_words(text))} "
        if not any(key in other or other in key for _, _, other in chosen):
            chosen.append((where, text, key))


def _render(
    source: Sentence | str, order: Order, limit: int, breaks: _BreaksBySentence
) -> tuple[Order, str] | None:
    """The clause around a hit, tidied and labelled with its speaker, and where it starts; None
    if it is too thin to keep. Tool outcomes are already text. Only the start of a long clause
    is read: the fact is cut to `limit` characters anyway."""
    if isinstance(source, str):
        return order, shorten(source, limit)
    start, end = breaks.of(source).clause_span(order[2])
    start = _near(source.text, start, order[2], limit)
    text = tidy(source.text[start : min(end, start + _CLAUSE_READ * limit)])
    if len(content_words(text)) < _MIN_CONTENT_WORDS:
        return None
    return (order[0], order[1], start), shorten(source.labelled(text), limit)


def _near(text: str, start: int, hit: int, limit: int) -> int:
    """A clause start close enough to the hit that a clause cut to `limit` still holds it."""
    if hit - start <= limit * 2 // 3:
        return start
    space = text.rfind(" ", start, hit - limit // 2)
    return space + 1 if space > start else start


def clause_span(text: str, index: int) -> tuple[int, int]:
    """The clause around `index`: between the nearest clause breaks on either side."""
    return ClauseBreaks(text).clause_span(index)


# How much of a clause a fact reads, in multiples of the fact's length limit.
_CLAUSE_READ = 2


class ClauseBreaks:
    """The clause breaks of one sentence, found once; each clause is then two bisections."""

    def __init__(self, text: str) -> None:
        found = [(brk.start(), brk.end()) for brk in _CLAUSE_BREAK.finditer(text)]
        self._starts = [start for start, _ in found]
        self._ends = [end for _, end in found]
        self._length = len(text)

    def clause_span(self, index: int) -> tuple[int, int]:
        """From the end of the last break before `index` to the start of the first one after
        it (a break around `index` bounds neither side)."""
        before = bisect.bisect_right(self._ends, index)
        after = bisect.bisect_left(self._starts, index)
        start = self._ends[before - 1] if before else 0
        return start, self._starts[after] if after < len(self._starts) else self._length


class _BreaksBySentence:
    """Clause breaks of the sentences that facts were rendered from, each found once."""

    def __init__(self) -> None:
        self._found: dict[int, ClauseBreaks] = {}

    def of(self, sentence: Sentence) -> ClauseBreaks:
        key = id(sentence)
        if key not in self._found:
            self._found[key] = ClauseBreaks(sentence.text)
        return self._found[key]
