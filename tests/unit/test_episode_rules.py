"""Open and close are idempotent; a closed episode stays closed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from episodic.domain import episodes as rules
from episodic.domain.model import CloseReason, EpisodeState
from episodic.errors import AlreadyExists, FailedPrecondition, InvalidArgument

NOW = datetime(2026, 3, 1, tzinfo=UTC)
REQUEST = rules.OpenRequest("agent", "mary", "ep-1", {}, NOW)


def test_an_episode_opened_with_a_past_start_is_active_from_its_opening() -> None:
    imported = rules.OpenRequest("agent", "mary", "ep-old", {}, NOW - timedelta(days=400))
    opened = rules.new_episode("t", imported, "cl100k_base", opened_at=NOW)
    assert (opened.started_at, opened.last_activity_at) == (NOW - timedelta(days=400), NOW)


def test_reopening_an_open_episode_returns_it() -> None:
    existing = rules.new_episode("t", REQUEST, "cl100k_base")
    assert rules.reopen(existing, REQUEST) is existing


def test_reopening_a_closed_episode_is_a_failed_precondition() -> None:
    closed = rules.close(rules.new_episode("t", REQUEST, "cl100k_base"), CloseReason.USER_ENDED, "", NOW)
    with pytest.raises(FailedPrecondition):
        rules.reopen(closed, REQUEST)


def test_an_episode_id_of_another_user_is_already_taken() -> None:
    existing = rules.new_episode("t", REQUEST, "cl100k_base")
    with pytest.raises(AlreadyExists):
        rules.reopen(existing, rules.OpenRequest("agent", "bob", "ep-1", {}, NOW))


def test_closing_twice_keeps_the_first_reason_and_time() -> None:
    first = rules.close(
        rules.new_episode("t", REQUEST, "cl100k_base"), CloseReason.AGENT_DECISION, "done", NOW
    )
    again = rules.close(first, CloseReason.USER_ENDED, "", NOW + timedelta(hours=1))
    assert (
        again is first
        and again.state is EpisodeState.CLOSED
        and again.close_reason is CloseReason.AGENT_DECISION
    )


def test_an_end_before_the_start_is_rejected() -> None:
    with pytest.raises(InvalidArgument):
        rules.close(
            rules.new_episode("t", REQUEST, "cl100k_base"), CloseReason.USER_ENDED, "", NOW - timedelta(1)
        )
