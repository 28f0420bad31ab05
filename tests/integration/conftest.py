"""Integration fixtures: the real stores and services over a real database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from episodic.api.server import Services
from episodic.bootstrap import build_recall, build_services
from episodic.config import Settings
from episodic.domain.agents import AgentDraft
from episodic.domain.model import Caller
from episodic.store.database import Database, open_database
from episodic.store.writer import GroupCommitWriter
from tests.conftest import unique


@dataclass
class Stack:
    database: Database
    writer: GroupCommitWriter
    services: Services
    caller: Caller

    async def new_agent(self, model: str = "gpt-4o") -> str:
        agent_id = unique("agent")
        await self.services.agents.create_agent(self.caller, AgentDraft(agent_id, model=model))
        return agent_id

    async def new_episode(self) -> str:
        agent_id = await self.new_agent()
        episode, _ = await self.services.episodes.open_episode(self.caller, agent_id=agent_id, user_id="u1")
        return episode.episode_id


async def open_stack(url: str, caller: Caller) -> Stack:
    database = open_database(url)
    writer = GroupCommitWriter(database, workers=2)  # >1 on PostgreSQL exercises the row locks
    writer.start()
    settings = Settings(embedder="hashing")
    return Stack(
        database,
        writer,
        build_services(settings, database, writer, build_recall(settings, database, writer)),
        caller,
    )


async def close_stack(stack: Stack) -> None:
    await stack.writer.stop()
    await stack.database.dispose()


@pytest.fixture
async def stack(database_url: str) -> AsyncIterator[Stack]:
    opened = await open_stack(database_url, Caller(unique("tenant")))
    yield opened
    await close_stack(opened)
