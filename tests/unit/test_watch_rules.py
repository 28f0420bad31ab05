"""How one read of a watched episode becomes events (domain/watch.py): new messages in
order, draft text as deltas, a finalized draft announced after its message (even if its
row lingers), a dropped draft discarded, the close last; and the bounds of a replay."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from episodic.domain.model import Episode, EpisodeState, Message, Role
from episodic.domain.watch import (
    DraftChange,
    DraftDiscarded,
    DraftFinalized,
    DraftText,
    EpisodeClosed,
    LiveRead,
    LiveState,
    MessageAppended,
    WatchLimits,
    advance,
    check_after_seq,
)
from episodic.errors import FailedPrecondition, InvalidArgument

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
OPEN = Episode("t", "e1", "agent", "mary", EpisodeState.OPEN, "cl100k_base", NOW, NOW)
CLOSED = dataclasses.replace(OPEN, state=EpisodeState.CLOSED)


def message(seq: int, client_id: str | None = None, role: Role = Role.ASSISTANT) -> Message:
    return Message("e1", seq, role, f"m{seq}", 1, "cl100k_base", NOW, client_message_id=client_id)


def test_new_messages_arrive_in_order_once() -> None:
    state = LiveState(last_seq=1)
    events = advance(state, LiveRead(OPEN, {}, [message(1), message(2), message(3)]))
    assert [e.message.seq for e in events if isinstance(e, MessageAppended)] == [2, 3]
    assert state.last_seq == 3


def test_draft_text_arrives_whole_first_then_as_deltas() -> None:
    state = LiveState(last_seq=0)
    first = advance(state, LiveRead(OPEN, {"d1": DraftChange(3, 0, "Hel")}, []))
    later = advance(state, LiveRead(OPEN, {"d1": DraftChange(5, 3, "lo")}, []))
    same = advance(state, LiveRead(OPEN, {"d1": DraftChange(5)}, []))
    assert first == [DraftText("d1", 0, "Hel")]
    assert later == [DraftText("d1", 3, "lo")]
    assert same == []
    assert state.snapshot() == [DraftText("d1", 0, "Hello")]
    assert state.known() == {"d1": 5}


def test_a_finalized_draft_follows_its_message_and_its_lingering_row_is_ignored() -> None:
    state = LiveState(last_seq=0, drafts={"d1": "Hello"})
    events = advance(state, LiveRead(OPEN, {"d1": DraftChange(6, 5, "!")}, [message(1, "d1")]))
    assert events == [MessageAppended(message(1, "d1")), DraftFinalized("d1", 1)]
    assert state.drafts == {}
    assert advance(state, LiveRead(OPEN, {}, [])) == []
    assert state.finalized == {}


def test_a_draft_finalized_before_it_was_seen_never_shows() -> None:
    state = LiveState(last_seq=0)
    events = advance(state, LiveRead(OPEN, {"d1": DraftChange(5, 0, "Hello")}, [message(1, "d1")]))
    assert events == [MessageAppended(message(1, "d1"))]


def test_a_draft_gone_without_a_message_is_discarded() -> None:
    state = LiveState(last_seq=0, drafts={"d1": "Hel"})
    assert advance(state, LiveRead(OPEN, {}, [])) == [DraftDiscarded("d1")]


def test_nothing_is_discarded_while_messages_remain_unread() -> None:
    state = LiveState(last_seq=0, drafts={"d1": "Hel"})
    assert advance(state, LiveRead(OPEN, {}, [message(1)], complete=False)) == [MessageAppended(message(1))]
    assert state.drafts == {"d1": "Hel"}


def test_a_draft_started_again_under_its_id_restarts_at_offset_zero() -> None:
    state = LiveState(last_seq=0, drafts={"d1": "Hello"})
    events = advance(state, LiveRead(OPEN, {"d1": DraftChange(2, 0, "Yo")}, []))
    assert events == [DraftDiscarded("d1"), DraftText("d1", 0, "Yo")]


def test_the_close_comes_last_once_every_message_was_read() -> None:
    state = LiveState(last_seq=0, drafts={"d1": "Hel"})
    partial = advance(state, LiveRead(CLOSED, {}, [message(1)], complete=False))
    assert partial == [MessageAppended(message(1))] and not state.closed
    final = advance(state, LiveRead(CLOSED, {}, [message(2)]))
    assert final == [MessageAppended(message(2)), EpisodeClosed(CLOSED)]
    assert state.closed and state.drafts == {}


def test_a_replay_starts_inside_the_log() -> None:
    limits = WatchLimits(replay=10)
    check_after_seq(None, 50, limits)
    check_after_seq(45, 50, limits)
    for bad in (-1, 51):
        with pytest.raises(InvalidArgument) as caught:
            check_after_seq(bad, 50, limits)
        assert [v.field for v in caught.value.violations] == ["after_seq"]


def test_a_replay_is_bounded() -> None:
    with pytest.raises(FailedPrecondition) as caught:
        check_after_seq(0, 50, WatchLimits(replay=10))
    assert caught.value.reason == "REPLAY_TOO_LONG"
