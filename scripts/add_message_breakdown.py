"""Where a durable AddMessage's milliseconds go, as the client sees them: a wall-clock
breakdown of one call (one call in flight, SQLite by default, the real gRPC server in this
process, a Python client in a subprocess as the bench's is), with Echo measured by the same
client in the same run, interleaved with the adds.

    .venv/bin/python scripts/add_message_breakdown.py [--calls 400] [--database-url URL]

Each row is the median over the calls of a stretch of the request's path, measured by
monotonic stamps taken by wrappers this script puts around the server's functions (nothing
in the server is changed to be measured), as scripts/turn_breakdown.py does; the client's
stamps are on the same clock (CLOCK_MONOTONIC is system-wide). The top-level
rows follow each other and sum, with "unaccounted", to the client's latency; indented rows
split the row above. The message is the bench's (~200 characters, a fresh client_message_id
per call: the dedup read is part of the cost)."""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from episodic.bootstrap.lifecycle import open_app, serve_app
from episodic.cli.serve import hand_over_the_gil_sooner
from episodic.config import Settings
from episodic.config.choices import EmbedderKind
from episodic.edges.grpc import convert
from episodic.edges.grpc.diagnostics import DiagnosticsServicer
from episodic.edges.grpc.episodes import EpisodeServicer
from episodic.service.episodes import EpisodeService
from episodic.state.working_set import WorkingSetCache
from episodic.store import appends, writer
from episodic.store.writer import GroupCommitWriter

CONTENT = (
    "Could you remind me what we decided about the quarterly report last week? I think "
    "the deadline moved to Friday, and Sam was going to draft the summary section first. "
    "Is that still the plan?"
)
NONE_ON_PATH = "(none on AddMessage's path)"
TOP = [
    "gRPC receive + interceptors (arrival, error edge, auth, shares)",
    "request to domain (new_message_in)",
    "request checks (ids, message validation)",
    "episode facts (cached agent, encoding) + visibility",
    "PII policy (redaction)",
    "token count",
    f"conversation lock wait {NONE_ON_PATH}",
    f"working-set update {NONE_ON_PATH}",
    "queue + hop to the writer thread",
    "the SQL (reads, plan, INSERT, UPDATE)",
    "COMMIT (fsync)",
    "hop back to the loop (future resolved, task resumed)",
    "watchers told + span end",
    "response build (message_out)",
    "handler done -> client has the answer (response send)",
]
SQL_ROWS = [
    "  SQL: episode + dedup + tool-call reads",
    "  SQL: plan (domain)",
    "  SQL: INSERT message, UPDATE episode",
]


class Stamps:
    """Per AddMessage served, in order: its points (monotonic seconds) and timed rows (ms).
    A call's record starts when its handler is entered (one call in flight)."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, float], dict[str, float]]] = []
        self.echoes: list[tuple[float, float]] = []  # each Echo's handler: entered, returned

    def point(self, name: str) -> None:
        if name == "handler":
            self.calls.append(({}, defaultdict(float)))
        if self.calls:
            self.calls[-1][0].setdefault(name, time.monotonic())

    def add(self, row: str, started: float, ended: float) -> None:
        if self.calls:
            self.calls[-1][1][row] += (ended - started) * 1000


STAMPS = Stamps()


def _at(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """Stamps `name` when the (async) function is entered, `name + " done"` when it returns."""

    async def call(*args: Any, **kwargs: Any) -> Any:
        STAMPS.point(name)
        try:
            return await original(*args, **kwargs)
        finally:
            STAMPS.point(f"{name} done")

    return call


def _at_sync(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        STAMPS.point(name)
        try:
            return original(*args, **kwargs)
        finally:
            STAMPS.point(f"{name} done")

    return call


def _timed_sync(row: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return original(*args, **kwargs)
        finally:
            STAMPS.add(row, started, time.monotonic())

    return call


def _timed(row: str, original: Callable[..., Any]) -> Callable[..., Any]:
    async def call(*args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return await original(*args, **kwargs)
        finally:
            STAMPS.add(row, started, time.monotonic())

    return call


def _echo(original: Any) -> Any:
    async def echo(self: Any, request: Any, context: Any) -> Any:
        entered = time.monotonic()
        try:
            return await original(self, request, context)
        finally:
            STAMPS.echoes.append((entered, time.monotonic()))

    return echo


def _hold(original: Any) -> Any:
    def held(self: Any, key: Any) -> Any:
        @asynccontextmanager
        async def measured() -> Any:
            started = time.monotonic()
            async with original(self, key):
                STAMPS.add(TOP[6], started, time.monotonic())
                yield

        return measured()

    return held


@contextmanager
def instrumented() -> Iterator[None]:
    """Wraps the server's functions on AddMessage's path; restored on exit."""
    wrappers: list[tuple[Any, str, Callable[[Any], Any]]] = [
        (EpisodeServicer, "AddMessage", lambda o: _at("handler", o)),
        (DiagnosticsServicer, "Echo", _echo),
        (convert, "new_message_in", lambda o: _at_sync("decode", o)),
        (convert, "message_out", lambda o: _at_sync("encode", o)),
        (EpisodeService, "_append", lambda o: _at("append", o)),
        (EpisodeService, "_facts_of", lambda o: _at("facts", o)),
        (EpisodeService, "_redacted", lambda o: _at("pii", o)),
        (EpisodeService, "_count", lambda o: _timed(TOP[5], o)),
        (EpisodeService, "_store", lambda o: _at("store", o)),
        (GroupCommitWriter, "_submit", lambda o: _at("submit", o)),
        (writer, "commit_batch", lambda o: _at_sync("thread", o)),
        (appends.AppendBulk, "run_all", lambda o: _at_sync("sql", o)),
        (appends, "_load", lambda o: _timed_sync(SQL_ROWS[0], o)),
        (appends, "_plan_one", lambda o: _timed_sync(SQL_ROWS[1], o)),
        (appends, "_flush", lambda o: _timed_sync(SQL_ROWS[2], o)),
        (WorkingSetCache, "hold", _hold),
        (WorkingSetCache, "changed", lambda o: _timed_sync(TOP[7], o)),
    ]
    patches = [(owner, name, getattr(owner, name)) for owner, name, _ in wrappers]
    for (owner, name, make), (_, _, original) in zip(wrappers, patches, strict=True):
        setattr(owner, name, make(original))
    try:
        yield
    finally:
        for owner, name, original in reversed(patches):
            setattr(owner, name, original)


def _ms(p: dict[str, float], start: str, end: str) -> float:
    return (p[end] - p[start]) * 1000


def _rows_of(p: dict[str, float], timed: dict[str, float], started: float, ended: float) -> dict[str, float]:
    rows = {row: timed.get(row, 0.0) for row in (TOP[5], TOP[6], TOP[7], *SQL_ROWS)}
    rows[TOP[0]] = (p["handler"] - started) * 1000
    rows[TOP[1]] = _ms(p, "handler", "decode done")
    rows[TOP[2]] = _ms(p, "decode done", "append")
    rows[TOP[3]] = _ms(p, "append", "pii")
    rows[TOP[4]] = _ms(p, "pii", "pii done")
    before_queue = _ms(p, "pii done", "submit") - rows.get(TOP[5], 0.0)  # counting, spans, hops
    rows[TOP[5]] = rows.get(TOP[5], 0.0) + before_queue
    rows[TOP[8]] = _ms(p, "submit", "sql")
    rows[TOP[9]] = _ms(p, "sql", "sql done")
    rows[TOP[10]] = _ms(p, "sql done", "thread done")
    rows[TOP[11]] = _ms(p, "thread done", "submit done")
    rows[TOP[12]] = _ms(p, "submit done", "append done")
    rows[TOP[13]] = _ms(p, "append done", "handler done")
    rows[TOP[14]] = (ended - p["handler done"]) * 1000
    rows["client latency"] = (ended - started) * 1000
    rows["unaccounted"] = rows["client latency"] - sum(rows.get(r, 0.0) for r in TOP)
    return rows


CLIENT = """
import asyncio, json, sys, time
from episodic_client import AsyncEpisodicClient

async def main(port, warm, rounds, per_round, content):
    adds, echoes = [], []
    async with AsyncEpisodicClient(f"127.0.0.1:{port}", timeout=60) as client:
        await client.create_agent("breakdown", system_prompt="Be brief.", model="gpt-4o")
        episode_id = (await client.open_episode("breakdown", "breakdown-user")).episode.episode_id
        n = 0

        async def add():
            nonlocal n
            n += 1
            started = time.monotonic()
            await client.add_message(episode_id, "user", content, client_message_id=f"m{n}")
            return started, time.monotonic()

        async def echo():
            started = time.monotonic()
            await client.echo(content.encode())
            return started, time.monotonic()

        for _ in range(warm):
            await add()
            await echo()
        for _ in range(rounds):  # interleaved, so both see the same machine
            echoes += [await echo() for _ in range(per_round)]
            adds += [await add() for _ in range(per_round)]
    print(json.dumps({"adds": adds, "echoes": echoes}))

asyncio.run(main(*map(int, sys.argv[1:5]), sys.argv[5]))
"""
WARM, ROUNDS = 50, 4


async def run_client(port: int, calls: int) -> dict[str, Any]:
    """The bench's client shape: another process, one call in flight, one channel."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CLIENT,
        str(port),
        str(WARM),
        str(ROUNDS),
        str(calls // ROUNDS),
        CONTENT,
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"the client failed ({process.returncode})")
    result: dict[str, Any] = json.loads(out)
    return result


def settings_for(database_url: str, access_log: bool) -> Settings:
    return Settings(
        address="127.0.0.1:0",
        database_url=database_url,
        insecure_dev=True,
        migrate_on_start=True,
        embedder=EmbedderKind.HASHING,
        access_log=access_log,
        tenant_rate_per_second=1_000_000,
        tenant_rate_burst=1_000_000,
    )


async def measure(calls: int, database_url: str, access_log: bool) -> dict[str, Any]:
    settings = settings_for(database_url, access_log)
    hand_over_the_gil_sooner(settings)  # as `episodic serve` does
    with instrumented():
        async with open_app(settings) as app, serve_app(app, grace_seconds=1, settle_seconds=0) as server:
            client = await run_client(server.port, calls)
    served = STAMPS.calls[WARM:]
    if len(served) != len(client["adds"]):
        raise RuntimeError(f"{len(served)} AddMessage calls served, {len(client['adds'])} sent")
    adds = [_rows_of(p, timed, s, e) for (p, timed), (s, e) in zip(served, client["adds"], strict=True)]
    echoes = [_echo_rows(h, c) for h, c in zip(STAMPS.echoes[WARM:], client["echoes"], strict=True)]
    return {"adds": adds, "echoes": echoes}


def _echo_rows(handler: tuple[float, float], client: tuple[float, float]) -> dict[str, float]:
    """Echo's stretches that AddMessage also has: to the handler, the handler, after it."""
    return {
        TOP[0]: (handler[0] - client[0]) * 1000,
        "Echo's handler": (handler[1] - handler[0]) * 1000,
        TOP[14]: (client[1] - handler[1]) * 1000,
        "client latency": (client[1] - client[0]) * 1000,
    }


def show(result: dict[str, Any]) -> None:
    adds: list[dict[str, float]] = result["adds"]
    echoes: list[dict[str, float]] = result["echoes"]
    order = [*TOP[:9], TOP[9], *SQL_ROWS, *TOP[10:], "unaccounted", "client latency"]
    width = max(len(r) for r in order) + 2
    print(f"{'p50 ms over the calls':<{width}}{'AddMessage':>12}{'Echo':>12}")
    for row in [*order[:1], "Echo's handler", *order[1:]]:
        add = f"{statistics.median([a[row] for a in adds]):>12.3f}" if row in adds[0] else f"{'':>12}"
        echo = f"{statistics.median([e[row] for e in echoes]):>12.3f}" if row in echoes[0] else ""
        print(f"{row:<{width}}{add}{echo}")
    add_p50 = statistics.median([a["client latency"] for a in adds])
    echo_p50 = statistics.median([e["client latency"] for e in echoes])
    share = 100 * echo_p50 / add_p50
    print(f"AddMessage p50 / Echo p50: {add_p50 / echo_p50:.2f}x; rate as a share of Echo's: {share:.1f} %")
    print("(each row is its own median: the rows' sum need not equal the median latency exactly)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=400, help="AddMessage calls measured (and as many Echo)")
    parser.add_argument("--database-url", default="", help="default: a fresh SQLite file")
    parser.add_argument(
        "--access-log", action="store_true", help="write the access log (stderr), as serve does"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite:///{Path(tmp) / 'adds.db'}"
        show(asyncio.run(measure(args.calls, url, args.access_log)))


if __name__ == "__main__":
    main()
