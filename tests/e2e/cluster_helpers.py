"""Several in-process replicas (apps) on one database, each closable on its own, and a
replica whose wall clock runs ahead of the others."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from datetime import datetime, timedelta

from episodic.bootstrap import system
from episodic.bootstrap.containers import App, Replacements
from episodic.bootstrap.lifecycle import open_app
from episodic.config import Settings
from episodic.domain.agents import AgentDraft, MemoryDraft
from episodic.domain.model import Caller, NewMessage, Role
from episodic.store.leadership import PgLeadership
from tests.conftest import unique
from tests.server_harness import TENANT_A

CALLER = Caller(TENANT_A)
JOBS = ("idle-reaper", "retention")


@contextmanager
def clock_ahead(by: timedelta) -> Iterator[Callable[[], datetime]]:
    """While open, apps built take a wall clock `by` ahead (every part of an app captures
    `system.utc_now` when it is built); yields that clock."""
    real = system.utc_now

    def skewed() -> datetime:
        return real() + by

    system.utc_now = skewed
    try:
        yield skewed
    finally:
        system.utc_now = real


class Replica:
    """One app with its own exit: `close()` stops it as a departing replica would."""

    def __init__(self, app: App, stack: AsyncExitStack) -> None:
        self.app = app
        self._stack = stack

    @property
    def leads(self) -> frozenset[str]:
        leadership = self.app.adapters.leadership
        assert isinstance(leadership, PgLeadership)
        return leadership.held

    async def close(self) -> None:
        await self._stack.aclose()


@asynccontextmanager
async def replicas() -> AsyncIterator[Callable[..., Awaitable[Replica]]]:
    """`await start(settings, background=...)` opens one more replica; all still open are
    closed at the end."""
    opened: list[Replica] = []

    async def start(settings: Settings, *, background: bool = True) -> Replica:
        stack = AsyncExitStack()
        replace = Replacements(background=background)
        app = await stack.enter_async_context(open_app(settings, replace=replace))
        opened.append(Replica(app, stack))
        return opened[-1]

    try:
        yield start
    finally:
        for replica in reversed(opened):
            await replica.close()


async def open_episode(app: App, idle_timeout: timedelta | None = None) -> str:
    """A new agent (with this idle timeout) and an open episode of it with one message."""
    agent_id = unique("agent")
    draft = AgentDraft(agent_id, model="gpt-4o", memory=MemoryDraft(idle_timeout=idle_timeout))
    await app.services.agents.create_agent(CALLER, draft)
    episode, _ = await app.services.episodes.open_episode(CALLER, agent_id=agent_id, user_id="u1")
    await app.services.episodes.add_message(CALLER, episode.episode_id, NewMessage(Role.USER, "hello"))
    return episode.episode_id


def leaders(group: list[Replica], job: str) -> list[Replica]:
    return [r for r in group if job in r.leads]
