"""Issue 9, item 12: the first BuildContext after a big import, against the first one after
a restart. Starts an in-process server on a fresh SQLite file, imports MESSAGES messages
into one episode (AddMessages, 500 a batch), times BuildContext three times (first after
the import, second, first after a restart) and prints what each call cost the server.

    .venv/bin/python scripts/import_then_build.py [--messages 100000] [--budget 8000]

Each server life first builds a 2-message episode, so the first calls on the imported one
do not include what any first call in a process pays (loading the token encoding).
"working set" is what the server held in RAM for the episode after the call: messages and
estimated bytes (the cache's own measure)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import random
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from episodic.bootstrap.containers import App
from episodic.bootstrap.lifecycle import open_app, serve_app
from episodic.config import Settings
from episodic_client import AsyncEpisodicClient
from episodic_client.requests import message_input
from episodic_client.v1 import agent_pb2, context_pb2

WORDS = [
    *["the", "trip", "kyoto", "april", "hotel", "budget", "yen", "sister", "cherry", "blossoms"],
    *["book", "early", "quiet", "gion", "train", "pass", "temple", "garden", "dinner", "museum"],
    *["ticket", "weather", "rain", "walk", "river", "market", "lunch", "price", "station", "evening"],
]
BATCH = 500


@dataclasses.dataclass(frozen=True)
class Timed:
    label: str
    seconds: float
    held_messages: int
    held_bytes: int
    compaction: str
    summary_span: tuple[int, int]
    history_span: tuple[int, int]


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30))).capitalize() + "."


@asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[tuple[App, str]]:
    async with open_app(settings) as app, serve_app(app, grace_seconds=1) as server:
        yield app, f"127.0.0.1:{server.port}"


async def import_messages(client: AsyncEpisodicClient, episode_id: str, count: int) -> float:
    rng = random.Random(12)
    started = time.perf_counter()
    for start in range(0, count, BATCH):
        roles = ["user" if (start + i) % 2 == 0 else "assistant" for i in range(min(BATCH, count - start))]
        await client.add_messages(episode_id, [message_input(r, sentence(rng)) for r in roles])
    return time.perf_counter() - started


async def timed_build(app: App, client: AsyncEpisodicClient, episode_id: str, label: str) -> Timed:
    started = time.perf_counter()
    built = await client.build_context(episode_id, user_message="What should we do next?", timeout=600)
    seconds = time.perf_counter() - started
    cached = app.services.context.cache.get((settings_tenant(app), episode_id))
    r = built.report
    return Timed(
        label,
        seconds,
        len(cached.tail) if cached else 0,
        cached.size() if cached else 0,
        context_pb2.Compaction.Name(r.compaction),
        (r.summary_from_seq, r.summary_to_seq),
        (r.history_from_seq, r.history_to_seq),
    )


def settings_tenant(app: App) -> str:
    return app.settings.dev_tenant


def print_row(t: Timed) -> None:
    print(
        f"{t.label:<28} {t.seconds * 1000:>9.0f} ms  working set {t.held_messages:>6} messages "
        f"{t.held_bytes / 1024:>8.0f} KiB  {t.compaction:<22} "
        f"summary {t.summary_span} history {t.history_span}",
        flush=True,
    )


async def main(messages: int, budget: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'import.db'}"
        settings = Settings(
            address="127.0.0.1:0",
            database_url=url,
            insecure_dev=True,
            migrate_on_start=True,
            embedder="hashing",
            access_log=False,
        )
        async with serving(settings) as (app, address), AsyncEpisodicClient(address, timeout=120) as client:
            memory = agent_pb2.MemoryConfig(max_working_memory_tokens=budget)
            await client.create_agent("importer", model="gpt-4o", memory_config=memory)
            episode_id = (await client.open_episode("importer", "user-1")).episode.episode_id
            warm_id = (await client.open_episode("importer", "user-2")).episode.episode_id
            await import_messages(client, warm_id, 2)
            print_row(await timed_build(app, client, warm_id, "process warm-up (2 msgs)"))
            took = await import_messages(client, episode_id, messages)
            print(f"imported {messages} messages in {took:.1f} s ({messages / took:.0f}/s)", flush=True)
            print_row(await timed_build(app, client, episode_id, "first after import"))
            print_row(await timed_build(app, client, episode_id, "second"))
        async with serving(settings) as (app, address), AsyncEpisodicClient(address, timeout=120) as client:
            print_row(await timed_build(app, client, warm_id, "process warm-up (2 msgs)"))
            print_row(await timed_build(app, client, episode_id, "first after restart"))
            print_row(await timed_build(app, client, episode_id, "second after restart"))


if __name__ == "__main__":
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--budget", type=int, default=8000, help="the agent's max_working_memory_tokens")
    args = parser.parse_args()
    asyncio.run(main(args.messages, args.budget))
