"""One throwaway SQLite corpus: migrated by the product's migrations, its agent created
through the product's AgentService (the app opened by `open_app`), then N closed episodes
with READY digests written in bulk (see rows.py)."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

from episodic.config import Settings
from episodic.domain.agents import AgentDraft
from episodic.domain.model import Agent, Caller
from episodic_lab.bench_recall.inprocess import migrated_app
from episodic_lab.bench_recall.layout import Layout
from episodic_lab.bench_recall.rows import Plan, check_time_format, write_rows
from episodic_lab.bench_recall.words import Lexicon

AGENT_ID = "bench-agent"
AGENT_MODEL = "gpt-4o"


@dataclass(frozen=True, slots=True)
class Corpus:
    url: str
    path: Path
    layout: Layout
    seconds: dict[str, float]  # "migrate", then per table (see rows.write_rows)
    dimension: int  # of the app's embedder, which its vectors are made for

    @property
    def build_seconds(self) -> float:
        return sum(self.seconds.values())

    @property
    def file_mib(self) -> float:
        return self.path.stat().st_size / (1 << 20)


async def build_corpus(path: Path, settings: Settings, size: int, lexicon: Lexicon, seed: int) -> Corpus:
    check_time_format()
    url = f"sqlite:///{path}"
    layout = Layout(size, settings.dev_tenant, AGENT_ID)
    began = time.perf_counter()
    agent, (model, dimension) = await _migrate_and_create_agent(url, settings, layout)
    seconds = {"migrate": time.perf_counter() - began}
    seconds |= write_rows(path, Plan(layout, agent.token_encoding, model, lexicon, seed))
    return Corpus(url, path, layout, seconds, dimension)


async def _migrate_and_create_agent(
    url: str, settings: Settings, layout: Layout
) -> tuple[Agent, tuple[str, int]]:
    """The agent, and the model its digests' vectors are said to be made by and their
    dimension (the app's embedder's)."""
    async with migrated_app(dataclasses.replace(settings, database_url=url)) as app:
        services = app.services
        draft = AgentDraft(layout.agent_id, display_name="Recall bench", model=AGENT_MODEL)
        agent = await services.agents.create_agent(Caller(layout.tenant_id), draft)
        return agent, (app.adapters.embedder.model_id, app.adapters.embedder.dimension)
