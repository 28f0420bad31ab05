"""The "[Known Facts]" message: the user's long-term memories found for this turn (and the
session data keys the agent asked for), as many as fit its allowance, best first. Pure.

Which memories (`selected`): those that match the turn, then the user's profile (`profile_fill`:
facts and preferences before events, newest first) for the slots the match left, without the
ones that say again what a fact before them says (`distinct`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from episodic.domain.context import RecalledMemory, RenderedMessage, Section
from episodic.domain.json_text import json_text
from episodic.domain.memory_merge import negated
from episodic.domain.model import JsonValue, Role
from episodic.domain.reducers import MESSAGE_OVERHEAD, CountTokens, fit_in_order, rendered
from episodic.domain.text_analysis import is_term, terms, words

FACTS_HEADER = "[Known Facts]\nWhat you know about this user (from earlier conversations and this one):\n"
SESSION_HEADER = "Session data:\n"
MAX_VALUE_CHARS = 500  # a session value is rendered cut to this


@dataclass(frozen=True, slots=True)
class KnownFact:
    memory_id: str
    text: str
    kind: str
    score: float
    pending: bool = False
    event_time: datetime | None = None
    client: bool = False  # written by the client (CreateMemories, a memory tool), not extracted


# Words that name the user in a memory about them: "I'm vegetarian" (extracted from the user's
# own words), "Alice is vegetarian", "The user is vegetarian" (written by a client) say one
# thing. The first-person pronouns are stop words already; the user's id words join these.
_SUBJECT_WORDS = frozenset({"user", "user's", "mine", "myself"})
_PROFILE_ORDER = {"preference": 0, "fact": 0}  # then events (and any other kind)


def subject_words(user_id: str) -> frozenset[str]:
    """The words that stand for the user: the id's words ("alice", "alice.smith" -> alice,
    smith; an opaque id like "u_81f3" names nobody) and "user"."""
    named = {w for w in words(user_id.replace("_", " ").replace(".", " ")) if w.isalpha() and len(w) > 1}
    return _SUBJECT_WORDS | named


def content_words(text: str, subject: frozenset[str]) -> frozenset[str]:
    """What a fact says, as a set: its words without stop words and the words naming the user,
    possessives and a plural or third-person "s" taken off ("Alice prefers aisle seats" and
    "I prefer aisle seats" -> {prefer, aisle, seat}); numbers stay, whatever their length."""
    found = set()
    for word in words(text):
        word = word.removesuffix("'s")
        if word in subject or not (is_term(word) or word.isdigit()):
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        found.add(word)
    return frozenset(found)


def pending_for_turn(held: Sequence[KnownFact], query: str, most: int) -> list[KnownFact]:
    """This episode's PENDING memories for the turn: every one the client wrote (it chose to
    remember it), then at most `most` of those extracted from its compacted turns, the ones
    sharing most of the query's words first, newest first among equals. A long conversation
    extracts many; shown all, they would fill the section with whatever was said last."""
    wanted = set(terms(query))
    extracted = [(i, f) for i, f in enumerate(held) if not f.client]
    ranked = sorted(extracted, key=lambda pair: (-len(wanted & set(terms(pair[1].text))), pair[0]))
    kept = {f.memory_id for _, f in ranked[:most]}
    return [f for f in held if f.client or f.memory_id in kept]


def profile_fill(matched: Sequence[KnownFact], newest: Sequence[KnownFact], top_k: int) -> list[KnownFact]:
    """The facts that matched the turn, then, for the slots of `top_k` they leave, the user's
    profile: `newest` (newest first) with facts and preferences before events, and among
    them what the client wrote (it chose to remember it) before what was extracted; none twice. A
    question that shares no word with the fact that answers it ("what should I cook tonight?"
    for "Alice is vegetarian") still sees the user's standing facts."""
    chosen = list(matched[:top_k])
    taken = {f.memory_id for f in chosen}
    rest = [f for f in newest if f.memory_id not in taken]
    ordered = sorted(
        enumerate(rest), key=lambda pair: (_PROFILE_ORDER.get(pair[1].kind, 1), not pair[1].client, pair[0])
    )
    return chosen + [f for _, f in ordered[: max(top_k - len(chosen), 0)]]


def selected(
    held: Sequence[KnownFact],
    matched: Sequence[KnownFact],
    newest: Sequence[KnownFact],
    top_k: int,
    subject: frozenset[str],
) -> list[KnownFact]:
    """What "[Known Facts]" shows, best first: the episode's PENDING memories (`held`, all of
    them), then at most `top_k` long-term ones: those that matched the turn, then the profile
    (`profile_fill`), none that repeats a fact before it (`distinct`): a repeat frees its slot
    for the next profile fact."""
    ordered = profile_fill(matched, newest, len(matched) + len(newest))
    chosen, room = [], top_k
    for fact in distinct([*held, *ordered], subject):
        if not fact.pending:
            if room <= 0:
                continue
            room -= 1
        chosen.append(fact)
    return chosen


def distinct(facts: Sequence[KnownFact], subject: frozenset[str]) -> list[KnownFact]:
    """The facts in order, without one whose content words a fact kept before it already
    holds (the same polarity: "I don't eat meat" never hides "I eat meat"; events of other
    days are other events). What the client wrote wins over an extracted fact that covers it:
    it takes that fact's place, and the extracted one stays after it only when it says more
    ("Alice is vegetarian" before "I'm vegetarian and I want to visit Lisbon in May"; "I'm
    vegetarian" goes). Each fact is compared only with the kept ones that hold its rarest word."""
    kept: list[_Said] = []
    holding: dict[str, list[_Said]] = {}  # word -> the kept facts that hold it
    for fact in facts:
        said = _Said.of(fact, subject)
        rarest = min(said.words, key=lambda w: len(holding.get(w, ())), default="")
        covering = [k for k in holding.get(rarest, ()) if said.within(k)]
        if not covering:
            kept.append(said)
            for word in said.words:
                holding.setdefault(word, []).append(said)
            continue
        at = min(kept.index(k) for k in covering)
        other = kept[at]
        if fact.client and not other.fact.client and not other.fact.pending:
            kept[at : at + 1] = [said] + ([] if other.within(said) else [other])
            for word in said.words:
                holding.setdefault(word, []).append(said)
            if other.within(said):
                for word in other.words:
                    holding[word].remove(other)
    return [k.fact for k in kept]


@dataclass(frozen=True, slots=True, eq=False)
class _Said:
    """A fact and what it says (`content_words`), its polarity and, for an event, its day."""

    fact: KnownFact
    words: frozenset[str]
    negative: bool
    day: str

    @classmethod
    def of(cls, fact: KnownFact, subject: frozenset[str]) -> _Said:
        day = fact.event_time.date().isoformat() if fact.event_time else ""
        return cls(fact, content_words(fact.text, subject), negated(fact.text), day)

    def within(self, other: _Said) -> bool:
        """True when `other` already says all this says (never for a fact without words)."""
        return (
            bool(self.words)
            and self.negative == other.negative
            and (not self.day or not other.day or self.day == other.day)
            and self.words <= other.words
        )


def facts_block(
    facts: Sequence[KnownFact], session: Sequence[tuple[str, JsonValue]], allowance: int, count: CountTokens
) -> tuple[RenderedMessage | None, tuple[RecalledMemory, ...], tuple[str, ...]]:
    """The message (None when nothing fits or nothing was found), what was found with its
    rendered flag, and the session keys rendered."""
    lines = [_line(f) for f in facts]
    values = [f"- {key}: {_value(value)}\n" for key, value in session]
    room = allowance - count(FACTS_HEADER + SESSION_HEADER) - MESSAGE_OVERHEAD
    chosen = fit_in_order(lines, room, count)
    room -= sum(count(lines[i]) for i in chosen)
    kept = fit_in_order(values, room, count)
    while chosen or kept:
        message = rendered(Role.CONTEXT, _text(lines, chosen, values, kept), Section.KNOWN_FACTS, count)
        if message.tokens <= allowance:
            return message, _found(facts, chosen), tuple(session[i][0] for i in kept)
        (kept if kept else chosen).pop()  # counts are not exactly additive
    return None, _found(facts, []), ()


def _text(lines: Sequence[str], chosen: Sequence[int], values: Sequence[str], kept: Sequence[int]) -> str:
    text = FACTS_HEADER + "".join(lines[i] for i in chosen)
    if kept:
        text += SESSION_HEADER + "".join(values[i] for i in kept)
    return text.rstrip("\n")


def _line(f: KnownFact) -> str:
    when = f", {f.event_time.date().isoformat()}" if f.event_time else ""
    return f"- ({f.kind}{when}) {' '.join(f.text.split())}\n"


def _value(value: JsonValue) -> str:
    text = value if isinstance(value, str) else json_text(value, sort_keys=True)
    return " ".join(text.split())[:MAX_VALUE_CHARS]


def _found(facts: Sequence[KnownFact], chosen: Sequence[int]) -> tuple[RecalledMemory, ...]:
    picked = set(chosen)
    return tuple(RecalledMemory(f.memory_id, f.score, i in picked, f.pending) for i, f in enumerate(facts))
