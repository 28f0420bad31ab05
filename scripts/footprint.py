"""The footprint of active conversations at the seed's sizing (issue 47 items 4 and 5): RSS per
active conversation of a real server, bytes per conversation against the text it holds, where
those bytes go, and the working-set cache's bound holding RSS flat past it.

    .venv/bin/python scripts/footprint.py [--conversations 1000,5000] [--messages 160]
        [--tokens 200] [--budget 32000] [--embedder minilm] [--turns 1] [--bound 250] [--breakdown 200]
    PYTHONPATH=/tmp/before/server .venv/bin/python scripts/footprint.py ...   # another checkout's
        code (`git archive <commit> server | tar -x -C /tmp/before`), here and in the server

Three parts, each printing a table:

1. RSS. The conversations are seeded straight into a SQLite file (an agent with a `--budget`
   token budget, live-episode recall on at its default share; `--messages` messages of about
   `--tokens` tokens each, sentences of an English vocabulary's words): writing
   800k messages through the API would take most of an hour, and writing costs no RSS here
   (BuildContext builds the working set). A server (`episodic serve`, the `--embedder`,
   working-set cache unbounded) then warms each conversation with one BuildContext, as many
   at a time as `--concurrency`; after each count of `--conversations` and once the server
   is idle again (the compacted messages' vectors are made in the background), its VmRSS
   (`--turns 2`: two calls each; a conversation past its budget is compacted by the first,
   and only the second searches and costs what the first compacted, as every later turn does):
   KiB per conversation (over the RSS before the first), the marginal KiB per conversation
   (between two counts), and the text the working sets hold (the server's own estimate of
   their bytes, from /metrics, beside it).
2. The breakdown: the same seeding in this process, `--breakdown` conversations warmed, then
   a walk over what the server holds for them (each object counted once, by id) by structure,
   beside tracemalloc's growth and RSS's. RSS beyond the objects the walk counts (malloc's
   free space inside its heaps, pymalloc's pools): scripts/footprint_probe.py.
3. The bound: a server whose working-set cache holds about `--bound` conversations warms all
   of them in steps; RSS and the cache's count stop growing past the bound.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import socket
import sys
import tempfile
import time
import tracemalloc
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from episodic.bootstrap.lifecycle import open_app  # noqa: E402
from episodic.config import EmbedderKind  # noqa: E402
from episodic.domain.agents import AgentDraft, MemoryDraft  # noqa: E402
from episodic.domain.log import fingerprint  # noqa: E402
from episodic.domain.model import Caller, NewMessage, Role  # noqa: E402
from episodic.domain.working_set import WorkingSet  # noqa: E402
from episodic.service.context import ContextRequest  # noqa: E402
from episodic.store import schema  # noqa: E402
from episodic.tokens.tiktoken_counter import TiktokenCounter  # noqa: E402
from episodic_lab.bench.server_process import UNPACED, running_server  # noqa: E402
from episodic_lab.connect import lab_client  # noqa: E402
from tests.server_harness import settings_for  # noqa: E402

TENANT = "dev"  # --insecure-dev's
AGENT = "footprint-agent"
MODEL = "gpt-4o"
ENCODING = "o200k_base"
SENTENCES = 4096  # the pool messages are made of, each counted once
QUESTION = "What did we decide about {} last time, and is that still the plan?"
UNBOUNDED = str(64 << 30)
IDLE_SECONDS = 1.5  # the server used no CPU this long: the background work is done
IDLE_TIMEOUT_SECONDS = 600.0
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Sizing:
    messages: int
    tokens: int
    budget: int
    embedder: str

    def describe(self) -> str:
        return (
            f"{self.messages} messages of ~{self.tokens} tokens, {self.budget:,}-token budget, "
            f"{self.embedder} embedder, live-episode recall on"
        )


# --- the conversations ---------------------------------------------------------------------


class Texts:
    """Messages of about `tokens` tokens made of sentences of an English vocabulary (BERT's
    whole words, frequent ones more often), each sentence counted once with the episode's
    encoding: the message's stored count is the sum (as close as the seed needs)."""

    def __init__(self, tokens: int, seed: int = 0) -> None:
        vocab = (ROOT / "server/episodic/embed/assets/vocab.txt").read_text().split()
        words = [w for w in vocab if w.isalpha() and len(w) > 1]
        rng = random.Random(seed)
        weights = [1 / (rank + 10) / len(w) ** 1.5 for rank, w in enumerate(words)]  # ~4.2 chars a token
        counter = TiktokenCounter()
        self._rng, self._tokens = rng, tokens
        self._sentences: list[tuple[str, int]] = []
        for _ in range(SENTENCES):
            text = " ".join(rng.choices(words, weights, k=rng.randint(6, 16))).capitalize() + "."
            self._sentences.append((text, counter.count(text, ENCODING)))

    def message(self) -> tuple[str, int]:
        parts, tokens = [], 0
        while tokens < self._tokens:
            text, count = self._sentences[self._rng.randrange(SENTENCES)]
            parts.append(text)
            tokens += count
        return " ".join(parts), tokens


async def seed(url: str, conversations: int, sizing: Sizing) -> list[str]:
    """The agent and the open episodes through the services (the rows they write are the
    server's own), then every message in one executemany per conversation."""
    caller = Caller(TENANT)
    async with open_app(settings_for(url)) as app:
        s = app.services
        memory = MemoryDraft(max_working_memory_tokens=sizing.budget)
        await s.agents.create_agent(
            caller, AgentDraft(AGENT, system_prompt="Be brief.", model=MODEL, memory=memory)
        )
        episodes = await _each(
            conversations,
            lambda n: s.episodes.open_episode(caller, agent_id=AGENT, user_id=f"user-{n % 100}"),
            concurrency=32,
        )
    ids = [e.episode_id for e, _ in episodes]
    texts = Texts(sizing.tokens)
    engine = sa.create_engine(url)
    start = datetime.now(UTC) - timedelta(minutes=5)
    roles = (Role.USER, Role.ASSISTANT)
    with engine.begin() as conn:
        for episode_id in ids:
            rows, total = [], 0
            for seq in range(1, sizing.messages + 1):
                content, tokens = texts.message()
                role = roles[(seq - 1) % 2]
                total += tokens
                rows.append(
                    {
                        "tenant_id": TENANT, "episode_id": episode_id, "seq": seq, "role": role.value,
                        "content": content, "token_count": tokens, "token_encoding": ENCODING,
                        "created_at": start + timedelta(milliseconds=seq), "client_message_id": None,
                        "fingerprint": fingerprint(NewMessage(role, content)), "metadata": None,
                        "tool_calls": None, "tool_result": None,
                    }
                )  # fmt: skip
            conn.execute(schema.messages.insert(), rows)
            conn.execute(
                schema.episodes.update()
                .where(schema.episodes.c.tenant_id == TENANT, schema.episodes.c.episode_id == episode_id)
                .values(message_count=sizing.messages, token_count=total, last_activity_at=datetime.now(UTC))
            )
    engine.dispose()
    return ids


def text_bytes(url: str, ids: Sequence[str]) -> tuple[float, float]:
    """Mean characters of content (ASCII: one byte each in a str) and tokens per conversation."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        chars, tokens = conn.execute(
            sa.select(
                sa.func.sum(sa.func.length(schema.messages.c.content)),
                sa.func.sum(schema.messages.c.token_count),
            )
        ).one()
    engine.dispose()
    return float(chars or 0) / len(ids), float(tokens or 0) / len(ids)


async def _each(count: int, make: Callable[[int], Awaitable[T]], concurrency: int) -> list[T]:
    gate = asyncio.Semaphore(concurrency)

    async def one(n: int) -> T:
        async with gate:
            return await make(n)

    return list(await asyncio.gather(*(one(n) for n in range(count))))


def _shifted(build: Callable[[int], Awaitable[None]], by: int, n: int) -> Awaitable[None]:
    return build(by + n)


def question(n: int) -> str:
    topics = ("the budget", "the launch", "the trip", "the lease", "the migration", "the party")
    return QUESTION.format(topics[n % len(topics)]) + f" ({n})"


# --- part 1 and 3: a server's RSS -----------------------------------------------------------


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


async def idle(pid: int) -> None:
    """Until the server used no CPU for IDLE_SECONDS (background embedding done)."""
    deadline = time.monotonic() + IDLE_TIMEOUT_SECONDS
    last, since = cpu_ticks(pid), time.monotonic()
    while time.monotonic() < deadline:
        await asyncio.sleep(0.25)
        now = cpu_ticks(pid)
        if now - last > 1:  # a tick or two of housekeeping is idle
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= IDLE_SECONDS:
            return


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(port: int) -> dict[str, float]:
    """The working-set gauges of the server's /metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("episodic_working_set_"):
            name, value = line.rsplit(" ", 1)
            found[name.split("{")[0]] = float(value)
    return found


def _gauge(found: dict[str, float], prefix: str) -> float:
    return next((v for k, v in found.items() if k.startswith(prefix)), float("nan"))


@dataclass(frozen=True, slots=True)
class Point:
    warmed: int
    rss_kib: int
    held: float  # working sets in the cache
    held_bytes: float  # their estimated bytes
    evictions: float


@dataclass(slots=True)
class Run:
    points: list[Point] = field(default_factory=list)

    @property
    def base(self) -> Point:
        return self.points[0]


async def serve_and_warm(
    url: str, workdir: Path, ids: Sequence[str], counts: Sequence[int], cache_bytes: str, embedder: str,
    concurrency: int, turns: int = 1,
) -> Run:  # fmt: skip
    """Warms ids[0] first (code paths, the model, the query cache's first entries), then
    ids[1:count + 1] for each count; a point at each, once the server is idle."""
    port = free_port()
    flags = (
        "--embedder", embedder, "--working-set-max-bytes", cache_bytes,
        "--metrics-address", f"127.0.0.1:{port}", *UNPACED,
    )  # fmt: skip
    run = Run()
    async with running_server(url, workdir, flags) as server, lab_client(server.target) as client:

        async def build(n: int) -> None:
            for turn in range(turns):  # the second finds the compacted log the first made
                await client.build_context(ids[n], user_message=question(n + turn))

        async def point(warmed: int) -> None:
            await idle(server.pid)
            gc_note = scrape(port)
            run.points.append(
                Point(
                    warmed,
                    rss_kib(server.pid),
                    _gauge(gc_note, "episodic_working_set_count"),
                    _gauge(gc_note, "episodic_working_set_usage"),
                    _gauge(gc_note, "episodic_working_set_evictions"),
                )
            )
            p = run.points[-1]
            print(
                f"  {warmed:>6} warmed: RSS {p.rss_kib / 1024:8.1f} MiB, {p.held:.0f} working sets held",
                file=sys.stderr,
            )

        await build(0)
        await point(0)
        warmed = 0
        for count in counts:
            await _each(count - warmed, partial(_shifted, build, 1 + warmed), concurrency)
            warmed = count
            await point(count)
    return run


def rss_table(title: str, run: Run, text_each: float) -> str:
    lines = [
        title,
        "| active | RSS MiB | KiB per conversation | marginal KiB per conversation | x text | "
        "working sets held | their estimate, KiB each |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    base = run.base
    lines.append(f"| 0 | {base.rss_kib / 1024:.1f} | | | | | |")
    previous = base
    for p in run.points[1:]:
        each = (p.rss_kib - base.rss_kib) / p.warmed
        marginal = (p.rss_kib - previous.rss_kib) / (p.warmed - previous.warmed)
        estimate = p.held_bytes / p.held / 1024 if p.held else float("nan")
        lines.append(
            f"| {p.warmed:,} | {p.rss_kib / 1024:.1f} | {each:.1f} | {marginal:.1f} | "
            f"{marginal * 1024 / text_each:.2f} | {p.held:.0f} | {estimate:.1f} |"
        )
        previous = p
    lines.append(
        f"(x text: marginal bytes over the {text_each / 1024:.1f} KiB of text each conversation's log has)"
    )
    return "\n".join(lines)


def bound_table(run: Run, bound: int, text_each: float) -> str:
    lines = [
        f"Working-set cache bound at ~{bound:,} conversations (--working-set-max-bytes), warmed in steps:",
        "| warmed | RSS MiB | RSS growth since last, MiB | working sets held | evictions |",
        "|---:|---:|---:|---:|---:|",
    ]
    previous = run.base
    for p in run.points:
        grown = (p.rss_kib - previous.rss_kib) / 1024
        lines.append(
            f"| {p.warmed:,} | {p.rss_kib / 1024:.1f} | {grown:+.1f} | {p.held:.0f} | {p.evictions:.0f} |"
        )
        previous = p
    return "\n".join(lines)


# --- part 2: the breakdown, in this process -------------------------------------------------


class Walk:
    """Bytes by structure, each object counted once (the first structure that reaches it)."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.bytes: Counter[str] = Counter()
        self.objects: Counter[str] = Counter()

    def add(self, what: str, obj: object, size: int | None = None) -> None:
        if obj is None or id(obj) in self.seen or _immortal(obj):
            return
        self.seen.add(id(obj))
        self.bytes[what] += sys.getsizeof(obj) if size is None else size
        self.objects[what] += 1

    def deep(self, what: str, obj: object) -> None:
        """The object and what it holds (containers, dataclasses with slots)."""
        stack = [obj]
        while stack:
            o = stack.pop()
            if o is None or id(o) in self.seen or _immortal(o):
                continue
            self.add(what, o, o.nbytes + 112 if isinstance(o, np.ndarray) else None)
            if isinstance(o, dict):
                stack.extend(o.keys())
                stack.extend(o.values())
            elif isinstance(o, list | tuple | set | frozenset):
                stack.extend(o)
            elif hasattr(o, "__slots__") and not isinstance(o, str | bytes | int | float):
                stack.extend(getattr(o, s, None) for s in _slots(type(o)))


def _slots(cls: type) -> Iterable[str]:
    for klass in cls.__mro__:
        yield from getattr(klass, "__slots__", ())


def _immortal(obj: object) -> bool:
    return isinstance(obj, bool | type) or obj is ... or (isinstance(obj, int) and -5 <= obj <= 256)


def walk_messages(walk: Walk, part: str, messages: Iterable[Any]) -> None:
    for m in messages:
        walk.add(f"{part}: message text", m.content)
        walk.add(f"{part}: Message objects", m)
        walk.add(f"{part}: episode_id strings", m.episode_id)
        walk.add(f"{part}: token_encoding strings", m.token_encoding)
        walk.add(f"{part}: created_at datetimes", m.created_at)
        walk.deep(f"{part}: metadata dicts", m.metadata)
        walk.deep(f"{part}: tool calls and results", m.tool_calls)
        walk.deep(f"{part}: tool calls and results", m.tool_result)
        walk.add(f"{part}: ints", m.seq)
        walk.add(f"{part}: ints", m.token_count)


def walk_tail(walk: Walk, tail: Any) -> None:
    """A tail of columns (domain/tail.py), never iterated (that rebuilds a Message each), or
    a checkout's list of Message objects."""
    if not hasattr(tail, "contents"):
        walk_messages(walk, "tail", tail)
        walk.add("tail: lists", tail)
        return
    for text in tail.contents:
        walk.add("tail: message text", text)
    for name in ("seqs", "times_us", "token_counts", "kind", "kinds", "contents", "client_ids"):
        walk.deep("tail: message columns", getattr(tail, name))
    walk.deep("tail: metadata, tool calls and results", tail.rare)
    walk.add("tail: message columns", tail)


def walk_working_set(walk: Walk, ws: WorkingSet) -> None:
    """Never `deep` on a tuple made here: a freed temporary's id comes back for the next one."""
    walk_tail(walk, ws.tail)
    log = ws.compacted_log
    held = getattr(log, "blocks", None)
    if held is None:  # a checkout before the compacted log held columns: its Message objects
        walk_messages(walk, "compacted log", log.messages)
    else:
        walk.deep("compacted log: message text, zlib blocks", held)
        for name in ("seqs", "times_us", "kind", "kinds", "token_counts", "ends", "episode_id"):
            walk.deep("compacted log: message columns", getattr(log, name))
    rendered = getattr(ws, "rendered", None)  # a checkout before the views were made per turn
    for r in rendered or ():
        walk.add("rendered: RenderedMessage objects", r)
        walk.add("rendered: text not shared with the tail", r.content)
        walk.add("tail: ints", r.tokens)
    walk.add("tail: lists", rendered)
    for name in (
        "terms",
        "term_ends",
        "term_sizes",
        "term_marks",
        "where",
        "times",
        "repeated",
        "repeats",
        "postings",
    ):  # or a dict before
        walk.deep("compacted log: word postings", getattr(log, name, None) if name != "postings" or
                  isinstance(getattr(log, name, None), dict) else None)  # fmt: skip
    walk.deep("compacted log: vectors", log.vectors)
    walk.deep("compacted log: quoted lines", log.quoted)
    walk.deep("compacted log: the rest", log)
    for s in (ws.summary, ws.earlier):
        if s is not None:
            walk.add("summary text", s.content)
            walk.deep("summary: the rest", s)
    walk.deep("working set: episode, agent, object", ws)


async def breakdown(url: str, ids: Sequence[str], sizing: Sizing, concurrency: int) -> str:
    settings = settings_for(url, embedder=EmbedderKind(sizing.embedder), working_set_max_bytes=64 << 30)
    caller = Caller(TENANT)
    async with open_app(settings) as app:
        s = app.services

        async def build(n: int) -> None:
            await s.context.build(caller, ContextRequest(ids[n], question(n)))

        await build(0)
        await _settle(app.state.working_sets, ids[:1])
        gc.collect()
        tracemalloc.start()
        traced0, rss0 = tracemalloc.get_traced_memory()[0], rss_kib(os.getpid())
        await _each(len(ids) - 1, lambda n: build(n + 1), concurrency)
        await _settle(app.state.working_sets, ids)
        gc.collect()
        traced1, rss1 = tracemalloc.get_traced_memory()[0], rss_kib(os.getpid())
        tracemalloc.stop()
        walk = Walk()
        cache = app.state.working_sets
        held = [cache.get((TENANT, e)) for e in ids[1:]]
        for ws in held:
            if ws is not None:
                walk_working_set(walk, ws)
        estimate = sum(ws.size() for ws in held if ws is not None)
        others = _other_caches(walk, app)
    n = len(ids) - 1
    tail = sum(len(ws.tail) for ws in held if ws) / n
    compacted = sum(len(ws.compacted_log) for ws in held if ws) / n
    lines = [
        f"Breakdown in process: {n} conversations warmed ({tail:.0f} messages in the tail and "
        f"{compacted:.0f} in the compacted log each), bytes per conversation:",
        "| structure | KiB per conversation | objects per conversation |",
        "|---|---:|---:|",
    ]
    for what, size in sorted(walk.bytes.items(), key=lambda kv: -kv[1]):
        lines.append(f"| {what} | {size / n / 1024:.1f} | {walk.objects[what] / n:.0f} |")
    total = sum(walk.bytes.values())
    text = sum(v for k, v in walk.bytes.items() if k.endswith("text"))
    zipped = walk.bytes.get("compacted log: message text, zlib blocks", 0)
    if zipped:  # the text they hold, as str: what the blocks stand for
        text += sum(compacted_text_bytes(ws.compacted_log) for ws in held if ws is not None)
    lines += [
        f"| **all of the above** | **{total / n / 1024:.1f}** | |",
        "",
        f"text {text / n / 1024:.1f} KiB of {total / n / 1024:.1f} KiB walked ({total / text:.2f}x"
        + (f"; the compacted log's as zlib blocks: {zipped / n / 1024:.1f} KiB" if zipped else "")
        + "); "
        f"the working-set cache's estimate {estimate / n / 1024:.1f} KiB; "
        f"tracemalloc grew {(traced1 - traced0) / n / 1024:.1f} KiB and RSS {(rss1 - rss0) / n:.1f} KiB "
        "per conversation over the warm-up",
        others,
    ]
    return "\n".join(lines)


def compacted_text_bytes(log: Any) -> int:
    """The compacted log's texts as str objects would hold them (sys.getsizeof)."""
    return sum(sys.getsizeof(log.text(i)) for i in range(len(log)))


async def _settle(cache: Any, ids: Sequence[str]) -> None:
    """Until every held compacted log has its vectors (the background embedder is done)."""
    deadline = time.monotonic() + IDLE_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        logs = [ws.compacted_log for e in ids if (ws := cache.get((TENANT, e))) is not None]
        if all(log.embedded >= len(log) for log in logs):
            return
        await asyncio.sleep(0.2)


def _other_caches(walk: Walk, app: Any) -> str:
    """The bounded caches outside the working sets that the turns filled."""
    parts = []
    queries = app.services.context.searches.queries
    held = getattr(queries, "_held", None)
    if held is not None:
        w = Walk()
        w.deep("query vectors", held)
        parts.append(f"query vectors {len(held)} held, {sum(w.bytes.values()) / 1024:.0f} KiB")
    return "other caches: " + (", ".join(parts) if parts else "(not found)")


# --- the command ----------------------------------------------------------------------------


def _counts(raw: str) -> tuple[int, ...]:
    return tuple(sorted({int(part) for part in raw.split(",") if part}))


async def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add(
        "--conversations",
        type=_counts,
        default=(1000, 5000),
        help="active counts measured (default 1000,5000)",
    )
    add("--messages", type=int, default=160, help="messages per conversation (default 160)")
    add("--tokens", type=int, default=200, help="tokens per message, about (default 200)")
    add("--budget", type=int, default=32_000, help="the agent's max_working_memory_tokens (default 32000)")
    add("--embedder", default="minilm", choices=("minilm", "hashing"), help="the server's (default minilm)")
    add("--concurrency", type=int, default=8, help="BuildContext calls in flight (default 8)")
    add(
        "--turns",
        type=int,
        default=1,
        help="BuildContext calls per conversation (default 1; 2: the second turn searches and "
        "costs the compacted messages the first one's compaction made)",
    )
    add(
        "--bound",
        type=int,
        default=-1,
        help="conversations the bounded cache holds (default a quarter; 0 skips)",
    )
    add("--breakdown", type=int, default=200, help="conversations of the in-process breakdown (0 skips)")
    args = parser.parse_args()
    # the servers here warm the conversations themselves: a warm start (reading back the
    # seeded ones as it starts) would fill the baseline; older servers ignore the variable
    os.environ["EPISODIC_WARM_START_CONVERSATIONS"] = "0"
    sizing = Sizing(args.messages, args.tokens, args.budget, args.embedder)
    most = max(args.conversations)
    print(f"# Footprint: {sizing.describe()}\n", flush=True)
    with tempfile.TemporaryDirectory(prefix="episodic-footprint-") as tmp:
        workdir = Path(tmp)
        url = f"sqlite:///{workdir / 'footprint.db'}"
        started = time.monotonic()
        ids = await seed(url, most + 1, sizing)
        text_each, tokens_each = text_bytes(url, ids)
        print(
            f"seeded {most + 1:,} conversations in {time.monotonic() - started:.0f} s: "
            f"{text_each / 1024:.1f} KiB of text and {tokens_each:,.0f} tokens each "
            f"({text_each / tokens_each:.1f} characters a token)\n",
            flush=True,
        )
        run = await serve_and_warm(
            url, workdir, ids, args.conversations, UNBOUNDED, args.embedder, args.concurrency, args.turns
        )
        print(
            rss_table("RSS per active conversation (working-set cache unbounded):", run, text_each),
            "\n",
            flush=True,
        )
        bound = most // 4 if args.bound < 0 else args.bound
        if bound:
            last = run.points[-1]
            each_bytes = last.held_bytes / last.held
            steps = sorted({max(1, most * k // 8) for k in range(1, 9)})
            bounded = await serve_and_warm(
                url,
                workdir,
                ids,
                steps,
                str(int(each_bytes * bound)),
                args.embedder,
                args.concurrency,
                args.turns,
            )
            print(bound_table(bounded, bound, text_each), "\n", flush=True)
        if args.breakdown:
            part = min(args.breakdown, most) + 1
            print(await breakdown(url, ids[:part], sizing, args.concurrency), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
