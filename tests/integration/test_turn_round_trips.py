"""A warm BuildContext turn with a new question makes three trips to the database, with or
without the agent's knowledge: the append (which also reads what the turn needs of its
episode), one read shared by the turn's searches, and the model call's insert. Counted, not
timed (scripts/trace_build_context.py prints the figures)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import pytest

from episodic.bootstrap.containers import App
from episodic.bootstrap.lifecycle import open_app
from episodic.domain.agents import AgentDraft, MemoryDraft
from episodic.domain.knowledge import DocumentDraft
from episodic.domain.memories import MemoryKind
from episodic.domain.memory_rules import CreateRequest, SessionUpdate
from episodic.domain.memory_rules import MemoryDraft as Remembered
from episodic.domain.model import Caller, NewMessage, Role
from episodic.service.context import ContextRequest
from episodic.store.database import Database
from episodic.store.writer import GroupCommitWriter
from tests.conftest import unique
from tests.server_harness import settings_for

CALLER = Caller("tenant-a")
GUIDE = "\n\n".join(
    f"## Stop {n}\n\nStop {n} has a fountain and a bakery open until {n} pm." for n in range(30)
)


COUNTING: ContextVar[bool] = ContextVar("counting_trips", default=False)


@contextmanager
def trips(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The trips of the code run inside the block (and the tasks it starts), not of the
    server's background loops: a read on its own, a batch of reads shared by a turn's
    searches, a quick read (on the event loop's thread), a write."""
    made: list[str] = []

    def counting(name: str, original: Any) -> Any:
        async def call(self: Any, *args: Any) -> Any:
            if COUNTING.get():
                made.append(name)
            return await original(self, *args)

        return call

    for cls, method, name in [
        (Database, "_read", "read"),
        (Database, "_run_many", "read"),
        (Database, "quick_read", "quick_read"),
        (GroupCommitWriter, "run", "run"),
        (GroupCommitWriter, "run_bulk", "run_bulk"),
        (GroupCommitWriter, "run_bulk_staged", "run_bulk_staged"),
    ]:
        monkeypatch.setattr(cls, method, counting(name, getattr(cls, method)))
    token = COUNTING.set(True)
    try:
        yield made
    finally:
        COUNTING.reset(token)


async def warm_episode(app: App, knowledge: bool, memories: bool = False, session: bool = False) -> str:
    s, agent_id = app.services, unique("guide")  # PostgreSQL's database is the run's
    memory = MemoryDraft(session_data_keys=("city",)) if session else MemoryDraft()
    await s.agents.create_agent(CALLER, AgentDraft(agent_id, system_prompt="Be brief.", memory=memory))
    if knowledge:
        await s.knowledge.create(CALLER, agent_id, [DocumentDraft("stops", GUIDE, title="Stops")])
    if memories:  # long-term memories of the user: the turn's Known Facts match them, and fill from them
        facts = ["Ann is vegetarian", "Ann walks with a cane", "Ann visited Lisbon in May"]
        request = CreateRequest([Remembered(text=t, kind=MemoryKind.FACT) for t in facts], agent_id, "ann")
        await s.memories.create(CALLER, request)
    episode, _ = await s.episodes.open_episode(CALLER, agent_id=agent_id, user_id="ann")
    await s.episodes.add_messages(CALLER, episode.episode_id, [NewMessage(Role.USER, "Hello there")])
    if session:  # read every turn (no cache): its read joins the searches' batch
        await s.sessions.update(CALLER, SessionUpdate(episode.episode_id, {"city": "Porto"}))
    for n in range(3):  # warm: the working set, the scopes, the chunk rows
        await s.context.build(CALLER, ContextRequest(episode.episode_id, f"fountain at stop {n}?", True))
    return episode.episode_id


@pytest.mark.parametrize(
    ("knowledge", "memories", "session"),
    [(False, False, False), (True, False, False), (True, True, False), (True, True, True)],
    ids=["without knowledge", "with knowledge", "with knowledge and memories", "and session data"],
)
async def test_a_warm_turn_makes_three_trips_to_the_database(
    sqlite_url: str, knowledge: bool, memories: bool, session: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On SQLite: on the run's shared PostgreSQL database, the other tests' changes reach this
    app through the change feed and may rightly make a turn read its working set again (the
    batched reads themselves are tested on both, tests/integration/test_read_batch.py)."""
    settings = dataclasses.replace(settings_for(sqlite_url), insecure_dev=True)
    async with open_app(settings) as app:
        episode_id = await warm_episode(app, knowledge, memories, session)
        with trips(monkeypatch) as made:
            call, _ = await app.services.context.build(
                CALLER, ContextRequest(episode_id, "Which stop has a bakery open late?", True)
            )
    # the append (answered before its commit), the searches' read, the model call
    assert made == ["run_bulk_staged", "read", "run"]
    assert bool(call.report.knowledge) == knowledge
    assert bool(call.report.memories) == memories
    assert bool(call.report.session_keys) == session
