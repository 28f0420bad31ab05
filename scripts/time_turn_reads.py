"""Times, in process (no gRPC), each store read a BuildContext turn makes: recall's digest
reads, known facts' memory reads, the working set's sources, session data. The app's stores
(open_app, as tests/integration builds them) over a seeded agent: USERS users with DIGESTS
ready digests each (a few pending), MEMORIES memories each, one open episode with messages.
Every read runs on the quick-read path (SQLite: the loop thread's inline connection;
PostgreSQL: the pool), so what is timed is the read's own CPU, not a thread hop. Prints the
median microseconds per call over many calls, next to a trivial `SELECT 1` on the same path.

    .venv/bin/python scripts/time_turn_reads.py
    .venv/bin/python scripts/time_turn_reads.py --database-url postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
from sqlalchemy import Connection, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from episodic.bootstrap.containers import App, Replacements
from episodic.bootstrap.lifecycle import open_app
from episodic.config import EmbedderKind, Settings
from episodic.domain.agents import AgentDraft
from episodic.domain.log import PreparedMessage
from episodic.domain.memories import Memory, MemoryKind, MemoryOrigin, MemoryState, Source
from episodic.domain.model import Caller, NewMessage, Role
from episodic.domain.ports.memories import MemoryFilter
from episodic.domain.recall import DigestState, Scope
from episodic.store import lexical
from episodic.store import schema as s
from episodic.store.database import Database
from episodic.store.memories import memory_values

USERS, DIGESTS, PENDING, MEMORIES, MESSAGES = 4, 120, 3, 40, 30
WORDS = ("trip", "paris", "budget", "flight", "hotel", "museum", "dinner", "wine", "train", "tickets")
QUERY = "what did we plan for the paris museum trip budget"
_SELECT_1 = text("SELECT 1")


class InlineReads:
    """The app's Database with every read on the quick-read path (see module docstring)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def read(self, read: Callable[[Connection], Any], batch: Any = None) -> Any:
        return await self._db.quick_read(read)

    async def quick_read(self, read: Callable[[Connection], Any], batch: Any = None) -> Any:
        return await self._db.quick_read(read)


def _body(i: int) -> str:
    return " ".join(WORDS[(i + k) % len(WORDS)] for k in range(8)) + f" note{i}"


def _seed_rows(tenant: str, agent: str, now: datetime) -> dict[str, list[dict[str, Any]]]:
    rows: dict[str, list[dict[str, Any]]] = {"episodes": [], "digests": [], "texts": [], "memories": []}
    for u in range(USERS):
        user = f"user{u}"
        for i in range(DIGESTS + PENDING):
            episode = f"ep-{u}-{i}"
            ended = now - timedelta(hours=i + 1)
            started = ended - timedelta(minutes=20)
            state = DigestState.READY if i < DIGESTS else DigestState.PENDING
            key = {"tenant_id": tenant, "episode_id": episode, "agent_id": agent, "user_id": user}
            rows["episodes"].append(
                key
                | {"state": "closed", "token_encoding": "cl100k_base", "started_at": started}
                | {"ended_at": ended, "close_reason": "client", "close_note": "", "metadata": {}}
                | {"message_count": 0, "token_count": 0, "last_activity_at": ended}
            )
            rows["digests"].append(
                key
                | {"state": state.value, "summary": _body(i), "key_facts": [_body(i + 1)]}
                | {"embedding_model": "m", "attempts": 0, "last_error": "", "next_attempt_at": ended}
                | {"started_at": started, "ended_at": ended, "updated_at": ended}
            )
            if state is DigestState.READY:
                token = lexical.scope_token(Scope(tenant, agent, user))
                rows["texts"].append(key | {"body": _body(i), "scope": token})
        for i in range(MEMORIES):
            created = now - timedelta(hours=i)
            memory = Memory(
                tenant_id=tenant,
                memory_id=f"mem-{u}-{i}",
                agent_id=agent,
                user_id=user,
                text=_body(i),
                kind=MemoryKind.FACT,
                source=Source(MemoryOrigin.CLIENT, "", 0, 0),
                state=MemoryState.PROMOTED,
                created_at=created,
                updated_at=created,
            )
            rows["memories"].append(memory_values(memory) | {"model": "", "dimension": 0, "vector": None})
    return rows


def _insert(conn: Connection, rows: dict[str, list[dict[str, Any]]]) -> None:
    conn.execute(s.episodes.insert(), rows["episodes"])
    conn.execute(s.digests.insert(), rows["digests"])
    conn.execute(s.digest_texts.insert(), rows["texts"])
    conn.execute(s.memories.insert(), rows["memories"])


async def seed(app: App, caller: Caller) -> tuple[Scope, str]:
    """The agent, its users' digests and memories, and user0's open episode with messages."""
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    await app.services.agents.create_agent(caller, AgentDraft(agent, model="gpt-4o"))
    now = datetime.now(UTC)
    rows = _seed_rows(caller.tenant_id, agent, now)
    await app.adapters.writer.run(lambda conn: _insert(conn, rows))
    episode, _ = await app.services.episodes.open_episode(caller, agent_id=agent, user_id="user0")
    for i in range(MESSAGES):
        role = Role.USER if i % 2 == 0 else Role.ASSISTANT
        prepared = PreparedMessage(NewMessage(role, _body(i)), 12, "cl100k_base")
        await app.adapters.episodes.append(caller.tenant_id, episode.episode_id, [prepared])
    if not app.database.is_sqlite:  # statistics, as autovacuum would gather: else plans for empty tables
        async with app.database.engine.begin() as conn:
            await conn.exec_driver_sql("ANALYZE")
    return Scope(caller.tenant_id, agent, "user0"), episode.episode_id


def turn_reads(app: App, scope: Scope, episode_id: str) -> dict[str, Callable[[], Awaitable[Any]]]:
    """The store calls of one BuildContext turn (service/recall.py, turn_searches.py,
    context.py), with arguments like a turn's."""
    a = app.adapters
    db = InlineReads(app.database)
    for store in (a.digests, a.memories, a.context, a.sessions, a.agents, a.episodes):
        setattr(store, "_db", db)  # noqa: B010 (the SQL stores' own attribute, not in their ports)
    now = datetime.now(UTC)
    week = (now - timedelta(days=7), now)
    ids = [f"ep-0-{i}" for i in range(0, 60, 3)]
    memory_ids = [f"mem-0-{i}" for i in range(0, 30, 2)]
    promoted = MemoryFilter(state=MemoryState.PROMOTED)
    tenant = scope.tenant_id
    return {
        "SELECT 1": lambda: app.database.quick_read(lambda c: c.execute(_SELECT_1).scalar()),
        "digests.pending_count": lambda: a.digests.pending_count(scope),
        "digests.recent": lambda: a.digests.recent(scope, 8, None, None),
        "digests.recent(period)": lambda: a.digests.recent(scope, 8, *week),
        "digests.ready_among(20)": lambda: a.digests.ready_among(scope, ids, None, None),
        "digests.ready_among(20,period)": lambda: a.digests.ready_among(scope, ids, *week),
        "digests.lexical": lambda: a.digests.lexical(scope, QUERY, 16),
        "memories.page(promoted,8)": lambda: a.memories.page(scope, promoted, now, None, 8),
        "memories.among(15)": lambda: a.memories.among(scope, memory_ids, MemoryFilter(), now),
        "memories.pending": lambda: a.memories.pending(tenant, episode_id),
        "sessions.get": lambda: a.sessions.get(tenant, episode_id),
        "context.sources(cached)": lambda: a.context.sources(tenant, episode_id, 0, MESSAGES, 2000),
        "context.sources(cold)": lambda: a.context.sources(tenant, episode_id, 0, None, 2000),
        "context.spoken(4)": lambda: a.context.spoken(tenant, [episode_id, *ids[:3]], 400),
        "agents.get_agent": lambda: a.agents.get_agent(tenant, scope.agent_id),
        "episodes.get_episode": lambda: a.episodes.get_episode(tenant, episode_id),
    }


async def median_us(call: Callable[[], Awaitable[Any]], calls: int) -> float:
    for _ in range(50):
        await call()
    times = []
    for _ in range(calls):
        started = time.perf_counter_ns()
        await call()
        times.append(time.perf_counter_ns() - started)
    return statistics.median(times) / 1000


@asynccontextmanager
async def database(url: str | None) -> AsyncIterator[str]:
    """A SQLite file in a temporary folder, or a PostgreSQL database of our own, dropped after."""
    if url is None:
        with tempfile.TemporaryDirectory() as folder:
            yield f"sqlite:///{folder}/turn.db"
        return
    name = f"time_turn_reads_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def main(url: str | None, calls: int, rounds: int) -> None:
    async with database(url) as db_url:
        settings = Settings(
            database_url=db_url, embedder=EmbedderKind.HASHING, insecure_dev=True, access_log=False,
            migrate_on_start=True,
        )  # fmt: skip
        async with open_app(settings, replace=Replacements(background=False)) as app:
            caller = Caller(f"tenant-{uuid.uuid4().hex[:8]}")
            scope, episode_id = await seed(app, caller)
            reads = turn_reads(app, scope, episode_id)
            medians: dict[str, list[float]] = {name: [] for name in reads}
            for _ in range(rounds):  # rounds interleave the reads, so drift hits all alike
                for name, call in reads.items():
                    medians[name].append(await median_us(call, calls))
    report(medians)


def report(medians: dict[str, list[float]]) -> None:
    reference = statistics.median(medians["SELECT 1"])
    total = 0.0
    print(f"{'read':32} {'us/call':>9} {'x SELECT 1':>11}")
    for name, values in medians.items():
        us = statistics.median(values)
        total += us if name != "SELECT 1" else 0.0
        print(f"{name:32} {us:9.1f} {us / reference:11.2f}")
    print(f"{'sum of reads':32} {total:9.1f} {total / reference:11.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=None, help="a PostgreSQL server's URL (default: SQLite)")
    parser.add_argument("--calls", type=int, default=400, help="calls per read per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds over all reads (median of medians)")
    args = parser.parse_args()
    asyncio.run(main(args.database_url, args.calls, args.rounds))
