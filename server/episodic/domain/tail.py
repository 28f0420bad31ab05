"""The verbatim tail of a working set, held as columns (issue 47 item 4).

A `Message` held in RAM cost ~185 bytes beside its text: the object (12 slots, 128 bytes),
its created_at datetime (48) and its list slot; 13 KiB of a 73-message tail at the seed's
sizing. As columns a message costs ~40: its seq, time and token count in arrays, its kind
(role, encoding, time zone) as an index, its text and client id in lists, and what few
messages carry (metadata, tool calls, a tool result, a retraction) in a dict by seq.

A `Tail` is a sequence of `Message`s, each rebuilt when read (~3 us: compaction,
inspection and tests read them so); a turn renders from the columns (`columns`), as fast as
it rendered from the Messages (reducers' `stub_old_tool_results`: ~43 us for 73 either way),
and a cold read of 160 messages builds one in ~0.3 ms where the Messages took ~0.8."""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from typing import NamedTuple, overload

from episodic.domain.model import NO_METADATA, JsonObject, Message, Role, ToolCall, ToolResult

Kind = tuple[Role, str, tzinfo | None]  # a held message's role, token encoding and time zone
_EPOCH = datetime(1970, 1, 1)
_MICROSECOND = timedelta(microseconds=1)
_MALLOCED_CHARS = 464  # an ASCII str this long is malloc's (pymalloc: to 512 bytes, 49 of them its own)
FIXED_BYTES = 40  # a held message's columns and list slots (seq, time, tokens, kind, text, client id)


def micros(at: datetime) -> int:
    """The datetime's wall-clock fields as microseconds since 1970, whatever its zone."""
    return (at.replace(tzinfo=None) - _EPOCH) // _MICROSECOND


def from_micros(us: int, zone: tzinfo | None) -> datetime:
    """`micros`' inverse: equal to the datetime it was taken from, given its zone."""
    return (_EPOCH + timedelta(microseconds=us)).replace(tzinfo=zone)


def kind_index(kinds: list[Kind], m: Message) -> int:
    """The index of `m`'s kind in `kinds`, appended when new (a log has a handful of kinds)."""
    kind = (m.role, sys.intern(m.token_encoding), m.created_at.tzinfo)
    if kind not in kinds:
        kinds.append(kind)
    return kinds.index(kind)


class _Rare(NamedTuple):
    """What only some messages carry."""

    metadata: JsonObject
    tool_calls: tuple[ToolCall, ...]
    tool_result: ToolResult | None
    retracted_at: datetime | None


class Columns(NamedTuple):
    """What rendering reads of each message of a tail, as parallel sequences (reducers'
    history views): a turn makes no object per message but its view."""

    roles: Sequence[Role]
    contents: Sequence[str]
    token_counts: Sequence[int]
    tool_calls: Sequence[tuple[ToolCall, ...]]
    tool_results: Sequence[ToolResult | None]
    seqs: Sequence[int]

    @classmethod
    def of(cls, messages: Sequence[Message]) -> Columns:
        return cls(
            [m.role for m in messages], [m.content for m in messages], [m.token_count for m in messages],
            [m.tool_calls for m in messages], [m.tool_result for m in messages], [m.seq for m in messages],
        )  # fmt: skip


_NONE = _Rare(NO_METADATA, (), None, None)


def _own(text: str) -> str:
    """The text copied on this thread (the event loop's). A row read from SQL brings a
    string malloc made in that SQLite reader thread's arena, among the read's short-lived
    allocations; the tail keeps it while the conversation is active, and the 8 readers'
    arenas grew ~30% free space around the kept texts (holes below a page: ~9 KiB of RSS per
    active conversation, issue 47, scripts/footprint_probe.py). Copied here, the texts sit
    together in the main arena and each reader's stays at a few MiB. ~1 us a long text."""
    if len(text) < _MALLOCED_CHARS:  # pymalloc's, whichever thread made it
        return text
    return "".join((text, ""))  # two parts: a new string, never `text`


@dataclass(slots=True, eq=False)
class Tail(Sequence[Message]):
    """Messages of one episode, ascending by seq, oldest first."""

    episode_id: str = ""
    seqs: array[int] = field(default_factory=lambda: array("q"))
    times_us: array[int] = field(default_factory=lambda: array("q"))
    token_counts: array[int] = field(default_factory=lambda: array("i"))
    kind: array[int] = field(default_factory=lambda: array("H"))  # index into `kinds`
    kinds: list[Kind] = field(default_factory=list)
    contents: list[str] = field(default_factory=list)
    client_ids: list[str | None] = field(default_factory=list)
    rare: dict[int, _Rare] = field(default_factory=dict)  # by seq

    @classmethod
    def of(cls, messages: Iterable[Message], episode_id: str = "") -> Tail:
        tail = cls(episode_id)
        tail.extend(messages)
        return tail

    def __len__(self) -> int:
        return len(self.seqs)

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return [self._message(i) for i in range(len(self))[index]]
        return self._message(range(len(self))[index])  # IndexError as a list's

    def __iter__(self) -> Iterator[Message]:
        return (self._message(i) for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        """Equal to another tail or a list of the same messages."""
        if not isinstance(other, Tail | list):
            return NotImplemented
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # mutable

    @property
    def last_seq(self) -> int:
        return self.seqs[-1] if self.seqs else 0

    def append(self, m: Message) -> None:
        if not self.seqs:
            self.episode_id = self.episode_id or m.episode_id
        self.kind.append(kind_index(self.kinds, m))
        self.seqs.append(m.seq)
        self.times_us.append(micros(m.created_at))
        self.token_counts.append(m.token_count)
        self.contents.append(_own(m.content))
        self.client_ids.append(m.client_message_id)
        if m.metadata or m.tool_calls or m.tool_result or m.retracted_at:
            self.rare[m.seq] = _Rare(m.metadata or NO_METADATA, m.tool_calls, m.tool_result, m.retracted_at)

    def extend(self, messages: Iterable[Message]) -> None:
        for m in messages:
            self.append(m)

    def after(self, seq: int) -> Tail:
        """The held messages after `seq`, as a tail of their own."""
        return self._between(bisect_right(self.seqs, seq), len(self))

    def without(self, seq: int) -> Tail:
        """A copy without message `seq` and without retracted messages: what a turn renders
        (most turns: all but the newest, the user message the turn appended)."""
        retracted = {s for s, r in self.rare.items() if r.retracted_at is not None}
        if not retracted and (seq == self.last_seq or seq not in self.seqs):
            return self._between(0, len(self) - 1 if seq == self.last_seq else len(self))
        return self._kept([i for i, s in enumerate(self.seqs) if s != seq and s not in retracted])

    def columns(self) -> Columns:
        """What a turn renders of each held message, read from the columns."""
        n, kinds = len(self), [k[0] for k in self.kinds]
        roles = [kinds[k] for k in self.kind]
        if not self.rare:
            return Columns(roles, self.contents, self.token_counts, [()] * n, [None] * n, self.seqs)
        rare = [self.rare.get(seq, _NONE) for seq in self.seqs]
        calls, results = [r.tool_calls for r in rare], [r.tool_result for r in rare]
        return Columns(roles, self.contents, self.token_counts, calls, results, self.seqs)

    def copy(self) -> Tail:
        return self._between(0, len(self))

    def size(self) -> int:
        """Estimated bytes held: the texts and each message's columns (tool calls ~120 each)."""
        calls = sum([len(r.tool_calls) for r in self.rare.values()])
        return FIXED_BYTES * len(self) + sum([sys.getsizeof(c) for c in self.contents]) + 120 * calls

    def _between(self, start: int, stop: int) -> Tail:
        seqs = self.seqs[start:stop]
        return Tail(
            self.episode_id, seqs, self.times_us[start:stop], self.token_counts[start:stop],
            self.kind[start:stop], self.kinds, self.contents[start:stop], self.client_ids[start:stop],
            {s: r for s, r in self.rare.items() if seqs and seqs[0] <= s <= seqs[-1]},
        )  # fmt: skip

    def _kept(self, positions: list[int]) -> Tail:
        seqs = [self.seqs[i] for i in positions]
        return Tail(
            self.episode_id,
            array("q", seqs),
            array("q", [self.times_us[i] for i in positions]),
            array("i", [self.token_counts[i] for i in positions]),
            array(self.kind.typecode, [self.kind[i] for i in positions]),
            self.kinds,  # shared: only ever appended to, and an index stays valid
            [self.contents[i] for i in positions],
            [self.client_ids[i] for i in positions],
            {s: self.rare[s] for s in seqs if s in self.rare},
        )

    def _message(self, i: int) -> Message:
        role, encoding, zone = self.kinds[self.kind[i]]
        seq = self.seqs[i]
        r = self.rare.get(seq, _NONE)
        return Message(
            self.episode_id, seq, role, self.contents[i], self.token_counts[i], encoding,
            from_micros(self.times_us[i], zone), self.client_ids[i], r.metadata, r.tool_calls,
            r.tool_result, r.retracted_at,
        )  # fmt: skip
