"""Integration fixtures: the real stores and services over a real database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest

from episodic.bootstrap.containers import App, Replacements
from episodic.bootstrap.lifecycle import open_app
from episodic.config import EmbedderKind, Settings
from episodic.domain.agents import AgentDraft
from episodic.domain.model import Caller
from episodic.service.services import Services
from episodic.store.database import Database
from episodic.store.writer import GroupCommitWriter
from tests.conftest import unique


@dataclass
class Stack:
    database: Database
    writer: GroupCommitWriter
    services: Services
    caller: Caller
    app: App

    async def new_agent(self, model: str = "gpt-4o") -> str:
        agent_id = unique("agent")
        await self.services.agents.create_agent(self.caller, AgentDraft(agent_id, model=model))
        return agent_id

    async def new_episode(self) -> str:
        agent_id = await self.new_agent()
        episode, _ = await self.services.episodes.open_episode(self.caller, agent_id=agent_id, user_id="u1")
        return episode.episode_id


@asynccontextmanager
async def stack_on(url: str, caller: Caller) -> AsyncIterator[Stack]:
    """The product wired through its one door, without its background workers (tests run
    the digester and the retention job themselves)."""
    settings = Settings(
        database_url=url, embedder=EmbedderKind.HASHING, insecure_dev=True, access_log=False,
        db_writers=2,  # >1 on PostgreSQL exercises the row locks
    )  # fmt: skip
    replace = Replacements(background=False)
    async with open_app(settings, replace=replace) as app:
        yield Stack(app.database, app.adapters.writer, app.services, caller, app)


@pytest.fixture
async def stack(database_url: str) -> AsyncIterator[Stack]:
    async with stack_on(database_url, Caller(unique("tenant"))) as opened:
        yield opened


@pytest.fixture
async def fresh_stack(fresh_database_url: str) -> AsyncIterator[Stack]:
    """A stack over a database of the test's own (see `fresh_database_url`)."""
    async with stack_on(fresh_database_url, Caller(unique("tenant"))) as opened:
        yield opened
