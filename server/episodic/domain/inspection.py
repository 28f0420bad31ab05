"""What the inspector shows about stored model calls: the fate of every log message in a
call (rendered verbatim, stubbed, present only through the summary, or pruned), where a
phrase went turn by turn, and what changed between two consecutive calls. Computed from
the stored calls alone, never guessed. Pure; every function is linear in its input.

A phrase is followed into what was rendered, not only into which log messages were: a
message inside the summary's span is present only if the rendered summary still says the
phrase (a re-compaction may drop it), and a phrase may also reach the model through
[Knowledge], [Known Facts] or [Past Conversations]. Each traced call lists the sections
whose rendered text holds the phrase, and the trace names the first call where it was
nowhere after having been somewhere, and why."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from episodic.domain.context import ModelCall, RenderedMessage, Section
from episodic.domain.log import countable_text
from episodic.domain.model import Message

PREVIEW_CHARS = 160
PREVIEW_READS = PREVIEW_CHARS * 4  # a preview looks no further into a text than this
MAX_PHRASE_CHARS = 1000


class Fate(enum.StrEnum):
    """What became of one log message in one model call."""

    VERBATIM = "verbatim"
    STUBBED = "stubbed"  # a tool result rendered as a stub
    SUMMARIZED = "summarized"  # not rendered itself, inside the span of the rendered summary
    LOST = "lost"  # inside the summary's span, but the rendered summary does not say the phrase
    PRUNED = "pruned"  # not rendered at all: it left the window
    NOT_YET = "not_yet"  # written after the call


class DropReason(enum.StrEnum):
    WINDOW = "window"  # left the history window (the budget no longer held it)
    COMPACTION = "compaction"  # summarized from verbatim, and the summary left the phrase out
    RECOMPACTION = "recompaction"  # in the summary, until a new summary left the phrase out
    STUB = "stub"  # a tool result rendered as a stub
    KNOWLEDGE = "knowledge"  # no longer among the rendered [Knowledge] items
    KNOWN_FACTS = "known_facts"  # no longer among the rendered [Known Facts]
    RECALL = "recall"  # no longer among the rendered [Past Conversations]
    CONTEXT = "context"  # no longer in the system prompt or the user message


# What a phrase last present only in one section went with, when no message of the log explains it.
_SECTION_REASONS = {
    Section.KNOWLEDGE: DropReason.KNOWLEDGE,
    Section.KNOWN_FACTS: DropReason.KNOWN_FACTS,
    Section.PAST_CONVERSATIONS: DropReason.RECALL,
}
_PRESENT = (Fate.VERBATIM, Fate.SUMMARIZED)  # a message whose phrase the model saw


@dataclass(frozen=True, slots=True)
class FateRun:
    from_seq: int
    to_seq: int
    fate: Fate


@dataclass(frozen=True, slots=True)
class UserSummary:
    """A user of an agent, as the inspector lists them."""

    user_id: str
    episodes: int
    last_activity_at: datetime


def last_seq(call: ModelCall) -> int:
    """The newest log message the call could have seen."""
    r = call.report
    return max(r.user_message_seq, r.history_span.to_seq, r.summary_span.to_seq)


def log_seq(call: ModelCall, message: RenderedMessage) -> int:
    """The log seq a rendered message shows (0: none): a history message's own, or the
    turn's user message once it was appended to the log."""
    if message.section is Section.HISTORY:
        return message.seq
    if message.section is Section.USER_MESSAGE:
        return call.report.user_message_seq
    return 0


def _rendered_fates(call: ModelCall) -> dict[int, Fate]:
    found = {}
    for m in call.messages:
        seq = log_seq(call, m)
        if seq > 0:
            found[seq] = Fate.STUBBED if m.stubbed else Fate.VERBATIM
    return found


def _summarized(call: ModelCall, seq: int) -> bool:
    span = call.report.summary_span
    return span.to_seq > 0 and span.from_seq <= seq <= span.to_seq


def fate_at(call: ModelCall, seq: int, rendered: dict[int, Fate] | None = None) -> Fate:
    """What became of log message `seq` in `call`."""
    if seq > last_seq(call):
        return Fate.NOT_YET
    found = (rendered if rendered is not None else _rendered_fates(call)).get(seq)
    if found is not None:
        return found
    return Fate.SUMMARIZED if _summarized(call, seq) else Fate.PRUNED


def fates(call: ModelCall) -> list[FateRun]:
    """Every log seq from 1 to the call's last as runs of one fate: linear in the rendered
    messages, not in the length of the log."""
    rendered = _rendered_fates(call)
    end = last_seq(call)
    runs: list[FateRun] = []
    cursor = 1
    for seq in [*sorted(s for s in rendered if s <= end), end + 1]:
        if seq > cursor:
            _extend(runs, _gap(call, cursor, seq - 1))
        if seq <= end:
            _extend(runs, [FateRun(seq, seq, rendered[seq])])
        cursor = seq + 1
    return runs


def _gap(call: ModelCall, first: int, last: int) -> list[FateRun]:
    """Seqs first..last, none rendered: summarized inside the summary's span, else pruned."""
    span = call.report.summary_span
    if span.to_seq <= 0:
        return [FateRun(first, last, Fate.PRUNED)]
    runs = []
    inside_from, inside_to = max(first, span.from_seq), min(last, span.to_seq)
    if inside_from > inside_to:
        return [FateRun(first, last, Fate.PRUNED)]
    if first < inside_from:
        runs.append(FateRun(first, inside_from - 1, Fate.PRUNED))
    runs.append(FateRun(inside_from, inside_to, Fate.SUMMARIZED))
    if inside_to < last:
        runs.append(FateRun(inside_to + 1, last, Fate.PRUNED))
    return runs


def _extend(runs: list[FateRun], more: Iterable[FateRun]) -> None:
    for run in more:
        if runs and runs[-1].fate is run.fate and runs[-1].to_seq + 1 == run.from_seq:
            runs[-1] = FateRun(runs[-1].from_seq, run.to_seq, run.fate)
        else:
            runs.append(run)


# --- where did it go? -------------------------------------------------------------------


def searchable(message: Message) -> str:
    """The casefolded text a phrase is looked for in: content and tool payloads."""
    return countable_text(message).casefold()


def contains(message: Message, folded_phrase: str) -> bool:
    """Case-insensitive; `folded_phrase` is already casefolded. str.__contains__ is linear
    for long needles (two-way search), and the phrase is bounded anyway."""
    return folded_phrase in searchable(message)


def utf8_size(text: str) -> int:
    """Bytes of `text` as UTF-8, without encoding it when it is ASCII (the usual case)."""
    return len(text) if text.isascii() else len(text.encode())


def call_size(call: ModelCall) -> int:
    """Bytes of what the call rendered: what reading it costs, beyond a small report."""
    return sum(utf8_size(m.content) for m in call.messages)


def as_match(message: Message) -> Message:
    """What a trace keeps of a matching message: what its row shows (seq, role and the
    start of its content that a preview reads), not a payload of up to hundreds of KiB."""
    return dataclasses.replace(
        message, content=message.content[:PREVIEW_READS], metadata={}, tool_calls=(), tool_result=None
    )


@dataclass(frozen=True, slots=True)
class Drop:
    """The first call after one where the model saw the message's phrase (verbatim, or
    through a summary that said it) where it no longer did."""

    seq: int
    model_call_id: str
    created_at: datetime
    reason: DropReason


@dataclass(frozen=True, slots=True)
class Gone:
    """The first call after one that rendered the phrase anywhere where it was nowhere."""

    model_call_id: str
    created_at: datetime
    reason: DropReason
    last_seen_in: tuple[Section, ...]  # where the call before rendered it


@dataclass(frozen=True, slots=True)
class CallFates:
    call: ModelCall  # without its rendered messages (the fates say what became of the matches)
    fates: tuple[tuple[int, Fate], ...]  # (seq, fate) for each matching message
    present: tuple[Section, ...] = ()  # the sections whose rendered text holds the phrase


@dataclass(frozen=True, slots=True)
class PhraseTrace:
    messages: tuple[Message, ...]  # the log messages that contain the phrase, by seq, as_match
    calls: tuple[CallFates, ...]  # oldest call first
    dropped: tuple[Drop, ...]
    gone: Gone | None = None  # None: never rendered, or never missing after it was


def rendered_in(call: ModelCall, folded_phrase: str) -> tuple[Section, ...]:
    """The sections of `call` whose rendered text holds the phrase, in rendering order."""
    found = {m.section for m in call.messages if folded_phrase in m.content.casefold()}
    return tuple(section for section in Section if section in found)


def call_fates(call: ModelCall, seqs: Sequence[int], folded_phrase: str) -> CallFates:
    """The fate of each of `seqs` in `call` (LOST where the summary's span holds it but the
    rendered summary does not say the phrase), keeping of the call only what a trace shows,
    so that a long run of calls can be traced one page at a time."""
    rendered = _rendered_fates(call)
    present = rendered_in(call, folded_phrase)
    found = []
    for seq in seqs:
        fate = fate_at(call, seq, rendered)
        if fate is Fate.SUMMARIZED and Section.SUMMARY not in present:
            fate = Fate.LOST
        found.append((seq, fate))
    return CallFates(dataclasses.replace(call, messages=()), tuple(found), present)


def trace_phrase(matches: Sequence[Message], calls: Sequence[ModelCall], folded_phrase: str) -> PhraseTrace:
    """Per call (oldest first), the fate of every matching message and where the phrase was
    rendered; per message, the first turn it dropped out of what the model saw, and why."""
    seqs = [m.seq for m in matches]
    return trace_of(matches, [call_fates(call, seqs, folded_phrase) for call in calls])


def trace_of(matches: Sequence[Message], rows: Sequence[CallFates]) -> PhraseTrace:
    """The trace from each call's fates of `matches`, oldest call first."""
    drops = _drops([m.seq for m in matches], rows)
    return PhraseTrace(tuple(matches), tuple(rows), tuple(drops), _gone(rows, drops))


def _drops(seqs: Sequence[int], table: Sequence[CallFates]) -> list[Drop]:
    drops = []
    for column, seq in enumerate(seqs):
        before: Fate | None = None
        for row in table:
            fate = row.fates[column][1]
            reason = _drop_reason(before, fate)
            if reason is not None:
                drops.append(Drop(seq, row.call.model_call_id, row.call.created_at, reason))
                break
            if fate in _PRESENT:
                before = fate
    return drops


def _drop_reason(before: Fate | None, fate: Fate) -> DropReason | None:
    """Why a message the model saw (fate `before`, None if it never did) no longer reaches
    it at `fate`; None while it still does."""
    if before not in _PRESENT or fate in _PRESENT or fate is Fate.NOT_YET:
        return None
    if fate is Fate.LOST:
        return DropReason.RECOMPACTION if before is Fate.SUMMARIZED else DropReason.COMPACTION
    return DropReason.STUB if fate is Fate.STUBBED else DropReason.WINDOW


def _gone(rows: Sequence[CallFates], drops: Sequence[Drop]) -> Gone | None:
    """The first call rendering the phrase nowhere after one that rendered it, and why: the
    drop of a matching message at that call, else the section the phrase was last seen in."""
    for previous, row in zip(rows, rows[1:], strict=False):
        if not previous.present or row.present:
            continue
        call_id = row.call.model_call_id
        reasons = [d.reason for d in drops if d.model_call_id == call_id]
        if not reasons:
            reasons = [_SECTION_REASONS[s] for s in previous.present if s in _SECTION_REASONS]
        reason = reasons[0] if reasons else DropReason.CONTEXT
        return Gone(call_id, row.call.created_at, reason, previous.present)
    return None


# --- what changed between two calls -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class CallDiff:
    entered: tuple[RenderedMessage, ...]
    left: tuple[RenderedMessage, ...]
    kept: int


def _identity(call: ModelCall, message: RenderedMessage) -> tuple[object, ...]:
    """A log message is itself by seq (and whether it was stubbed), wherever it stands;
    anything else (system prompt, recall, summary, known facts) by its section and text."""
    seq = log_seq(call, message)
    if seq > 0:
        return ("log", seq, message.stubbed)
    return (message.section.value, message.content)


def diff_calls(previous: ModelCall | None, current: ModelCall) -> CallDiff:
    """What entered and what left the context from `previous` to `current` (None: the
    episode's first call, where everything entered)."""
    old = previous.messages if previous is not None else ()
    before = {_identity(previous, m) for m in old} if previous is not None else set()
    after = {_identity(current, m) for m in current.messages}
    entered = tuple(m for m in current.messages if _identity(current, m) not in before)
    left = tuple(m for m in old if previous is not None and _identity(previous, m) not in after)
    return CallDiff(entered, left, len(current.messages) - len(entered))


def preview(text: str) -> str:
    """One line, at most PREVIEW_CHARS characters."""
    flat = " ".join(text[:PREVIEW_READS].split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"
