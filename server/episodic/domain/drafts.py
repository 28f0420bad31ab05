"""Rules of assistant replies in progress (drafts): text pushed piece by piece, idempotent
by offset, bounded in size and in number per episode. A draft is not part of the log; it
becomes a message only when finalized. Offsets and lengths count Unicode code points."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from episodic.domain.model import JsonObject, NewMessage, Role, ToolCall
from episodic.domain.validation import Limits, Violations, check_new_message
from episodic.errors import FailedPrecondition, InvalidArgument


@dataclass(frozen=True, slots=True)
class DraftLimits:
    """`max_bytes`: a draft must fit in a message (the content limit). At `per_episode`
    drafts, a new one may replace only a draft nobody pushed to for `idle`."""

    max_bytes: int
    per_episode: int = 4
    idle: timedelta = timedelta(minutes=10)


@dataclass(frozen=True, slots=True)
class DraftRow:
    """What the store holds of one draft, without its text."""

    draft_id: str
    length: int  # code points
    size: int  # UTF-8 bytes
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Push:
    draft_id: str
    offset: int
    text: str


@dataclass(frozen=True, slots=True)
class PushPlan:
    """What a push writes: `tail` appended to the draft (created when `creates`), after
    dropping the stale draft `replaces`, if any. An empty tail with `creates` False writes
    nothing (a retry)."""

    tail: str
    length: int
    size: int
    creates: bool
    replaces: str | None = None

    @property
    def writes(self) -> bool:
        return bool(self.tail) or self.creates


@dataclass(frozen=True, slots=True)
class Pushed:
    """A push's outcome: the draft's length after it, and whether anything was written."""

    length: int
    changed: bool


def overlap_span(push: Push) -> tuple[int, int]:
    """(offset, characters) of the stored text a push must match if it repeats an earlier
    one: the store reads this span before planning."""
    return push.offset, len(push.text)


def plan_push(
    drafts: Sequence[DraftRow], push: Push, stored: str, now: datetime, limits: DraftLimits
) -> PushPlan:
    """`drafts`: the episode's drafts; `stored`: the draft's text in `overlap_span(push)`."""
    current = next((d for d in drafts if d.draft_id == push.draft_id), None)
    length = current.length if current else 0
    if push.offset > length:
        raise FailedPrecondition(
            f"offset {push.offset} is past the end of draft {push.draft_id!r} ({length} characters "
            "pushed): a push is missing; push again from offset " + str(length),
            reason="DRAFT_OFFSET_GAP",
        )
    overlap = min(len(push.text), length - push.offset)
    if stored[:overlap] != push.text[:overlap]:
        raise FailedPrecondition(
            f"offset {push.offset}: the text differs from what draft {push.draft_id!r} already holds there",
            reason="DRAFT_OFFSET_MISMATCH",
        )
    tail = push.text[overlap:]
    size = (current.size if current else 0) + len(tail.encode("utf-8"))
    if size > limits.max_bytes:
        limit = limits.max_bytes
        raise InvalidArgument.of("text", f"makes the draft {size} bytes, over a message's limit of {limit}")
    if current is not None:
        return PushPlan(tail, length + len(tail), size, creates=False)
    return PushPlan(tail, len(tail), size, creates=True, replaces=_room_for_one_more(drafts, now, limits))


def _room_for_one_more(drafts: Sequence[DraftRow], now: datetime, limits: DraftLimits) -> str | None:
    """None when under the cap; else the id of the idle draft to drop, if there is one."""
    if len(drafts) < limits.per_episode:
        return None
    oldest = min(drafts, key=lambda d: d.updated_at)
    if now - oldest.updated_at >= limits.idle:
        return oldest.draft_id
    raise FailedPrecondition(
        f"the episode already has {len(drafts)} replies in progress (the limit): finalize one, "
        f"or wait until one has had no push for {limits.idle.total_seconds():.0f} s",
        reason="TOO_MANY_DRAFTS",
    )


def finalized_error(draft_id: str, seq: int) -> FailedPrecondition:
    return FailedPrecondition(
        f"draft {draft_id!r} was finalized: it is message {seq} of the log", reason="DRAFT_FINALIZED"
    )


def episode_closed_error(episode_id: str) -> FailedPrecondition:
    return FailedPrecondition(
        f"episode {episode_id!r} is closed; open a new episode to continue", reason="EPISODE_CLOSED"
    )


def check_final_parts(
    v: Violations, metadata: JsonObject, tool_calls: Sequence[ToolCall], limits: Limits
) -> None:
    """What FinalizeAssistantMessage adds to the draft's text, checked as a message's own
    fields are (the text was checked push by push), named as the request names them."""
    inner = Violations()
    stand_in = NewMessage(Role.ASSISTANT, "draft text", metadata=metadata, tool_calls=tuple(tool_calls))
    check_new_message(inner, "", stand_in, limits)
    for item in inner.items:
        v.add(item.field.removeprefix("."), item.description)
