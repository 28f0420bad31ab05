"""The "[Earlier in this conversation]" section: passages of this episode that the history
tail no longer holds, recalled for the turn (see `domain/earlier.py`), fitted into the
section's share of the budget best first and rendered in time order, each headed by its
time. A passage is a matching message with the one before and the one after; passages that
meet are rendered as one. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

from episodic.domain.context import PassageFate, RecalledPassage, RenderedMessage, Section
from episodic.domain.earlier import Candidate, CompactedLog
from episodic.domain.excerpts import spoken_line
from episodic.domain.model import Message, Role
from episodic.domain.recall import Signal
from episodic.domain.reducers import CountTokens, rendered

EARLIER_HEADER = (
    "[Earlier in this conversation]\n"
    "Passages of this conversation from before the summary, matching the current message:\n"
)
MESSAGE_CHARS = 600  # a longer message is clipped (its passage is then "cut")
NEIGHBOURS = 1  # messages on each side of a match: a question's answer is often the next one
MOST_REPORTED_DROPPED = 5  # passages that did not fit, listed in the report


@dataclass(frozen=True, slots=True)
class EarlierFound:
    """What the turn's search found: the log and the matches among its messages.
    `count_once` counts the texts that do not recur turn after turn: the lines, whose counts
    the log keeps (CompactedLog.cost), and the section's text, this turn's. The server passes
    its uncached counter: held in the cache of recurring texts, with their UTF-8 copies, they
    took ~2 KB a line and ~12 KB a section at the seed's sizing, and evicted what recurs."""

    log: CompactedLog
    candidates: Sequence[Candidate]
    count_once: CountTokens | None = None


@dataclass(slots=True)
class _Passage:
    first: int
    last: int
    score: float
    signals: tuple[Signal, ...]
    cost: int = 0
    cut: bool = False

    def holds(self, position: int) -> bool:
        return self.first <= position <= self.last

    def meets(self, first: int, last: int) -> bool:
        return first <= self.last + 1 and self.first <= last + 1


def earlier_block(
    found: EarlierFound | None, allowance: int, count: CountTokens
) -> tuple[RenderedMessage | None, tuple[RecalledPassage, ...]]:
    """The section's message (None when nothing fits or nothing matched) and the report's
    passages, best first: every rendered one, then the best few that did not fit."""
    if found is None or not found.candidates or allowance <= 0:
        return None, ()
    room = allowance - count(EARLIER_HEADER) - 4  # MESSAGE_OVERHEAD, and a margin for the joins
    once = found.count_once or count  # for the lines and the section: they do not recur
    chosen, dropped = _fit(found, room, once)
    while chosen:  # counts are not exactly additive: drop the worst until the whole fits
        message = rendered(Role.CONTEXT, _text(found, chosen), Section.EARLIER, once)
        if message.tokens <= allowance:
            return message, _report(found.log.seqs, chosen, dropped)
        dropped.insert(0, chosen.pop())
    return None, _report(found.log.seqs, [], dropped)


def _fit(found: EarlierFound, room: int, count: CountTokens) -> tuple[list[_Passage], list[_Passage]]:
    """Best match first: a match inside a chosen passage adds nothing; one beside or over it
    widens it; else it starts a passage, if its cost still fits. Stops at the
    MOST_REPORTED_DROPPED-th that does not fit: the room is as good as full."""
    n, used = len(found.log), 0
    chosen: list[_Passage] = []
    dropped: list[_Passage] = []  # each as the match would have added it: its own window
    covered: set[int] = set()  # the positions the chosen passages hold
    for c in found.candidates:
        if len(dropped) >= MOST_REPORTED_DROPPED:
            break
        if c.position in covered:
            continue
        first, last = max(c.position - NEIGHBOURS, 0), min(c.position + NEIGHBOURS, n - 1)
        meeting = [p for p in chosen if p.meets(first, last)]
        wide_first, wide_last = (
            min([first, *(p.first for p in meeting)]),
            max([last, *(p.last for p in meeting)]),
        )
        cost, cut = _cost(found, wide_first, wide_last, count)
        extra = cost - sum(p.cost for p in meeting)
        if used + extra > room:
            dropped.append(_Passage(first, last, c.score, _signals([c.signals])))
            continue
        used += extra
        merged = _Passage(
            wide_first, wide_last, max([c.score, *(p.score for p in meeting)]),
            _signals([c.signals, *(p.signals for p in meeting)]), cost, cut,
        )  # fmt: skip
        at = min((chosen.index(p) for p in meeting), default=len(chosen))
        for p in meeting:
            chosen.remove(p)
        chosen.insert(min(at, len(chosen)), merged)
        covered.update(range(wide_first, wide_last + 1))
    return chosen, dropped


def _cost(found: EarlierFound, first: int, last: int, count: CountTokens) -> tuple[int, bool]:
    """Tokens of a passage from its lines' (each counted once in the log's life), and
    whether a line of it was clipped."""
    lines = [found.log.cost(i, _line, count) for i in range(first, last + 1)]
    head, _ = found.log.cost(-1 - first, _header, count)
    return head + sum(t for t, _ in lines) + len(lines), any(cut for _, cut in lines)


def _line(m: Message) -> str:
    return spoken_line(m.role, m.content, MESSAGE_CHARS)


def _header(m: Message) -> str:
    return _heading(m.created_at)


def _heading(at: datetime) -> str:
    return f"[{_when(at)}]"


def _text(found: EarlierFound, chosen: Sequence[_Passage]) -> str:
    """In time order: the model reads a conversation forwards. Its lines are counted by
    `_cost` (as `_line` and `_header` render them); here they are made from the log's
    columns, with no message rebuilt: this runs every turn."""
    log = found.log
    parts = [
        "\n".join(
            [_heading(log.created_at(p.first))]
            + [spoken_line(log.role(i), log.text(i), MESSAGE_CHARS) for i in range(p.first, p.last + 1)]
        )
        for p in sorted(chosen, key=lambda p: p.first)
    ]
    return EARLIER_HEADER + "\n".join(parts)


def _report(
    seqs: Sequence[int], chosen: Sequence[_Passage], dropped: Sequence[_Passage]
) -> tuple[RecalledPassage, ...]:
    """The rendered passages, then the dropped ones with only the messages no rendered
    passage holds (what they would have added)."""
    shown = [_recalled(seqs, p, PassageFate.CUT if p.cut else PassageFate.WHOLE) for p in chosen]
    left = [_recalled(seqs, p, PassageFate.DROPPED, without=chosen) for p in dropped]
    return (*shown, *[p for p in left if p.seqs])


def _recalled(
    seqs: Sequence[int], p: _Passage, fate: PassageFate, without: Sequence[_Passage] = ()
) -> RecalledPassage:
    """`without`: passages rendered, whose messages a dropped one does not list again."""
    shown = [i for i in range(p.first, p.last + 1) if not any(q.holds(i) for q in without)]
    return RecalledPassage(tuple(seqs[i] for i in shown), p.score, fate, p.signals)


def _signals(groups: Sequence[tuple[Signal, ...]]) -> tuple[Signal, ...]:
    held = {s for group in groups for s in group}
    return tuple(s for s in Signal if s in held)


def _when(at: datetime) -> str:
    """Short (it heads every passage), with the weekday and month spelled: "last Friday" and
    "in May" are asked about."""
    return f"{_WEEKDAYS[at.weekday()]} {at.day} {_MONTHS[at.month - 1]} {at.year}, {at:%H:%M}"


def spelled_day(day: date) -> str:
    """ISO as in the seeds, then spelled out: "last Friday" and "in May" are asked about."""
    return f"{day.isoformat()} ({_WEEKDAYS[day.weekday()]}, {day.day} {_MONTHS[day.month - 1]} {day.year})"


_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip
