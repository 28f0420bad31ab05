"""After a restart, the working sets of the most recently active open conversations are read
back in the background: their first turn finds its working set held, as the next turn would.
Closed conversations are not read, and the warm start can be turned off."""

from __future__ import annotations

import asyncio

from episodic.bootstrap.containers import App
from episodic.bootstrap.lifecycle import open_app
from episodic.domain.agents import AgentDraft
from episodic.domain.model import Caller, NewMessage, Role
from episodic.service.context import ContextRequest
from tests.conftest import unique
from tests.polling import eventually
from tests.server_harness import settings_for

CALLER = Caller("tenant-a")


async def conversations(app: App, count: int) -> list[str]:
    s, agent_id = app.services, unique("guide")
    await s.agents.create_agent(CALLER, AgentDraft(agent_id, system_prompt="Be brief."))
    opened = []
    for n in range(count):
        episode, _ = await s.episodes.open_episode(CALLER, agent_id=agent_id, user_id=f"user-{n}")
        said = [NewMessage(Role.USER, f"Plan the trip number {n}"), NewMessage(Role.ASSISTANT, "Sure.")]
        await s.episodes.add_messages(CALLER, episode.episode_id, said)
        opened.append(episode.episode_id)
    return opened


def held(app: App, episode_id: str) -> bool:
    return app.state.working_sets.get((CALLER.tenant_id, episode_id)) is not None


async def test_a_restarted_server_holds_its_open_conversations_before_their_first_turn(
    fresh_database_url: str,
) -> None:
    settings = settings_for(fresh_database_url, insecure_dev=True, warm_start_conversations=100)
    async with open_app(settings) as app:
        *still_open, closed = await conversations(app, 4)
        await app.services.episodes.close_episode(CALLER, closed)
    async with open_app(settings) as app:

        async def all_held() -> bool:
            return all(held(app, e) for e in still_open)

        assert await eventually(all_held, timeout=30)
        assert not held(app, closed)
        call, _ = await app.services.context.build(CALLER, ContextRequest(still_open[0], "Where to?", True))
        assert [m.content for m in call.messages if m.content.startswith("Plan")] == [
            "Plan the trip number 0"
        ]


async def test_the_most_recent_conversations_are_warmed_first_and_no_more_than_asked(
    sqlite_url: str,
) -> None:
    settings = settings_for(sqlite_url, insecure_dev=True, warm_start_conversations=2)
    async with open_app(settings) as app:
        opened = await conversations(app, 4)
    async with open_app(settings) as app:

        async def two_held() -> bool:
            return sum(held(app, e) for e in opened) == 2

        assert await eventually(two_held, timeout=30)
        assert [held(app, e) for e in opened] == [False, False, True, True]


async def test_without_the_warm_start_a_conversation_is_read_on_its_first_turn(sqlite_url: str) -> None:
    settings = settings_for(sqlite_url, insecure_dev=True, warm_start_conversations=0)
    async with open_app(settings) as app:
        opened = await conversations(app, 2)
    async with open_app(settings) as app:
        await asyncio.sleep(0.3)  # what a warm start would have done by now, were it on
        assert not any(held(app, e) for e in opened)
