"""Where a BuildContext's milliseconds go, as the client sees them: a wall-clock breakdown of
one turn, every wait and every piece of work between the client's call and its answer, for
three kinds of turn (the default agent: HYBRID recall, known facts; SQLite; the real gRPC
server, a client on the same event loop):

- warm, same question: the conversation's working set held, the question embedded already;
- warm, new question: a new text to embed each turn;
- first after a restart: the app closed and opened again on the same database, then the first
  turn of each conversation (after one turn of another conversation, so the process-wide
  warm-up is not counted), and the next turn of each beside it. The restarted server's warm
  start (`warm_start_conversations`) has read the conversations back by then; `--cold` turns
  it off, so each first turn reads its own.

    .venv/bin/python scripts/turn_breakdown.py [--turns 40] [--conversations 12] [--embedder minilm]
    .venv/bin/python scripts/turn_breakdown.py --history 600 --budget 2000   # a long conversation

`--history N --budget T`: the warm conversation already holds N messages more and the agent's
budget is T tokens, so its start is compacted and every warm turn also searches it for
"[Earlier in this conversation]" (the live-episode recall; its row is "earlier").

Each row is the median over the turns of a stretch of the request's path, measured by
monotonic stamps taken by wrappers this script puts around the server's functions (nothing
in the server is changed to be measured). The top-level rows follow each other on the
event loop's path and sum, with "unaccounted", to the client's latency; indented rows split
the row above (queue waits versus work on the writer's or the embedding's thread). Rows
marked "beside" run on another thread while the loop does something else: they are not
added. Also prints Echo's latency measured the same way in the same run, and the first-turn /
next-turn p50 ratio after the restart."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from episodic.bootstrap.lifecycle import open_app, serve_app
from episodic.cli.serve import hand_over_the_gil_sooner
from episodic.config import Settings
from episodic.config.choices import EmbedderKind
from episodic.edges.grpc import context_convert
from episodic.edges.grpc.context import ContextServicer
from episodic.service import context as context_module
from episodic.service.context import ContextService
from episodic.service.earlier import EarlierRecall
from episodic.service.memory_search import MemorySearch
from episodic.service.model_calls import ModelCallRecorder
from episodic.service.passages import Passages
from episodic.service.turn_searches import TurnSearches
from episodic.state.digest_memo import RememberedDigestReads
from episodic.state.index_cache import ResidentScopes
from episodic.state.query_vectors import QueryVectors
from episodic.state.working_set import WorkingSetCache
from episodic.store.context import SqlContextStore
from episodic.store.writer import GroupCommitWriter
from episodic_client import AsyncEpisodicClient
from episodic_client.requests import message_input
from episodic_client.v1 import agent_pb2

QUESTIONS = [
    "What did we decide about the hotel in Kyoto?",
    "How much was the rail pass again?",
    "Which temple did my sister want to see first?",
    "Remind me what the budget for dinner was.",
    "When does the cherry blossom season start?",
    "Did we book the quiet room near Gion?",
]
PAST = [
    ("user", "We are planning a trip to Kyoto in April with my sister."),
    ("assistant", "Lovely: cherry blossoms peak early April. Shall I look at hotels near Gion?"),
    ("user", "Yes, a quiet hotel, budget about 20000 yen a night. She wants Kiyomizu temple first."),
    ("assistant", "Noted: quiet hotel near Gion, 20000 yen a night, Kiyomizu-dera on day one."),
    ("user", "Also a 7-day rail pass; it was 50000 yen last time."),
    ("assistant", "The 7-day JR pass is 50000 yen; worth it with a Hiroshima day trip."),
]


class Stamps:
    """The intervals of the turn being measured, by row name (ms), and the points in it."""

    def __init__(self) -> None:
        self.on = False
        self.rows: dict[str, float] = defaultdict(float)
        self.points: dict[str, float] = {}
        self.submitted: dict[int, float] = {}  # a write's future id -> when it was queued
        self.stream_ended = asyncio.Event()  # the handler's stream ended (its record durable)

    def start(self) -> None:
        self.on = True
        self.rows = defaultdict(float)
        self.points = {}
        self.stream_ended = asyncio.Event()

    def add(self, row: str, started: float, ended: float) -> None:
        if self.on:
            self.rows[row] += (ended - started) * 1000

    def point(self, name: str) -> None:
        if self.on:
            self.points.setdefault(name, time.perf_counter())


STAMPS = Stamps()
_CURRENT_WRITE: list[str] = []  # the row the next write's stamps go to (one turn in flight)


def _timed(row: str, original: Callable[..., Any]) -> Callable[..., Any]:
    async def call(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await original(*args, **kwargs)
        finally:
            STAMPS.add(row, started, time.perf_counter())

    return call


def _timed_sync(row: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            STAMPS.add(row, started, time.perf_counter())

    return call


def _write_as(row: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """The writes made inside `original` are filed under `row`."""

    async def call(*args: Any, **kwargs: Any) -> Any:
        _CURRENT_WRITE.append(row)
        STAMPS.point(f"start of {row}")
        started = time.perf_counter()
        try:
            return await original(*args, **kwargs)
        finally:
            STAMPS.add(row, started, time.perf_counter())
            _CURRENT_WRITE.pop()

    return call


def _servicer(original: Any) -> Any:
    async def build(self: Any, request: Any, context: Any) -> AsyncIterator[Any]:
        STAMPS.point("handler")
        started = time.perf_counter()
        resumed = started
        async for frame in original(self, request, context):
            STAMPS.point("built")
            if frame.HasField("report") and not frame.messages and "report frame" in STAMPS.points:
                # the report waited for the user message to be durable
                STAMPS.add(TOP[9], resumed, STAMPS.points["report frame"])
            elif frame.HasField("report") and "frame made" in STAMPS.points:
                # one frame, made while the append commits, sent once it is durable
                STAMPS.add(TOP[9], STAMPS.points["frame made"], time.perf_counter())
            yield frame
            resumed = time.perf_counter()
            if frame.HasField("report"):  # the client has its answer; the record may still commit
                first = min(STAMPS.points.get(p, resumed) for p in ("built", "frame made"))
                STAMPS.add(TOP[10], first, resumed)
                STAMPS.rows[TOP[10]] -= STAMPS.rows.get(TOP[9], 0.0)
                STAMPS.point("handler_end")
        STAMPS.stream_ended.set()

    return build


def _one_frame(original: Any) -> Any:
    def frame(call: Any, max_frame_bytes: int) -> Any:
        made = original(call, max_frame_bytes)
        STAMPS.point("frame made")
        return made

    return frame


def _report_frame(original: Any) -> Any:
    def frame(call: Any) -> Any:
        STAMPS.point("report frame")
        return original(call)

    return frame


def _hold(original: Any) -> Any:
    def held(self: Any, key: Any) -> Any:
        @asynccontextmanager
        async def measured() -> AsyncIterator[None]:
            STAMPS.point("checked")
            started = time.perf_counter()
            async with original(self, key):
                STAMPS.add("conversation lock wait", started, time.perf_counter())
                STAMPS.point("locked")
                yield

        return measured()

    return held


def _submit(original: Any) -> Any:
    async def run(self: Any, make: Any) -> Any:
        row = _CURRENT_WRITE[-1] if _CURRENT_WRITE else "other write"
        started = time.perf_counter()
        marks: dict[str, float] = {}

        staged = False

        def making(future: Any) -> Any:
            nonlocal staged
            pending = make(future)
            staged = pending.executed is not None
            if pending.op is not None:
                pending.op = _thread_marked(pending.op, marks)
            if pending.bulk is not None:
                pending.bulk = _BulkMarked(pending.bulk, marks)
            return pending

        try:
            return await original(self, making)
        finally:
            ended = time.perf_counter()
            first, last = marks.get("first", ended), marks.get("last", ended)
            inner = f"  {row}" if row in TOP else row  # a write beside the turn's path: not added
            STAMPS.add(f"{inner}: queue + hop to the writer thread", started, first)
            STAMPS.add(f"{inner}: the operation (SQL)", first, last)
            if staged:  # answered before its COMMIT: the turn went on meanwhile
                STAMPS.add(f"beside: {row}: COMMIT (fsync), while the turn goes on", last, ended)
            else:
                STAMPS.add(f"{inner}: COMMIT (fsync) + hop back to the loop", last, ended)

    return run


def _embed(original: Any) -> Any:
    def run(self: Any, texts: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(self, texts)
        finally:
            if len(texts) == 1:
                STAMPS.add("beside: query embedding compute (thread)", started, time.perf_counter())

    return run


@contextmanager
def instrumented() -> Iterator[None]:
    """Wraps the server's functions on the turn's path; restored on exit."""
    from episodic.embed.minilm import MiniLmEmbedder

    wrappers: list[tuple[Any, str, Callable[[Any], Any]]] = [
        (ContextServicer, "BuildContext", _servicer),
        (WorkingSetCache, "hold", _hold),
        (SqlContextStore, "sources", lambda o: _timed("working set read", o)),
        (ContextService, "_append_user_message", lambda o: _write_as("append the user message", o)),
        (TurnSearches, "run", lambda o: _timed("searches (recall, known facts, ...)", o)),
        (TurnSearches, "_recall", lambda o: _timed("  recall", o)),
        (TurnSearches, "_known_facts", lambda o: _timed("  known facts", o)),
        (EarlierRecall, "found", lambda o: _timed("  earlier (in this conversation)", o)),
        (QueryVectors, "of", lambda o: _timed("  wait for the query embedding (in the searches)", o)),
        (context_module, "assemble", lambda o: _timed_sync("assembly (under the budget)", o)),
        (ContextService, "_model_call", lambda o: _timed_sync("render the report", o)),
        (ModelCallRecorder, "save", lambda o: _write_as(BESIDE_RECORD, o)),
        (context_convert, "report_frame", _report_frame),
        (context_convert, "one_frame", _one_frame),
        (GroupCommitWriter, "_submit", _submit),
        (MiniLmEmbedder, "embed", _embed),
        # inside the searches, overlapping each other: where a cold turn's extra time goes
        (ResidentScopes, "ensure", lambda o: _timed(f"{INSIDE}: wait for the user's index to load", o)),
        (RememberedDigestReads, "pending_count", lambda o: _timed(f"{INSIDE}: digests' pending count", o)),
        (RememberedDigestReads, "ready_among", lambda o: _timed(f"{INSIDE}: digests of the candidates", o)),
        (RememberedDigestReads, "lexical", lambda o: _timed(f"{INSIDE}: full-text search of digests", o)),
        (Passages, "of", lambda o: _timed(f"{INSIDE}: recalled episodes' messages (passages)", o)),
        (MemorySearch, "ranked", lambda o: _timed(f"{INSIDE}: memories ranked (known facts)", o)),
    ]
    patches = [(owner, name, getattr(owner, name)) for owner, name, _ in wrappers]
    for (owner, name, make), (_, _, original) in zip(wrappers, patches, strict=True):
        setattr(owner, name, make(original))
    try:
        yield
    finally:
        for owner, name, original in reversed(patches):
            setattr(owner, name, original)


def _thread_marked(op: Callable[[Any], Any], marks: dict[str, float]) -> Callable[[Any], Any]:
    def run(conn: Any) -> Any:
        marks.setdefault("first", time.perf_counter())
        try:
            return op(conn)
        finally:
            marks["last"] = time.perf_counter()

    return run


class _BulkMarked:
    def __init__(self, bulk: Any, marks: dict[str, float]) -> None:
        self._bulk, self._marks = bulk, marks

    def __eq__(self, other: object) -> bool:  # items of one bulk op stay one run
        return isinstance(other, _BulkMarked) and other._bulk is self._bulk

    def __hash__(self) -> int:
        return id(self._bulk)

    def run_all(self, conn: Any, items: Any) -> Any:
        self._marks.setdefault("first", time.perf_counter())
        try:
            return self._bulk.run_all(conn, items)
        finally:
            self._marks["last"] = time.perf_counter()


INSIDE = "inside the searches (overlapping)"
BESIDE_RECORD = "beside: model-call record write (while the call is sent, and after)"
TOP = [
    "gRPC receive + interceptors (auth, access log, span)",
    "request checks",
    "conversation lock wait",
    "working set read",
    "checks, PII, budget ceiling, query analysis (before the append)",
    "append the user message",
    "searches (recall, known facts, ...)",
    "assembly (under the budget)",
    "render the report",
    "wait for the user message to be durable (the report acknowledges it), its frame made",
    "frames + stream send (handler's generator)",
    "report sent -> client has the answer (client's join)",
]


async def one_turn(client: AsyncEpisodicClient, episode_id: str, text: str) -> dict[str, float]:
    STAMPS.start()
    started = time.perf_counter()
    await client.build_context(episode_id, user_message=text, append_user_message=True)
    ended = time.perf_counter()
    # the record may still commit: the next turn starts once it has, as after a model call
    await asyncio.wait_for(STAMPS.stream_ended.wait(), 10)
    STAMPS.on = False
    rows = dict(STAMPS.rows)
    p = STAMPS.points
    rows[TOP[0]] = (p["handler"] - started) * 1000
    rows[TOP[1]] = (p["checked"] - p["handler"]) * 1000
    rows[TOP[-1]] = (ended - p["handler_end"]) * 1000
    rows["client latency"] = (ended - started) * 1000
    _before_append(rows, p)
    rows["unaccounted"] = rows["client latency"] - sum(rows.get(r, 0.0) for r in TOP)
    return rows


def _before_append(rows: dict[str, float], p: dict[str, float]) -> None:
    """What the loop does between the lock and the append, less the working set's read."""
    append = p.get("start of append the user message")
    if append is not None:
        rows[TOP[4]] = (append - p["locked"]) * 1000 - rows.get(TOP[3], 0.0)


async def echo_ms(client: AsyncEpisodicClient, count: int) -> float:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        await client.echo(b"x" * 64)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def conversation(client: AsyncEpisodicClient, user: str, history: int = 0) -> str:
    past = (await client.open_episode("tracer", user)).episode.episode_id
    await client.add_messages(past, [message_input(role, text) for role, text in PAST])
    await client.close_episode(past, wait_for_digest=True)
    current = (await client.open_episode("tracer", user)).episode.episode_id
    said = [
        message_input(role, f"{text} ({i})")
        for i, (role, text) in enumerate(PAST * (history // len(PAST) + 1))
    ]
    for start in range(0, history, 500):  # a long conversation: its start is compacted, then searched
        await client.add_messages(current, said[start : min(start + 500, history)])
    await client.add_messages(current, [message_input(role, f"{text} (now)") for role, text in PAST])
    return current


def settings_for(path: Path, embedder: str, cold: bool = False) -> Settings:
    settings = Settings(
        address="127.0.0.1:0",
        database_url=f"sqlite:///{path}",
        insecure_dev=True,
        migrate_on_start=True,
        embedder=EmbedderKind(embedder),
        access_log=False,
    )
    return dataclasses.replace(settings, warm_start_conversations=0) if cold else settings


async def measure(
    turns: int, conversations: int, embedder: str, cold: bool = False, history: int = 0, budget: int = 0
) -> dict[str, Any]:
    kinds: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        settings = settings_for(Path(tmp) / "turns.db", embedder, cold)
        hand_over_the_gil_sooner(settings)  # as `episodic serve` does
        with instrumented():
            async with (
                open_app(settings) as app,
                serve_app(app, grace_seconds=1) as server,
                AsyncEpisodicClient(f"127.0.0.1:{server.port}", timeout=60) as client,
            ):
                memory = agent_pb2.MemoryConfig(max_working_memory_tokens=budget) if budget else None
                await client.create_agent("tracer", model="gpt-4o", memory_config=memory)
                warm = await conversation(client, "warm-user", history)
                episodes = [await conversation(client, f"user-{i}") for i in range(conversations + 1)]
                for i in range(8):
                    await one_turn(client, warm, f"{QUESTIONS[i % len(QUESTIONS)]} (warm-up {i})")
                echo = await echo_ms(client, 200)
                same = QUESTIONS[0]
                await one_turn(client, warm, same)
                kinds["warm, same question"] = [await one_turn(client, warm, same) for _ in range(turns)]
                kinds["warm, new question"] = [
                    await one_turn(client, warm, f"{QUESTIONS[i % len(QUESTIONS)]} (turn {i})")
                    for i in range(turns)
                ]
                echo = statistics.median([echo, await echo_ms(client, 200)])
            async with (
                open_app(settings) as app,
                serve_app(app, grace_seconds=1) as server,
                AsyncEpisodicClient(f"127.0.0.1:{server.port}", timeout=60) as client,
            ):
                if app.workers.warm_start is not None:  # the restarted server read the sets back
                    await app.workers.warm_start.finished()
                await one_turn(client, episodes[0], "A first question, to warm the process.")
                firsts, seconds = [], []
                for i, episode_id in enumerate(episodes[1:]):
                    firsts.append(await one_turn(client, episode_id, f"{QUESTIONS[i % 6]} (first {i})"))
                    seconds.append(await one_turn(client, episode_id, f"{QUESTIONS[(i + 1) % 6]} (next {i})"))
                kinds["first turn after restart"] = firsts
                kinds["its next turn"] = seconds
    return {"kinds": kinds, "echo_ms": echo}


def show(result: dict[str, Any]) -> None:
    kinds: dict[str, list[dict[str, float]]] = result["kinds"]
    names = list(kinds)
    seen: list[str] = []
    for rows in kinds.values():
        for turn in rows:
            seen += [r for r in turn if r not in seen]
    order: list[str] = []
    for top in TOP:
        order.append(top)
        order += [r for r in seen if r.startswith("  ") and _parent(r) == top]
    order += ["unaccounted", "client latency"]
    order += [r for r in seen if r not in order]
    width = max(len(r) for r in order) + 2
    print(f"{'p50 ms over the turns':<{width}}" + "".join(f"{n:>28}" for n in names))
    for row in order:
        values = [statistics.median([t.get(row, 0.0) for t in kinds[n]]) for n in names]
        if all(abs(v) < 0.005 for v in values) and row not in ("unaccounted",):
            continue
        print(f"{row:<{width}}" + "".join(f"{v:>28.2f}" for v in values))
    echo = result["echo_ms"]
    print(f"{'Echo p50 (same client, same run)':<{width}}{echo:>28.2f}")
    lat = {n: statistics.median([t["client latency"] for t in kinds[n]]) for n in names}
    print("client p50 / Echo p50: " + ", ".join(f"{n} {lat[n] / echo:.1f}x" for n in names))
    print("rate as a share of Echo's: " + ", ".join(f"{n} {100 * echo / lat[n]:.1f} %" for n in names))
    first, nxt = lat["first turn after restart"], lat["its next turn"]
    print(f"first turn after restart / its next turn (p50): {first:.2f} / {nxt:.2f} ms = {first / nxt:.2f}x")


def _parent(row: str) -> str:
    name = row.strip()
    if name.startswith(("recall", "known facts", "earlier", "wait for the query")):
        return TOP[6]
    for top in TOP:
        if name.startswith(top + ":"):
            return top
    return ""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=40, help="warm turns of each kind")
    parser.add_argument("--conversations", type=int, default=12, help="conversations restarted")
    parser.add_argument("--embedder", default="minilm", choices=[k.value for k in EmbedderKind])
    parser.add_argument(
        "--cold",
        action="store_true",
        help="no warm start: a restarted conversation is read on its first turn",
    )
    parser.add_argument("--history", type=int, default=0, help="messages more in the warm conversation")
    parser.add_argument("--budget", type=int, default=0, help="the agent's max_working_memory_tokens")
    args = parser.parse_args()
    kinds = (args.turns, args.conversations, args.embedder, args.cold, args.history, args.budget)
    show(asyncio.run(measure(*kinds)))


if __name__ == "__main__":
    main()
