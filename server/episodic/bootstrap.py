"""The composition root: the one place that knows every concrete class."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from episodic.api.access_log import AccessLog, JsonLinesAccessLog, NoAccessLog
from episodic.api.server import Services
from episodic.config import ConfigError, Settings
from episodic.errors import Unavailable
from episodic.keys import KeyRing
from episodic.service.agents import AgentService
from episodic.service.episodes import EpisodeService
from episodic.store.agents import SqlAgentStore
from episodic.store.database import Database, open_database
from episodic.store.episodes import SqlEpisodeStore
from episodic.store.migrate import current_revision, head_revision, upgrade_to_head
from episodic.store.writer import GroupCommitWriter
from episodic.tokens import TiktokenCounter, verify_assets


@dataclass(frozen=True, slots=True)
class App:
    settings: Settings
    database: Database
    keys: KeyRing
    services: Services
    access_log: AccessLog


def utc_now() -> datetime:
    return datetime.now(UTC)


def new_episode_id() -> str:
    return f"ep_{uuid.uuid4().hex}"


def load_keys(settings: Settings) -> KeyRing:
    try:
        keys = KeyRing.parse(settings.api_key_text())
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if not keys and not settings.insecure_dev:
        raise ConfigError(
            "no API keys configured: set EPISODIC_API_KEYS or EPISODIC_API_KEYS_FILE "
            "(see `episodic keygen`), or pass --insecure-dev for local development"
        )
    return keys


async def ensure_schema(database: Database, migrate: bool) -> None:
    if migrate:
        await upgrade_to_head(database.engine)
    found, wanted = await current_revision(database.engine), head_revision()
    if found != wanted:
        raise Unavailable(
            f"database schema is at revision {found}, this server needs {wanted}: "
            "run `episodic migrate` or start with --migrate-on-start"
        )


def build_services(settings: Settings, database: Database, writer: GroupCommitWriter) -> Services:
    tokens = TiktokenCounter()
    agents = SqlAgentStore(database, writer)
    episodes = SqlEpisodeStore(database, writer, utc_now)
    return Services(
        episodes=EpisodeService(episodes, agents, tokens, settings.limits, utc_now, new_episode_id),
        agents=AgentService(agents, tokens, settings.limits, utc_now),
    )


@asynccontextmanager
async def open_app(settings: Settings) -> AsyncIterator[App]:
    """Opens the store (migrating if asked), yields the wired app, closes it all."""
    verify_assets()
    keys = load_keys(settings)
    database = open_database(settings.database_url, pool_size=settings.db_pool_size)
    try:
        await ensure_schema(database, settings.migrate_on_start)
        writer = GroupCommitWriter(database, workers=settings.db_writers)
        writer.start()
        access_log = JsonLinesAccessLog() if settings.access_log else NoAccessLog()
        try:
            yield App(settings, database, keys, build_services(settings, database, writer), access_log)
        finally:
            await writer.stop()
            access_log.close()
    finally:
        await database.dispose()
