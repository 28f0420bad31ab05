"""What the inspector shows about stored model calls: the fate of every log message in a
call (rendered verbatim, stubbed, recalled from earlier in this conversation, present only
through the summary, or pruned), where a phrase went turn by turn, and what changed between
two consecutive calls. Computed from the stored calls alone, never guessed. Pure; every
function is linear in its input.

One rule (`message_fate`) says what became of a log message in a call, for the log's badges
and fates (no phrase: what the call did with the message) and for "where did it go?" (a
phrase: whether the model saw the phrase through it). A phrase is followed into what was
rendered, not only into which log messages were: a message inside the summary's span is
present only if the rendered summary still says the phrase (a re-compaction may drop it);
one in a passage the call recalled into "[Earlier in this conversation]" (the report lists
each passage's seqs) is present if that section says it; and a phrase may also reach the
model through [Knowledge], [Known Facts] or [Past Conversations]. Each traced call lists the
sections whose rendered text holds the phrase, and the trace names the first call where it
was nowhere after having been somewhere, and why, and the first call after that where it was
back."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise

from episodic.domain.context import ModelCall, PassageFate, RenderedMessage, Section
from episodic.domain.log import countable_text
from episodic.domain.model import Message

PREVIEW_CHARS = 160
PREVIEW_READS = PREVIEW_CHARS * 4  # a preview looks no further into a text than this
MAX_PHRASE_CHARS = 1000


class Fate(enum.StrEnum):
    """What became of one log message in one model call. Without a phrase, what the call did
    with the message; with one, whether the model saw the phrase through it (see
    `message_fate`)."""

    VERBATIM = "verbatim"
    STUBBED = "stubbed"  # a tool result rendered as a stub
    # In a passage rendered in "[Earlier in this conversation]": whole (with a phrase: and
    # that section says it, whole or cut).
    EARLIER = "earlier"
    # In a passage rendered cut (with a phrase: rendered, but that section does not say it).
    EARLIER_CUT = "earlier_cut"
    # Not rendered itself, inside the span of the rendered summary (with a phrase: and the
    # summary says it).
    SUMMARIZED = "summarized"
    LOST = "lost"  # inside the summary's span, but the rendered summary does not say the phrase
    PRUNED = "pruned"  # not rendered at all: it left the window
    NOT_YET = "not_yet"  # written after the call


class DropReason(enum.StrEnum):
    WINDOW = "window"  # left the history window (the budget no longer held it)
    COMPACTION = "compaction"  # summarized from verbatim, and the summary left the phrase out
    RECOMPACTION = "recompaction"  # in the summary, until a new summary left the phrase out
    EARLIER = "earlier"  # no longer recalled into [Earlier in this conversation]
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
    Section.EARLIER: DropReason.EARLIER,
}
_PRESENT = (Fate.VERBATIM, Fate.EARLIER, Fate.SUMMARIZED)  # a message whose phrase the model saw


@dataclass(frozen=True, slots=True)
class FateRun:
    from_seq: int
    to_seq: int
    fate: Fate


@dataclass(frozen=True, slots=True)
class UserSummary:
    """A user of an agent, as ListUsers and the inspector list them: episodes (open and
    closed), those open, memories (not superseded), and the newest of the episodes' last
    activity and the memories' last update."""

    user_id: str
    episodes: int
    last_activity_at: datetime
    open_episodes: int = 0
    memories: int = 0


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


@dataclass(frozen=True, slots=True)
class CallView:
    """What `message_fate` reads of one call, read once: the log messages it rendered, the
    seqs of the passages it rendered in "[Earlier in this conversation]", and (with a
    phrase) the sections whose rendered text holds it."""

    call: ModelCall
    rendered: dict[int, Fate]  # seq -> VERBATIM or STUBBED
    passages: dict[int, PassageFate]  # seq -> WHOLE or CUT: a rendered passage holds it
    present: tuple[Section, ...] | None = None  # None: no phrase

    @classmethod
    def of(cls, call: ModelCall, folded_phrase: str | None = None) -> CallView:
        rendered = {}
        for m in call.messages:
            seq = log_seq(call, m)
            if seq > 0:
                rendered[seq] = Fate.STUBBED if m.stubbed else Fate.VERBATIM
        passages: dict[int, PassageFate] = {}
        for p in call.report.earlier:
            if p.fate is not PassageFate.DROPPED:
                for seq in p.seqs:
                    if passages.get(seq) is not PassageFate.CUT:
                        passages[seq] = p.fate
        present = None if folded_phrase is None else rendered_in(call, folded_phrase)
        return cls(call, rendered, passages, present)

    def summarized(self, seq: int) -> bool:
        span = self.call.report.summary_span
        return span.to_seq > 0 and span.from_seq <= seq <= span.to_seq

    def says(self, section: Section) -> bool:
        return self.present is not None and section in self.present


def message_fate(view: CallView, seq: int) -> Fate:
    """What became of log message `seq` in the call: the one rule of the log's badges, the
    call's fates and the phrase trace. Rendered in the history (or as the user message) it
    is VERBATIM or STUBBED. Otherwise, without a phrase: EARLIER or EARLIER_CUT when a
    rendered passage of "[Earlier in this conversation]" holds it (whole or cut), else
    SUMMARIZED inside the summary's span, else PRUNED. With a phrase, what the model saw of
    it: EARLIER when a rendered passage holds it and that section says the phrase, else
    SUMMARIZED when the summary's span holds it and the summary says the phrase, else
    EARLIER_CUT (rendered in a passage without the phrase), LOST (summarized without it) or
    PRUNED."""
    if seq > last_seq(view.call):
        return Fate.NOT_YET
    found = view.rendered.get(seq)
    if found is not None:
        return found
    passage = view.passages.get(seq)
    summarized = view.summarized(seq)
    if view.present is None:
        if passage is not None:
            return Fate.EARLIER if passage is PassageFate.WHOLE else Fate.EARLIER_CUT
        return Fate.SUMMARIZED if summarized else Fate.PRUNED
    if passage is not None and view.says(Section.EARLIER):
        return Fate.EARLIER
    if summarized and view.says(Section.SUMMARY):
        return Fate.SUMMARIZED
    if passage is not None:
        return Fate.EARLIER_CUT
    return Fate.LOST if summarized else Fate.PRUNED


def fate_at(call: ModelCall, seq: int, folded_phrase: str | None = None) -> Fate:
    """What became of log message `seq` in `call` (with a phrase: of the phrase it says)."""
    return message_fate(CallView.of(call, folded_phrase), seq)


def fates(call: ModelCall) -> list[FateRun]:
    """Every log seq from 1 to the call's last as runs of one fate (`message_fate` without a
    phrase): linear in the rendered messages and passages, not in the length of the log."""
    view = CallView.of(call)
    end = last_seq(call)
    runs: list[FateRun] = []
    cursor = 1
    for seq in [*sorted(s for s in {*view.rendered, *view.passages} if s <= end), end + 1]:
        if seq > cursor:
            _extend(runs, _gap(view, cursor, seq - 1))
        if seq <= end:
            _extend(runs, [FateRun(seq, seq, message_fate(view, seq))])
        cursor = seq + 1
    return runs


def _gap(view: CallView, first: int, last: int) -> list[FateRun]:
    """Seqs first..last, none rendered nor in a rendered passage: their fate changes only at
    the summary's span's ends, so one seq of each piece stands for the piece."""
    span = view.call.report.summary_span
    cuts = sorted({first, last + 1, *(s for s in (span.from_seq, span.to_seq + 1) if first < s <= last)})
    return [FateRun(a, b - 1, message_fate(view, a)) for a, b in pairwise(cuts)]


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
    """The first call after one where the model saw the message's phrase (verbatim, recalled
    from earlier, or through a summary that said it) where it no longer did."""

    seq: int
    model_call_id: str
    created_at: datetime
    reason: DropReason


@dataclass(frozen=True, slots=True)
class Return:
    """The first call after a message's drop where the model saw its phrase again, and how:
    EARLIER (recalled from earlier in this conversation) or SUMMARIZED (a later summary said
    it again)."""

    seq: int
    model_call_id: str
    created_at: datetime
    fate: Fate


@dataclass(frozen=True, slots=True)
class Gone:
    """The first call after one that rendered the phrase anywhere where it was nowhere."""

    model_call_id: str
    created_at: datetime
    reason: DropReason
    last_seen_in: tuple[Section, ...]  # where the call before rendered it


@dataclass(frozen=True, slots=True)
class Back:
    """The first call after the phrase was gone that rendered it again, and where."""

    model_call_id: str
    created_at: datetime
    present: tuple[Section, ...]


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
    returned: tuple[Return, ...] = ()  # per dropped message, the first call it was seen again
    back: Back | None = None  # the first call rendering the phrase again after `gone`


def rendered_in(call: ModelCall, folded_phrase: str) -> tuple[Section, ...]:
    """The sections of `call` whose rendered text holds the phrase, in rendering order. The
    earlier section quotes each message on one line (its runs of white space as one space):
    it holds a phrase whose white space it quotes so."""
    found = {m.section for m in call.messages if folded_phrase in m.content.casefold()}
    if Section.EARLIER not in found:
        flat = " ".join(folded_phrase.split())
        if any(m.section is Section.EARLIER and flat in m.content.casefold() for m in call.messages):
            found.add(Section.EARLIER)
    return tuple(section for section in Section if section in found)


def call_fates(call: ModelCall, seqs: Sequence[int], folded_phrase: str) -> CallFates:
    """The fate of each of `seqs` in `call` (`message_fate` with the phrase), keeping of the
    call only what a trace shows, so that a long run of calls can be traced one page at a
    time."""
    view = CallView.of(call, folded_phrase)
    found = tuple((seq, message_fate(view, seq)) for seq in seqs)
    return CallFates(dataclasses.replace(call, messages=()), found, view.present or ())


def trace_phrase(matches: Sequence[Message], calls: Sequence[ModelCall], folded_phrase: str) -> PhraseTrace:
    """Per call (oldest first), the fate of every matching message and where the phrase was
    rendered; per message, the first turn it dropped out of what the model saw, and why, and
    the first turn after that it came back."""
    seqs = [m.seq for m in matches]
    return trace_of(matches, [call_fates(call, seqs, folded_phrase) for call in calls])


def trace_of(matches: Sequence[Message], rows: Sequence[CallFates]) -> PhraseTrace:
    """The trace from each call's fates of `matches`, oldest call first."""
    drops, returns = _drops([m.seq for m in matches], rows)
    gone, back = _gone(rows, drops)
    return PhraseTrace(tuple(matches), tuple(rows), tuple(drops), gone, tuple(returns), back)


def _drops(seqs: Sequence[int], table: Sequence[CallFates]) -> tuple[list[Drop], list[Return]]:
    """Per message, its first drop, and the first call after that where it was seen again."""
    drops, returns = [], []
    for column, seq in enumerate(seqs):
        before: Fate | None = None
        dropped = False
        for row in table:
            fate = row.fates[column][1]
            if dropped:
                if fate in _PRESENT:
                    returns.append(Return(seq, row.call.model_call_id, row.call.created_at, fate))
                    break
                continue
            reason = _drop_reason(before, fate)
            if reason is not None:
                drops.append(Drop(seq, row.call.model_call_id, row.call.created_at, reason))
                dropped = True
            elif fate in _PRESENT:
                before = fate
    return drops, returns


def _drop_reason(before: Fate | None, fate: Fate) -> DropReason | None:
    """Why a message the model saw (fate `before`, None if it never did) no longer reaches
    it at `fate`; None while it still does."""
    if before not in _PRESENT or fate in _PRESENT or fate is Fate.NOT_YET:
        return None
    if before is Fate.EARLIER:
        return DropReason.EARLIER
    if fate in (Fate.LOST, Fate.EARLIER_CUT):
        return DropReason.RECOMPACTION if before is Fate.SUMMARIZED else DropReason.COMPACTION
    return DropReason.STUB if fate is Fate.STUBBED else DropReason.WINDOW


def _gone(rows: Sequence[CallFates], drops: Sequence[Drop]) -> tuple[Gone | None, Back | None]:
    """The first call rendering the phrase nowhere after one that rendered it, and why: the
    drop of a matching message at that call, else the section the phrase was last seen in;
    and the first call after it rendering the phrase again."""
    for at, (previous, row) in enumerate(pairwise(rows), start=1):
        if not previous.present or row.present:
            continue
        call_id = row.call.model_call_id
        reasons = [d.reason for d in drops if d.model_call_id == call_id]
        if not reasons:
            reasons = [_SECTION_REASONS[s] for s in previous.present if s in _SECTION_REASONS]
        reason = reasons[0] if reasons else DropReason.CONTEXT
        gone = Gone(call_id, row.call.created_at, reason, previous.present)
        again = next((r for r in rows[at + 1 :] if r.present), None)
        back = None if again is None else Back(again.call.model_call_id, again.call.created_at, again.present)
        return gone, back
    return None, None


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
