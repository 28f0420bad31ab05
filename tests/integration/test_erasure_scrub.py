"""EraseUser's scrub does only what the erasure's deletions need: erasing an unknown user
runs no full-text merge, no WAL checkpoint and no VACUUM (a loop of them by one tenant
must not slow the others), and a real erasure scrubs only the tables it deleted from."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import Engine, event

from episodic.domain.model import NewMessage, Role
from episodic.store.erasure import SqlEraser
from tests.conftest import unique
from tests.integration.conftest import Stack


@contextmanager
def statements(stack: Stack) -> Iterator[list[str]]:
    """Every SQL statement the stack's engines run meanwhile."""
    seen: list[str] = []
    engines: list[Engine] = [stack.database.engine.sync_engine, stack.database.maintenance.sync_engine]
    if stack.database.sqlite_writer is not None:
        engines.append(stack.database.sqlite_writer)

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.append(statement)

    for engine in dict.fromkeys(engines):
        event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        for engine in dict.fromkeys(engines):
            event.remove(engine, "before_cursor_execute", record)


def maintenance(seen: list[str]) -> list[str]:
    return [s for s in seen if "VACUUM" in s.upper() or "'optimize'" in s]


@pytest.fixture
def checkpoints(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts SQLite WAL checkpoints (they run on a connection of their own, outside SQLAlchemy)."""
    eraser = stack.services.erasure.eraser
    assert isinstance(eraser, SqlEraser)
    calls: list[int] = []
    checkpoint = eraser._checkpoint_sqlite

    def counted() -> bool:
        calls.append(1)
        return checkpoint()

    monkeypatch.setattr(eraser, "_checkpoint_sqlite", counted)
    return calls


async def test_erasing_an_unknown_user_does_no_maintenance(stack: Stack, checkpoints: list[int]) -> None:
    with statements(stack) as seen:
        receipt = await stack.services.erasure.erase_user(stack.caller, unique("nobody"))
    assert not any(receipt.counts.values()) and receipt.storage_scrubbed
    assert maintenance(seen) == [] and checkpoints == []


async def test_a_real_erasure_scrubs_what_it_deleted_from(stack: Stack, checkpoints: list[int]) -> None:
    agent_id = await stack.new_agent()
    user = unique("user")
    episode, _ = await stack.services.episodes.open_episode(stack.caller, agent_id=agent_id, user_id=user)
    message = NewMessage(Role.USER, "my locker code is 4711")
    await stack.services.episodes.add_message(stack.caller, episode.episode_id, message)
    with statements(stack) as seen:
        receipt = await stack.services.erasure.erase_user(stack.caller, user)
    assert receipt.counts["episodes"] == 1 and receipt.counts["messages"] == 1 and receipt.storage_scrubbed
    if stack.database.is_sqlite:
        assert checkpoints == [1]
        assert maintenance(seen) == []  # no digest text was deleted: the FTS index is untouched
    else:
        vacuumed = {s.split('"')[1] for s in maintenance(seen)}
        assert {"episodes", "messages", "drafts"} <= vacuumed and "memories" not in vacuumed
