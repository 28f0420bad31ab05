"""`episodic-lab eval-names`: how many of the named things the user states survive rolling
compaction, on the LoCoMo dev conversations, in-process (no server, a few seconds).

Each conversation (all its sessions, in order) is replayed as one live episode: the first
speaker's turns are user messages, the other's assistant messages, each "Name: text" as the
eval-recall import writes them, counted with the server's tokenizer. After each message, when
the tail passes `--allowance` tokens, the oldest messages are compacted as BuildContext does
(`domain/assembly.py`: the newest that fit in KEEP_AFTER_COMPACTION of the allowance stay),
through the server's own `SummaryMaker` (`covered_transcript` rolls the previous summary in)
and the extractive summarizer, once with `keep_named` off (before) and once on (after).

The named things the user stated are read from the first speaker's turns, by a rule of this
script's own (not the summarizer's `named.py`): capitalised words that do not start a sentence
(not "I", not a stop word in capitals, not a speaker's name or the start of one: "Mel"),
numbers, and month and weekday names. Printed per conversation and overall:

- stated, kept, share: of the distinct named things first said in what the final summary
  covers, those found (case-sensitive, as whole words) in its content, summary and key facts;
- tokens: the final summary's size; compactions: how many summaries were made;
- mean share: the same share after each compaction, averaged (steadier than the final one on
  conversations this short of names);
- mean intake: of the named things each compaction newly covers, the share its summary holds,
  averaged (a summary that only keeps the old would score low here);
- fresh: of each summary's sentences and facts, the share the one before did not hold,
  averaged (how much the summary still changes as the conversation goes on).

No dataset text is printed or written."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from episodic.domain.assembly import KEEP_AFTER_COMPACTION
from episodic.domain.context import Summary
from episodic.domain.model import Agent, Episode, EpisodeState, MemoryConfig, Message, Role
from episodic.domain.reducers import MESSAGE_OVERHEAD
from episodic.domain.tail import Tail
from episodic.domain.text_analysis import SUMMARY_STOPWORDS
from episodic.domain.working_set import WorkingSet
from episodic.service.compaction import SummaryMaker
from episodic.summarize.extractive import ExtractiveSummarizer
from episodic.tokens import TiktokenCounter
from episodic_lab.evals.locomo_data import Session, load

ENCODING = "cl100k_base"
NOW = datetime(2025, 1, 1, tzinfo=UTC)
_SENTENCE = re.compile(r"[^.!?]+[.!?]*")
_WORD = re.compile(r"[\w'’-]+")
_LABEL = re.compile(r"^[A-Z][\w'.-]*: ")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September")
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_CALENDAR = frozenset((*_MONTHS, "October", "November", "December", *_DAYS))


@dataclass(frozen=True, slots=True)
class Retention:
    stated: int  # named things the user stated in what the final summary covers
    kept: int  # of them, in the final summary
    tokens: int  # the final summary's
    compactions: int
    mean_share: float  # the share kept, after each compaction, of what it covers, averaged
    mean_intake: float  # the share kept, after each compaction, of what it newly covers, averaged
    fresh: float  # the share of each summary's sentences the one before did not hold, averaged

    @property
    def share(self) -> float:
        return self.kept / self.stated if self.stated else 1.0


def run_eval_names(args: argparse.Namespace) -> int:
    sessions, _ = load(args.data)
    conversations = by_conversation(sessions)
    print(
        f"eval-names: {len(conversations)} conversations replayed as live episodes, compacted past "
        f"{args.allowance} tokens (tail kept at {KEEP_AFTER_COMPACTION:.0%}); named things of the first "
        "speaker kept in the final summary"
    )
    print(
        f"{'conversation':14} {'':6} {'stated':>6} {'kept':>5} {'share':>6} {'tokens':>6} "
        f"{'compactions':>11} {'mean share':>10} {'mean intake':>11} {'fresh':>6}"
    )
    totals: dict[str, list[Retention]] = {}
    for sample_id, parts in conversations.items():
        for label, keep_named in (("before", False), ("after", True)):
            figures = measure(parts, ExtractiveSummarizer(keep_named=keep_named), args.allowance)
            totals.setdefault(label, []).append(figures)
            print(_row(sample_id, label, figures))
    for label, rows in totals.items():
        print(_row("overall", label, _overall(rows)))
    return 0


def _row(name: str, label: str, figures: Retention) -> str:
    return (
        f"{name:14} {label:6} {figures.stated:6} {figures.kept:5} {figures.share:6.1%} "
        f"{figures.tokens:6} {figures.compactions:11} {figures.mean_share:10.1%} "
        f"{figures.mean_intake:11.1%} {figures.fresh:6.1%}"
    )


def _overall(rows: Sequence[Retention]) -> Retention:
    """Summed counts; tokens and the mean share averaged over conversations."""
    count = max(len(rows), 1)
    return Retention(
        sum(r.stated for r in rows),
        sum(r.kept for r in rows),
        round(sum(r.tokens for r in rows) / count),
        sum(r.compactions for r in rows),
        sum(r.mean_share for r in rows) / count,
        sum(r.mean_intake for r in rows) / count,
        sum(r.fresh for r in rows) / count,
    )


def by_conversation(sessions: Iterable[Session]) -> dict[str, list[Session]]:
    grouped: dict[str, list[Session]] = {}
    for session in sessions:
        grouped.setdefault(session.sample_id, []).append(session)
    return {key: sorted(parts, key=lambda s: s.started) for key, parts in grouped.items()}


def measure(parts: Sequence[Session], summarizer: ExtractiveSummarizer, allowance: int) -> Retention:
    messages = conversation_messages(parts)
    summaries = replay(messages, summarizer, allowance)
    if not summaries:
        return Retention(0, 0, 0, 0, 1.0, 1.0, 0.0)
    first_said: dict[str, int] = {}  # each named thing of the user's, and where first said
    for message in messages:
        if message.role is Role.USER:
            for thing in named_things(message.content.split(": ", 1)[-1], parts[0].speakers):
                first_said.setdefault(thing, message.seq)
    shares, intakes, fresh = [], [], []
    covered, before = 0, set[str]()
    for summary in summaries:
        shares.append(_share(first_said, 0, summary))
        intakes.append(_share(first_said, covered, summary))
        sentences = _sentences(summary.content)
        if covered:
            fresh.append(len(sentences - before) / len(sentences) if sentences else 0.0)
        covered, before = summary.to_seq, sentences
    final = summaries[-1]
    stated = [thing for thing, seq in first_said.items() if seq <= final.to_seq]
    kept = [thing for thing in stated if _present(thing, final.content)]
    return Retention(
        len(stated),
        len(kept),
        final.token_count,
        len(summaries),
        _mean(shares),
        _mean(intakes),
        _mean(fresh),
    )


def _sentences(content: str) -> set[str]:
    """A summary's sentences and facts, without the speakers' labels."""
    body = content.split("\n", 1)[-1].replace("\nKey facts: ", " ")
    pieces = (piece.strip() for piece in _SENTENCE.findall(body))
    return {_LABEL.sub("", piece) for piece in pieces if piece}


def _share(first_said: dict[str, int], after: int, summary: Summary) -> float | None:
    """Of the named things first said after seq `after` that `summary` covers, the share it holds."""
    stated = [thing for thing, seq in first_said.items() if after < seq <= summary.to_seq]
    if not stated:
        return None
    return sum(_present(thing, summary.content) for thing in stated) / len(stated)


def _mean(values: Sequence[float | None]) -> float:
    known = [value for value in values if value is not None]
    return sum(known) / len(known) if known else 1.0


def conversation_messages(parts: Sequence[Session]) -> list[Message]:
    counter = TiktokenCounter()
    first = parts[0].speakers[0]
    messages: list[Message] = []
    for session in parts:
        for turn in session.turns:
            role = Role.USER if turn.speaker == first else Role.ASSISTANT
            content = f"{turn.speaker}: {turn.text}"
            seq = len(messages) + 1
            messages.append(
                Message("ep", seq, role, content, counter.count(content, ENCODING), ENCODING, NOW)
            )
    return messages


def replay(messages: Sequence[Message], summarizer: ExtractiveSummarizer, allowance: int) -> list[Summary]:
    """The messages appended one by one; each time the tail passes `allowance` tokens, its
    oldest messages are compacted into the rolling summary, as the server does. Every
    summary made, in order (each rolls in the one before)."""
    episode = Episode("t", "ep", "agent", "user", EpisodeState.OPEN, ENCODING, NOW, NOW)
    agent = Agent("t", "agent", "", "", "gpt-4o", ENCODING, False, MemoryConfig(), NOW, NOW)
    maker = SummaryMaker(tokens=TiktokenCounter(), clock=lambda: NOW)
    summaries: list[Summary] = []
    tail: list[Message] = []
    for message in messages:
        tail.append(message)
        through = compact_through(tail, allowance)
        if through:
            previous = summaries[-1] if summaries else None
            summaries.append(
                maker.make(summarizer, WorkingSet(episode, agent, previous, Tail.of(tail)), through)
            )
            tail = [m for m in tail if m.seq > through]
    return summaries


def compact_through(tail: Sequence[Message], allowance: int) -> int:
    """`domain/assembly.py`'s rule on plain messages (no tool calls: each is a turn)."""
    costs = [m.token_count + MESSAGE_OVERHEAD for m in tail]
    if sum(costs) <= allowance:
        return 0
    room, kept = int(allowance * KEEP_AFTER_COMPACTION), 0
    for cost in reversed(costs):
        if room < cost:
            break
        room -= cost
        kept += 1
    kept = max(kept, 1)
    return tail[len(tail) - kept - 1].seq if len(tail) > kept else 0


def named_things(text: str, speakers: Sequence[str] = ()) -> set[str]:
    """Capitalised words past a sentence's first word (not "I", a stop word in capitals or a
    speaker's name or the start of one: "Mel"), numbers, month and weekday names."""
    found = set(_NUMBER.findall(text))
    for sentence in _SENTENCE.findall(text):
        for position, match in enumerate(_WORD.finditer(sentence)):
            word = re.sub(r"['’]s$", "", match.group()).strip("'’-")
            if word in _CALENDAR or (position > 0 and _is_name(word) and not _speaker(word, speakers)):
                found.add(word)
    return found


def _is_name(word: str) -> bool:
    return (
        len(word) > 1
        and word[0].isupper()
        and not word.startswith(("I'", "I’"))
        and word.lower() not in SUMMARY_STOPWORDS
    )


def _speaker(word: str, speakers: Sequence[str]) -> bool:
    return any(name == word or (len(word) > 2 and name.startswith(word)) for name in speakers)


def _present(thing: str, text: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(thing)}(?![\w])", text) is not None
