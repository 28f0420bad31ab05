"""Digest throughput of the default pipeline (extractive summarizer, MiniLM embedder):
episodes of chat turns are opened, filled and closed through the services of an app opened
by `open_app` without background work, then a Digester over that app's digest store, embedder
and index works through them round by round, as the background task would, and the rounds
are timed. Summarizing and embedding are timed as well, so what remains is SQL and glue."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from episodic.bootstrap.containers import App
from episodic.config import Settings
from episodic.domain.agents import AgentDraft
from episodic.domain.model import Caller, Message, NewMessage, Role
from episodic.domain.ports.models import Embedder, Summarizer
from episodic.domain.recall import DigestText, Scope
from episodic.service.services import Services
from episodic.workers.digester import Digester
from episodic_lab.bench_recall import BenchRecallError
from episodic_lab.bench_recall.chat import turns
from episodic_lab.bench_recall.inprocess import migrated_app

MESSAGES_PER_EPISODE = 20
USERS = 10
AGENT_ID = "digest-bench"


@dataclass(frozen=True, slots=True)
class DigestRun:
    episodes: int
    messages_per_episode: int
    embedder: str
    summarizer: str
    seconds: float  # the digester's rounds, first to last
    summarize_seconds: float
    embed_seconds: float
    texts_embedded: int
    load_seconds: float  # building the embedder (model load)
    fill_seconds: float  # opening, filling and closing the episodes through the services

    @property
    def episodes_per_second(self) -> float:
        return self.episodes / self.seconds if self.seconds > 0 else 0.0

    @property
    def ms_per_episode(self) -> float:
        return self.seconds * 1000 / self.episodes if self.episodes else 0.0


class TimedEmbedder:
    def __init__(self, inner: Embedder) -> None:
        self.inner, self.seconds, self.texts = inner, 0.0, 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        began = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - began
            self.texts += len(texts)


class TimedSummarizer:
    def __init__(self, inner: Summarizer) -> None:
        self.inner, self.seconds = inner, 0.0

    def summarize(self, transcript: Sequence[Message]) -> DigestText:
        began = time.perf_counter()
        try:
            return self.inner.summarize(transcript)
        finally:
            self.seconds += time.perf_counter() - began


async def digest_throughput(workdir: Path, episodes: int, seed: int) -> DigestRun:
    url = f"sqlite:///{workdir / 'digest.db'}"
    settings = Settings(database_url=url, insecure_dev=True, access_log=False)  # default models
    began = time.perf_counter()
    async with migrated_app(settings) as app:
        load_seconds = time.perf_counter() - began
        return await _run(settings, app, episodes, seed, load_seconds)


async def _run(settings: Settings, app: App, episodes: int, seed: int, load_seconds: float) -> DigestRun:
    services = app.services
    caller = Caller(settings.dev_tenant)
    began = time.perf_counter()
    await _closed_episodes(services, caller, episodes, np.random.default_rng(seed))
    fill_seconds = time.perf_counter() - began
    digester, embedder, summarizer = _timed_digester(app)
    began = time.perf_counter()
    while await digester.run_once():
        pass
    seconds = time.perf_counter() - began
    await _check_all_ready(services, caller)
    return DigestRun(
        episodes, MESSAGES_PER_EPISODE, embedder.model_id, settings.summarizer, seconds,
        summarizer.seconds, embedder.seconds, embedder.texts, load_seconds, fill_seconds,
    )  # fmt: skip


def _timed_digester(app: App) -> tuple[Digester, TimedEmbedder, TimedSummarizer]:
    """The component under measure, over the app's own digest store, embedder, summarizer
    and change owner (the app runs no digester of its own: background=False), with the model
    calls timed."""
    embedder = TimedEmbedder(app.adapters.embedder)
    summarizer = TimedSummarizer(app.adapters.summarizer)
    digester = Digester(
        store=app.adapters.digests, summarizer=summarizer, embedder=embedder,
        changes=app.state.visibility, clock=_utc_now,
    )  # fmt: skip
    return digester, embedder, summarizer


def _utc_now() -> datetime:
    return datetime.now(UTC)


async def _closed_episodes(services: Services, caller: Caller, count: int, rng: np.random.Generator) -> None:
    await services.agents.create_agent(caller, AgentDraft(AGENT_ID, model="gpt-4o"))
    for number in range(count):
        episode, _ = await services.episodes.open_episode(
            caller, agent_id=AGENT_ID, user_id=f"user-{number % USERS}"
        )
        roles = (Role.USER, Role.ASSISTANT)
        chat = [NewMessage(roles[i % 2], text) for i, text in enumerate(turns(rng, MESSAGES_PER_EPISODE))]
        await services.episodes.add_messages(caller, episode.episode_id, chat)
        await services.episodes.close_episode(caller, episode.episode_id)


async def _check_all_ready(services: Services, caller: Caller) -> None:
    digests = services.recall.digests
    for user in range(USERS):
        left = await digests.pending_count(Scope(caller.tenant_id, AGENT_ID, f"user-{user}"))
        if left:
            raise BenchRecallError(f"{left} digests of user-{user} are not READY after the digester's rounds")
