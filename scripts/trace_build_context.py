"""What one BuildContext costs the server: a warm turn of the default agent (HYBRID recall,
known facts) with a new question, appended as the user message, on SQLite, in-process.

    .venv/bin/python scripts/trace_build_context.py [--turns 200] [--echoes 2000] [--knowledge]
    git archive REV server clients/python/src | tar -x -C /tmp/episodic_before
    .venv/bin/python scripts/trace_build_context.py --compare /tmp/episodic_before

--history N --budget T: the episode already holds N messages and the agent's budget is T
tokens, so a long conversation's start is compacted and each turn also searches it for
"[Earlier in this conversation]" (e.g. --history 600 --budget 2000).

--knowledge gives the agent documents (a travel guide of 40 chunks), so each turn also
searches and renders the agent's knowledge.

--compare DIR also measures the tree found in DIR (server/ and clients/python/src/ from before
a change: the client's stubs must match that server's protos), in a child process, and prints
both side by side.

Prints, for one warm turn:
- files and calls: Python function calls on the event loop's thread (sys.setprofile), and
  the distinct files under server/episodic they ran in;
- SQL round trips: statements sent on any of the app's engines (a `before_cursor_execute`
  event), without BEGIN / COMMIT / SAVEPOINT / PRAGMA; and database calls: the reads
  (`Database.read` / `quick_read`) and writes (one per operation the group-commit writer
  runs) they were sent in;
and the server's CPU per turn over --turns turns (time.process_time: every thread of the
process, so SQLite's reader and writer threads count too), against its CPU per Echo over
--echoes Echo calls made through the real gRPC server by a client in another process."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from sqlalchemy import Engine, event

import episodic
from episodic.bootstrap.containers import App
from episodic.bootstrap.lifecycle import open_app, serve_app
from episodic.config import Settings
from episodic.domain.model import Caller
from episodic.service.context import ContextRequest
from episodic.store.database import Database
from episodic.store.writer import GroupCommitWriter
from episodic_client import AsyncEpisodicClient
from episodic_client.requests import message_input
from episodic_client.v1 import agent_pb2

PACKAGE = str(Path(episodic.__file__).resolve().parent)
QUESTIONS = [
    "What did we decide about the hotel in Kyoto?",
    "How much was the rail pass again?",
    "Which temple did my sister want to see first?",
    "Remind me what the budget for dinner was.",
    "When does the cherry blossom season start?",
    "Did we book the quiet room near Gion?",
    "What was the museum we skipped because of the rain?",
    "Where is the market we walked to after lunch?",
]
PAST = [
    ("user", "We are planning a trip to Kyoto in April with my sister."),
    ("assistant", "Lovely: cherry blossoms peak early April. Shall I look at hotels near Gion?"),
    ("user", "Yes, a quiet hotel, budget about 20000 yen a night. She wants Kiyomizu temple first."),
    ("assistant", "Noted: quiet hotel near Gion, 20000 yen a night, Kiyomizu-dera on day one."),
    ("user", "Also a 7-day rail pass; it was 50000 yen last time."),
    ("assistant", "The 7-day JR pass is 50000 yen; worth it with a Hiroshima day trip."),
]
ECHO_CLIENT = textwrap.dedent(
    """
    import sys
    from episodic_client import EpisodicClient
    with EpisodicClient(sys.argv[1], timeout=30) as client:
        for _ in range(int(sys.argv[2])):
            client.echo(b"x" * 64)
    """
)


def question(turn: int) -> str:
    return f"{QUESTIONS[turn % len(QUESTIONS)]} (turn {turn})"


class Turns:
    def __init__(self, app: App, episode_id: str) -> None:
        self.app = app
        self.caller = Caller(app.settings.dev_tenant)
        self.episode_id = episode_id
        self.n = 0

    async def one(self) -> None:
        """Under a SERVER span of the app's provider, as the gRPC instrumentation makes one."""
        self.n += 1
        r = ContextRequest(self.episode_id, user_message=question(self.n), append_user_message=True)
        with self.rpc_span():
            await self.app.services.context.build(self.caller, r)

    def rpc_span(self) -> AbstractContextManager[object]:
        tracer = self.app.tracing.provider.get_tracer("episodic.trace")
        return tracer.start_as_current_span("/episodic.v1.ContextService/BuildContext")


def engines(app: App) -> list[Engine]:
    db = app.database
    found = [db.engine.sync_engine]
    if db.sqlite_writer is not None:
        found.append(db.sqlite_writer)
    if db.sqlite_readers is not None:
        found += [db.sqlite_readers.engine, db.sqlite_readers.inline]
    return found


@contextmanager
def database_calls() -> Iterator[list[str]]:
    """Each read and write the turn asks of the database, by name."""
    made: list[str] = []
    patched = [(Database, "read"), (Database, "quick_read"), (GroupCommitWriter, "run")]
    patched += [(GroupCommitWriter, "run_bulk")]
    originals = [(cls, name, getattr(cls, name)) for cls, name in patched]

    inside: list[str] = []  # on PostgreSQL quick_read calls read: one call, not two

    def counting(name: str, original: Any) -> Any:
        async def call(self: Any, *args: Any) -> Any:
            if not inside:
                made.append(name)
            inside.append(name)
            try:
                return await original(self, *args)
            finally:
                inside.pop()

        return call

    for cls, name, original in originals:
        setattr(cls, name, counting(name, original))
    try:
        yield made
    finally:
        for cls, name, original in originals:
            setattr(cls, name, original)


@contextmanager
def statements(app: App) -> Iterator[list[str]]:
    sent: list[str] = []

    def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        word = statement.lstrip().split(None, 1)[0].upper()
        if word not in {"BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "PRAGMA"}:
            sent.append(" ".join(statement.split())[:110])

    for engine in engines(app):
        event.listen(engine, "before_cursor_execute", before)
    try:
        yield sent
    finally:
        for engine in engines(app):
            event.remove(engine, "before_cursor_execute", before)


async def traced(turns: Turns) -> tuple[int, int, Counter[str]]:
    """(calls, calls in episodic, calls per episodic file) of one turn, on this thread."""
    calls = 0
    files: Counter[str] = Counter()

    def profile(frame: FrameType, what: str, arg: object) -> None:
        nonlocal calls
        if what == "call":
            calls += 1
            name = frame.f_code.co_filename
            if name.startswith(PACKAGE):
                files[name[len(PACKAGE) + 1 :]] += 1

    sys.setprofile(profile)
    try:
        await turns.one()
    finally:
        sys.setprofile(None)
    return calls, sum(files.values()), files


async def cpu_per_turn(turns: Turns, count: int) -> float:
    started = time.process_time()
    for _ in range(count):
        await turns.one()
    return (time.process_time() - started) / count


async def cpu_per_echo(address: str, count: int) -> float:
    started = time.process_time()
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", ECHO_CLIENT, address, str(count))
    if await child.wait() != 0:
        raise SystemExit("the echo client failed")
    return (time.process_time() - started) / count


async def setup(client: AsyncEpisodicClient, history: int, budget: int) -> str:
    memory = agent_pb2.MemoryConfig(max_working_memory_tokens=budget) if budget else None
    await client.create_agent("tracer", model="gpt-4o", memory_config=memory)
    past = (await client.open_episode("tracer", "user-1")).episode.episode_id
    await client.add_messages(past, [message_input(role, text) for role, text in PAST])
    await client.close_episode(past, wait_for_digest=True)
    current = (await client.open_episode("tracer", "user-1")).episode.episode_id
    said = [message_input(role, f"{text} ({i})") for i, (role, text) in enumerate(PAST * (history // 6 + 1))]
    for start in range(0, history, 500):  # a long conversation: its start is compacted, then recalled
        await client.add_messages(current, said[start : min(start + 500, history)])
    return current


GUIDE = "\n\n".join(
    f"## {place}\n\n{place} is worth a visit in spring; tickets cost {n * 500} yen and the quiet hours "
    f"are before ten. Trains from Kyoto station take {n} minutes; bring cash for the small shops."
    for n, place in enumerate(
        [
            f"{site} {part}"
            for site in ("Gion", "Arashiyama", "Fushimi", "Nara", "Uji")
            for part in "ABCDEFGH"
        ],
        start=1,
    )
)


async def give_knowledge(app: App) -> None:
    from episodic.domain.knowledge import DocumentDraft

    caller = Caller(app.settings.dev_tenant)
    await app.services.knowledge.create(
        caller, "tracer", [DocumentDraft("guide", GUIDE, title="Kyoto guide")]
    )


async def measure(
    turn_count: int, echo_count: int, knowledge: bool = False, history: int = 4, budget: int = 0
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            address="127.0.0.1:0",
            database_url=f"sqlite:///{Path(tmp) / 'trace.db'}",
            insecure_dev=True,
            migrate_on_start=True,
            embedder="hashing",
            access_log=False,
        )
        async with open_app(settings) as app, serve_app(app, grace_seconds=1) as server:
            address = f"127.0.0.1:{server.port}"
            async with AsyncEpisodicClient(address, timeout=60) as client:
                episode_id = await setup(client, history, budget)
            if knowledge:
                await give_knowledge(app)
            turns = Turns(app, episode_id)
            for _ in range(5):  # warm: caches, the token encoding, the scope's index
                await turns.one()
            with statements(app) as sent, database_calls() as made:
                await turns.one()
            calls, ours, files = await traced(turns)
            build = await cpu_per_turn(turns, turn_count)
            await cpu_per_echo(address, 200)  # warm the server's Echo path
            echo = await cpu_per_echo(address, echo_count)
    return {
        "package": PACKAGE,
        "files": len(files),
        "calls": calls,
        "episodic_calls": ours,
        "per_file": files.most_common(),
        "sql": sent,
        "db_calls": made,
        "build_ms": build * 1000,
        "echo_ms": echo * 1000,
        "turns": turn_count,
        "echoes": echo_count,
    }


def show(label: str, m: dict[str, Any], show_sql: bool, show_files: bool) -> None:
    print(f"{label}: {m['package']}")
    print(f"  files under server/episodic: {m['files']}")
    print(f"  function calls: {m['calls']} ({m['episodic_calls']} in server/episodic)")
    print(f"  SQL round trips: {len(m['sql'])} statements in {len(m['db_calls'])} database calls")
    if show_sql:
        print(f"    database calls: {', '.join(m['db_calls'])}")
        for s in m["sql"]:
            print(f"    {s}")
    if show_files:
        for name, n in m["per_file"]:
            print(f"    {n:>5}  {name}")
    print(f"  server CPU per BuildContext: {m['build_ms']:.2f} ms (mean of {m['turns']} turns)")
    print(f"  server CPU per Echo (gRPC): {m['echo_ms']:.3f} ms (mean of {m['echoes']} calls)")
    print(f"  ratio BuildContext / Echo: {m['build_ms'] / m['echo_ms']:.1f}x")


def measure_elsewhere(
    root: str, turn_count: int, echo_count: int, history: int, budget: int
) -> dict[str, Any]:
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([f"{root}/server", f"{root}/clients/python/src"])}
    argv = [sys.executable, __file__, "--json", "--turns", str(turn_count), "--echoes", str(echo_count)]
    argv += ["--history", str(history), "--budget", str(budget)]
    out = subprocess.run(argv, env=env, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--echoes", type=int, default=2000)
    parser.add_argument("--sql", action="store_true", help="print each statement")
    parser.add_argument("--files", action="store_true", help="print calls per file")
    parser.add_argument(
        "--compare", metavar="DIR", help="a directory holding server/ and clients/python/src/ of before"
    )
    parser.add_argument("--knowledge", action="store_true", help="the agent holds documents")
    parser.add_argument("--history", type=int, default=4, help="messages already in the episode")
    parser.add_argument("--budget", type=int, default=0, help="the agent's max_working_memory_tokens")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    before = None
    if args.compare:
        before = measure_elsewhere(args.compare, args.turns, args.echoes, args.history, args.budget)
    after = asyncio.run(measure(args.turns, args.echoes, args.knowledge, args.history, args.budget))
    if args.json:
        print(json.dumps(after))
        return
    print("one warm BuildContext (default agent, new question appended, SQLite, in-process)")
    if before is not None:
        ratio_before = before["build_ms"] / before["echo_ms"]
        ratio_after = after["build_ms"] / after["echo_ms"]
        show("before", before, args.sql, args.files)
        show("after", after, args.sql, args.files)
        print(
            f"calls {before['calls']} -> {after['calls']} ({before['calls'] / after['calls']:.2f}x fewer), "
            f"files {before['files']} -> {after['files']}, "
            f"SQL statements {len(before['sql'])} -> {len(after['sql'])}, "
            f"database calls {len(before['db_calls'])} -> {len(after['db_calls'])}, "
            f"CPU {before['build_ms']:.2f} -> {after['build_ms']:.2f} ms "
            f"({ratio_before:.1f}x -> {ratio_after:.1f}x Echo)"
        )
    else:
        show("this tree", after, args.sql, args.files)


if __name__ == "__main__":
    main()
