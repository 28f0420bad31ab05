"""`episodic-lab bench-replicas`: N stateless replicas of `episodic serve` on one PostgreSQL
database, each a real subprocess (`--embedder hashing`) on a throwaway database.

- visibility: a change acknowledged by replica A, then replica B polled every few ms until
  its answer shows it; per kind (a digest made READY, an EAGER memory, an erasure as B's
  search shows it and as B's CheckIndex shows it), p50/p90/p99/max over --trials. B's
  scopes are hot before each change (B searched them), so what is timed is B learning of
  the change, not B loading a scope it never saw;
- start-up and RSS by corpus size: digest vectors (random unit vectors, 100 per scope)
  written straight into the tables with COPY, then the time from process start to health
  SERVING, the RSS then, and after searching --hot-scopes scopes (first, cold, search and a
  second one timed);
- throughput of 1..N replicas behind a round-robin client: a closed loop of mixed calls
  (AddMessage, BuildContext, SearchEpisodes in turn) as a ratio to Echo over the same
  channel, with the replicas' CPU per call. On a machine with few cores the load
  generator, PostgreSQL and every replica share them: more replicas than cores cannot
  raise throughput, and the report says so."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import numpy as np

from episodic.domain.model import CloseReason, EpisodeState
from episodic.domain.recall import DigestState
from episodic.embed import make_embedder
from episodic.store import schema
from episodic.v1 import (
    agent_pb2,
    agent_service_pb2,
    context_service_pb2,
    diagnostics_service_pb2,
    episode_pb2,
    episode_service_pb2,
    memory_pb2,
    memory_service_pb2,
)
from episodic.v1.agent_service_pb2_grpc import AgentServiceStub
from episodic.v1.context_service_pb2_grpc import ContextServiceStub
from episodic.v1.diagnostics_service_pb2_grpc import DiagnosticsServiceStub
from episodic.v1.episode_service_pb2_grpc import EpisodeServiceStub
from episodic.v1.memory_service_pb2_grpc import MemoryServiceStub
from episodic_client.service_config import channel_options
from episodic_lab.bench import BenchError
from episodic_lab.bench.databases import throwaway_database
from episodic_lab.bench.load import closed_loop
from episodic_lab.bench.server_process import Server, cpu_seconds, running_server
from episodic_lab.bench_recall.rows import DIGEST_COLUMNS, EPISODE_COLUMNS

es, ms = episode_service_pb2, memory_service_pb2
DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
SERVER_FLAGS = ("--embedder", "hashing", "--no-access-log")
EMBEDDER = "hashing"
TENANT = "dev"  # the --insecure-dev tenant every call here is served as
CALL_TIMEOUT_SECONDS = 60.0
SEEN_DEADLINE_SECONDS = 10.0  # a trial not seen by then counts as missed
VECTORS_PER_SCOPE = 100
COPY_ROWS = 20_000
VISIBILITY_USERS = 10  # scopes the visibility trials rotate over, kept hot on B
SAMPLE_TEXTS = ("flights to Lisbon", "the cat's vet visit", "passport renewal", "a birthday cake")

# --- flags --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Options:
    sections: tuple[str, ...]
    trials: int
    poll_ms: float
    vectors: tuple[int, ...]
    starts: int
    hot_scopes: int
    replicas: tuple[int, ...]
    seconds: float
    concurrency: int
    postgres_admin_url: str
    json_path: str


SECTIONS = ("visibility", "startup", "throughput")


def add_flags(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--sections", type=_names, default=SECTIONS, help="visibility,startup,throughput (default all)")
    add("--trials", type=int, default=200, help="visibility trials per kind (default 200)")
    add("--poll-ms", type=float, default=5.0, help="how often replica B is asked (default 5 ms)")
    add("--vectors", type=_counts, default=(1000, 1_000_000), help="corpus sizes (default 1000,1000000)")
    add("--starts", type=int, default=3, help="timed start-ups per corpus size (default 3)")
    add("--hot-scopes", type=int, default=100, help="scopes searched for the RSS after (default 100)")
    add("--replicas", type=_counts, default=(1, 2, 3), help="replica counts for throughput (default 1,2,3)")
    add("--seconds", type=float, default=5.0, help="measured seconds per throughput cell (default 5)")
    add("--concurrency", type=int, default=16, help="calls in flight for throughput (default 16)")
    add(
        "--postgres-admin-url", default=DEFAULT_ADMIN_URL, help=f"creates the databases ({DEFAULT_ADMIN_URL})"
    )
    add("--json", dest="json_path", default="", metavar="PATH", help="also write the raw figures to PATH")


def _names(raw: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in raw.split(",") if part.strip())
    unknown = set(names) - set(SECTIONS)
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"want some of {','.join(SECTIONS)}, got {raw!r}")
    return names


def _counts(raw: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in raw.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"want integers like 1,2,3, got {raw!r}") from exc
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"want positive integers, got {raw!r}")
    return counts


def options_from(args: argparse.Namespace) -> Options:
    return Options(
        sections=args.sections,
        trials=args.trials,
        poll_ms=args.poll_ms,
        vectors=args.vectors,
        starts=max(1, args.starts),
        hot_scopes=args.hot_scopes,
        replicas=args.replicas,
        seconds=args.seconds,
        concurrency=args.concurrency,
        postgres_admin_url=args.postgres_admin_url,
        json_path=args.json_path,
    )


def run_bench_replicas(args: argparse.Namespace) -> int:
    options = options_from(args)
    try:
        figures = asyncio.run(_run(options))
    except BenchError as exc:
        print(f"bench-replicas: {exc}")
        return 1
    if options.json_path:
        Path(options.json_path).write_text(json.dumps(figures, indent=2))
    return 0


async def _run(options: Options) -> dict[str, Any]:
    flags = " ".join(SERVER_FLAGS)
    print(f"bench-replicas: {os.cpu_count()} cores; each replica a subprocess `episodic serve {flags}`")
    figures: dict[str, Any] = {"cores": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="bench-replicas-") as tmp:
        workdir = Path(tmp)
        if "visibility" in options.sections or "throughput" in options.sections:
            figures |= await _cluster_sections(options, workdir / "cluster")
        if "startup" in options.sections:
            figures["startup"] = [asdict(r) for r in await startup(options, workdir / "startup")]
    return figures


async def _cluster_sections(options: Options, workdir: Path) -> dict[str, Any]:
    """Visibility and throughput share one database and one set of replicas."""
    count = max((2, *options.replicas)) if "throughput" in options.sections else 2
    figures: dict[str, Any] = {}
    async with (
        throwaway_database("postgres", workdir, options.postgres_admin_url) as url,
        replica_set(url, workdir, count) as servers,
    ):
        if "visibility" in options.sections:
            figures["visibility"] = {k: asdict(v) for k, v in (await visibility(servers, options)).items()}
        if "throughput" in options.sections:
            figures["throughput"] = [asdict(r) for r in await throughput(servers, options)]
    return figures


# --- replicas -----------------------------------------------------------------------------


@asynccontextmanager
async def replica_set(database_url: str, workdir: Path, count: int) -> AsyncIterator[list[Server]]:
    """`count` replicas, started one after the other (the first migrates the database)."""
    async with AsyncExitStack() as stack:
        servers = []
        for i in range(count):
            home = workdir / f"replica-{i}"
            home.mkdir(parents=True, exist_ok=True)
            servers.append(await stack.enter_async_context(running_server(database_url, home, SERVER_FLAGS)))
        yield servers


@dataclass(frozen=True)
class Stubs:
    channel: grpc.aio.Channel
    agents: Any
    episodes: Any
    context: Any
    memories: Any
    diagnostics: Any

    @classmethod
    def of(cls, channel: grpc.aio.Channel) -> Stubs:
        return cls(
            channel,
            AgentServiceStub(channel),
            EpisodeServiceStub(channel),
            ContextServiceStub(channel),
            MemoryServiceStub(channel),
            DiagnosticsServiceStub(channel),
        )


def round_robin(servers: Sequence[Server]) -> grpc.aio.Channel:
    """The clients' own service config: round robin, retries on UNAVAILABLE."""
    target = "ipv4:" + ",".join(s.target for s in servers)
    return grpc.aio.insecure_channel(target, options=channel_options())


async def create_agent(stubs: Stubs, agent_id: str) -> str:
    config = agent_pb2.MemoryConfig(recall_mode=agent_pb2.RECALL_MODE_SEMANTIC, recall_min_score=0.0)
    agent = agent_pb2.Agent(agent_id=agent_id, model="gpt-4", memory_config=config)
    request = agent_service_pb2.CreateAgentRequest(agent=agent)
    await stubs.agents.CreateAgent(request, timeout=CALL_TIMEOUT_SECONDS)
    return agent_id


async def open_episode(stubs: Stubs, agent_id: str, user: str, *lines: str) -> str:
    opened = await stubs.episodes.OpenEpisode(
        es.OpenEpisodeRequest(agent_id=agent_id, user_id=user), timeout=CALL_TIMEOUT_SECONDS
    )
    episode_id = str(opened.episode.episode_id)
    if lines:
        messages = [episode_pb2.MessageInput(role=episode_pb2.ROLE_USER, content=line) for line in lines]
        request = es.AddMessagesRequest(episode_id=episode_id, messages=messages)
        await stubs.episodes.AddMessages(request, timeout=CALL_TIMEOUT_SECONDS)
    return episode_id


async def digested(stubs: Stubs, agent_id: str, user: str, text: str) -> str:
    """An episode written, closed and digested (READY) through `stubs`."""
    episode_id = await open_episode(stubs, agent_id, user, text, f"More about {text}.")
    request = es.CloseEpisodeRequest(episode_id=episode_id, wait_for_digest=True)
    closed = await stubs.episodes.CloseEpisode(request, timeout=CALL_TIMEOUT_SECONDS)
    if closed.episode.digest.state != episode_pb2.DIGEST_STATE_READY:
        raise BenchError(f"a digest did not become READY: {closed.episode.digest}")
    return episode_id


async def searched(stubs: Stubs, agent_id: str, user: str, query: str) -> set[str]:
    request = es.SearchEpisodesRequest(
        agent_id=agent_id, user_id=user, mode=es.SEARCH_MODE_SEMANTIC, query=query, top_k=100
    )
    reply = await stubs.episodes.SearchEpisodes(request, timeout=CALL_TIMEOUT_SECONDS)
    return {s.episode_id for s in reply.snippets}


async def remember(stubs: Stubs, agent_id: str, user: str, text: str) -> str:
    request = ms.CreateMemoriesRequest(
        agent_id=agent_id,
        user_id=user,
        placement=ms.MEMORY_PLACEMENT_EAGER,
        memories=[ms.MemoryInput(text=text, kind=memory_pb2.MEMORY_KIND_FACT)],
    )
    result = (await stubs.memories.CreateMemories(request, timeout=CALL_TIMEOUT_SECONDS)).results[0]
    if result.outcome != ms.MEMORY_OUTCOME_CREATED:  # merged into an older one: nothing new to see
        raise BenchError(f"a memory was not created anew: {ms.MemoryOutcome.Name(result.outcome)}")
    return str(result.memory.memory_id)


async def memories_found(stubs: Stubs, agent_id: str, user: str, query: str) -> set[str]:
    request = ms.SearchMemoriesRequest(
        agent_id=agent_id, user_id=user, query=query, top_k=100, mode=es.SEARCH_MODE_SEMANTIC
    )
    reply = await stubs.memories.SearchMemories(request, timeout=CALL_TIMEOUT_SECONDS)
    return {h.memory.memory_id for h in reply.hits}


async def orphaned(stubs: Stubs, agent_id: str) -> int:
    request = diagnostics_service_pb2.CheckIndexRequest(agent_id=agent_id)
    report = await stubs.diagnostics.CheckIndex(request, timeout=CALL_TIMEOUT_SECONDS)
    return int(report.orphaned)


# --- visibility ---------------------------------------------------------------------------


@dataclass(slots=True)
class Latencies:
    """Seconds from A's acknowledgement until B showed the change; missed: not within
    SEEN_DEADLINE_SECONDS."""

    seconds: list[float] = field(default_factory=list)
    missed: int = 0

    def percentile(self, p: float) -> float:
        ordered = sorted(self.seconds)
        return (
            ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))] if ordered else float("nan")
        )


async def visibility(servers: Sequence[Server], options: Options) -> dict[str, Latencies]:
    async with (
        grpc.aio.insecure_channel(servers[0].target) as ca,
        grpc.aio.insecure_channel(servers[1].target) as cb,
    ):
        a, b = Stubs.of(ca), Stubs.of(cb)
        trial = Trials(a, b, await create_agent(a, "visibility"), options.poll_ms / 1000)
        await trial.prime()
        results = {
            "digest": await trial.run(options.trials, trial.digest),
            "memory": await trial.run(options.trials, trial.memory),
        }
        results |= await trial.erasures(options.trials)
    _print_visibility(results, options)
    return results


Check = Callable[[], Awaitable[bool]]


@dataclass
class Trials:
    a: Stubs
    b: Stubs
    agent_id: str
    poll: float

    async def run(self, trials: int, one: Callable[[int], Awaitable[float | None]]) -> Latencies:
        figures = Latencies()
        for i in range(trials):
            _record(figures, await one(i))
        return figures

    async def prime(self) -> None:
        """Each user of the trials gets a digest and a memory made on A and seen on B, so the
        scopes are hot on B before any change is timed."""
        for u in range(VISIBILITY_USERS):
            user = f"user-{u}"
            episode_id = await digested(self.a, self.agent_id, user, SAMPLE_TEXTS[u % len(SAMPLE_TEXTS)])
            memory_id = await remember(self.a, self.agent_id, user, f"User {u} plays the cello")
            await self.seen(partial(finds_episode, self.b, self.agent_id, user, "anything", episode_id))
            await self.seen(partial(finds_memory, self.b, self.agent_id, user, "cello", memory_id))

    async def digest(self, i: int) -> float | None:
        user = f"user-{i % VISIBILITY_USERS}"
        text = f"trial {i}: {SAMPLE_TEXTS[i % len(SAMPLE_TEXTS)]}"
        episode_id = await digested(self.a, self.agent_id, user, text)
        return await self.seen(partial(finds_episode, self.b, self.agent_id, user, text, episode_id))

    async def memory(self, i: int) -> float | None:
        user, text = f"user-{i % VISIBILITY_USERS}", distinct_fact(i)
        memory_id = await remember(self.a, self.agent_id, user, text)
        return await self.seen(partial(finds_memory, self.b, self.agent_id, user, text, memory_id))

    async def erasures(self, trials: int) -> dict[str, Latencies]:
        """Each trial erases a user (of an agent of its own, so CheckIndex stays small) whose
        digest B has found; timed until B's search stops showing it and until B's index
        holds none of its vectors."""
        search, index = Latencies(), Latencies()
        agent_id = await create_agent(self.a, "visibility-erasure")
        for i in range(trials):
            user = f"erased-{i}"
            episode_id = await digested(self.a, agent_id, user, SAMPLE_TEXTS[i % len(SAMPLE_TEXTS)])
            await self.seen(partial(finds_episode, self.b, agent_id, user, "anything", episode_id))
            request = es.EraseUserRequest(user_id=user, agent_id=agent_id)
            await self.a.episodes.EraseUser(request, timeout=CALL_TIMEOUT_SECONDS)
            began = time.perf_counter()
            _record(search, await self.seen(partial(lacks_episode, self.b, agent_id, user, episode_id)))
            _record(index, await self.seen(partial(no_orphans, self.b, agent_id), began))
        return {"erasure (search)": search, "erasure (index)": index}

    async def seen(self, check: Check, began: float | None = None) -> float | None:
        """Seconds from `began` (default: now) until `check` holds; None past the deadline."""
        began = time.perf_counter() if began is None else began
        while not await check():
            if time.perf_counter() - began > SEEN_DEADLINE_SECONDS:
                return None
            await asyncio.sleep(self.poll)
        return time.perf_counter() - began


WORDS = (
    "amber", "basil", "canyon", "dahlia", "ember", "fjord", "garnet", "harbor", "indigo", "juniper",
    "kestrel", "lagoon", "marble", "nutmeg", "orchid", "pepper", "quartz", "raven", "saffron", "tundra",
    "umber", "violet", "walnut", "yarrow", "zephyr", "acorn", "bramble", "cobalt", "drizzle", "elm",
    "fennel", "granite", "hazel", "iris", "jasper", "kelp", "lilac", "maple", "nectar", "onyx",
)  # fmt: skip


def distinct_fact(i: int) -> str:
    """A fact no other trial's is close to: a near-duplicate would be merged, not created."""
    return "The user collects " + " ".join(random.Random(i).sample(WORDS, 5))


def _record(figures: Latencies, seen: float | None) -> None:
    if seen is None:
        figures.missed += 1
    else:
        figures.seconds.append(seen)


async def finds_episode(stubs: Stubs, agent_id: str, user: str, query: str, wanted: str) -> bool:
    return wanted in await searched(stubs, agent_id, user, query)


async def lacks_episode(stubs: Stubs, agent_id: str, user: str, unwanted: str) -> bool:
    return not await finds_episode(stubs, agent_id, user, "anything", unwanted)


async def finds_memory(stubs: Stubs, agent_id: str, user: str, query: str, wanted: str) -> bool:
    return wanted in await memories_found(stubs, agent_id, user, query)


async def no_orphans(stubs: Stubs, agent_id: str) -> bool:
    return await orphaned(stubs, agent_id) == 0


def _print_visibility(results: dict[str, Latencies], options: Options) -> None:
    print(f"\nvisibility: acknowledged by A -> shown by B (polled every {options.poll_ms:g} ms), ms")
    print(f"  {'change':<18} {'n':>5} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8} {'missed':>7}")
    for kind, f in results.items():
        cells = [f.percentile(p) * 1000 for p in (50, 90, 99, 100)]
        print(
            f"  {kind:<18} {len(f.seconds):>5} " + " ".join(f"{c:>8.1f}" for c in cells) + f" {f.missed:>7}"
        )
    print(f"  bound: p99 <= 1000 ms; a change not shown within {SEEN_DEADLINE_SECONDS:.0f} s is 'missed'")


# --- start-up and RSS by corpus size ------------------------------------------------------


@dataclass(slots=True)
class StartupRow:
    vectors: int
    scopes: int
    seed_seconds: float
    start_seconds: list[float]
    rss_serving_mib: float
    rss_hot_mib: float
    hot_scopes: int
    first_search_ms_p50: float
    first_search_ms_max: float
    warm_search_ms_p50: float


async def startup(options: Options, workdir: Path) -> list[StartupRow]:
    rows = []
    for size in options.vectors:
        home = workdir / f"vectors-{size}"
        home.mkdir(parents=True, exist_ok=True)
        async with throwaway_database("postgres", home, options.postgres_admin_url) as url:
            rows.append(await _startup_at(url, home, size, options))
    _print_startup(rows)
    return rows


async def _startup_at(url: str, workdir: Path, size: int, options: Options) -> StartupRow:
    async with (
        running_server(url, workdir, SERVER_FLAGS) as server,  # migrates; makes the agent
        grpc.aio.insecure_channel(server.target) as channel,
    ):
        agent_id = await create_agent(Stubs.of(channel), "startup")
    scopes = max(1, size // VECTORS_PER_SCOPE)
    began = time.perf_counter()
    await seed_vectors(url, agent_id, size, scopes)
    seeded = Seeded(size, scopes, time.perf_counter() - began, agent_id)
    starts = [await _timed_start(url, workdir) for _ in range(options.starts - 1)]
    began = time.perf_counter()
    async with running_server(url, workdir, SERVER_FLAGS) as server:
        starts.append(time.perf_counter() - began)
        return await _rss_and_searches(server, seeded, starts, options.hot_scopes)


@dataclass(frozen=True, slots=True)
class Seeded:
    vectors: int
    scopes: int
    seconds: float
    agent_id: str


async def _timed_start(url: str, workdir: Path) -> float:
    began = time.perf_counter()
    async with running_server(url, workdir, SERVER_FLAGS):
        return time.perf_counter() - began


async def _rss_and_searches(
    server: Server, seeded: Seeded, starts: list[float], hot_scopes: int
) -> StartupRow:
    serving = rss_mib(server.pid)
    hot = [f"user-{u}" for u in range(min(hot_scopes, seeded.scopes))]
    async with grpc.aio.insecure_channel(server.target) as channel:
        stubs = Stubs.of(channel)
        first = [await _timed(searched(stubs, seeded.agent_id, user, "anything")) for user in hot]
        warm = [await _timed(searched(stubs, seeded.agent_id, user, "anything")) for user in hot]
    return StartupRow(
        vectors=seeded.vectors,
        scopes=seeded.scopes,
        seed_seconds=seeded.seconds,
        start_seconds=starts,
        rss_serving_mib=serving,
        rss_hot_mib=rss_mib(server.pid),
        hot_scopes=len(hot),
        first_search_ms_p50=statistics.median(first) * 1000,
        first_search_ms_max=max(first) * 1000,
        warm_search_ms_p50=statistics.median(warm) * 1000,
    )


async def _timed(call: Awaitable[object]) -> float:
    began = time.perf_counter()
    await call
    return time.perf_counter() - began


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _print_startup(rows: list[StartupRow]) -> None:
    print("\nstart-up (process start -> health SERVING) and RSS, by digest vectors in the database")
    print(
        f"  {'vectors':>9} {'scopes':>7} {'seed s':>7} {'start s (each)':<22} {'RSS MiB':>8}"
        f" {'hot':>5} {'RSS hot':>8} {'1st search ms p50/max':>22} {'warm p50':>9}"
    )
    for r in rows:
        each = " ".join(f"{s:.2f}" for s in r.start_seconds)
        print(
            f"  {r.vectors:>9} {r.scopes:>7} {r.seed_seconds:>7.1f} {each:<22} {r.rss_serving_mib:>8.1f}"
            f" {r.hot_scopes:>5} {r.rss_hot_mib:>8.1f} {r.first_search_ms_p50:>10.1f} /"
            f" {r.first_search_ms_max:<9.1f} {r.warm_search_ms_p50:>9.2f}"
        )
    print(
        f"  {VECTORS_PER_SCOPE} vectors per scope (one user of one agent), seeded with COPY; "
        "'hot': scopes searched once (cold) then again (warm) before 'RSS hot'"
    )


# --- seeding ------------------------------------------------------------------------------

VECTOR_COLUMNS = ("tenant_id", "episode_id", "chunk", "agent_id", "user_id", "model", "dimension", "vector")
ENDED = datetime(2025, 1, 1, tzinfo=UTC)
STARTED = ENDED - timedelta(minutes=30)
SEEDED = {"episodes": EPISODE_COLUMNS, "digests": DIGEST_COLUMNS, "digest_vectors": VECTOR_COLUMNS}


async def seed_vectors(url: str, agent_id: str, size: int, scopes: int, seed: int = 7) -> None:
    """`size` closed episodes with READY digests and one random unit vector each, spread
    evenly over `scopes` users, written with COPY: a fixture of the bench that bypasses the
    stores on purpose (a million digests through the digester would take hours)."""
    _check_columns()
    embedder = make_embedder(EMBEDDER)
    rng = np.random.default_rng(seed)
    conn = await asyncpg.connect(url)
    try:
        encoding = await conn.fetchval(
            "SELECT token_encoding FROM agents WHERE tenant_id = $1 AND agent_id = $2", TENANT, agent_id
        )
        for start in range(0, size, COPY_ROWS):
            chunk = range(start, min(start + COPY_ROWS, size))
            vectors = _unit_vectors(rng, len(chunk), embedder.dimension)
            rows = _Rows(agent_id, str(encoding), embedder.model_id, scopes, chunk, vectors)
            await _copy(conn, rows)
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


async def _copy(conn: asyncpg.Connection, rows: _Rows) -> None:
    """Parents first: digests belong to episodes, vectors to digests."""
    for table, records in (("episodes", rows.episodes()), ("digests", rows.digests())):
        await conn.copy_records_to_table(table, records=records, columns=list(SEEDED[table]))
    await conn.copy_records_to_table("digest_vectors", records=rows.vectors(), columns=list(VECTOR_COLUMNS))


def _check_columns() -> None:
    """Fails loudly when the schema has moved on from the columns written here."""
    for table, columns in SEEDED.items():
        if {c.name for c in schema.metadata.tables[table].columns} != set(columns):
            raise BenchError(f"schema.{table} differs from the columns the bench writes: {columns}")


def _unit_vectors(rng: np.random.Generator, count: int, dimension: int) -> np.ndarray[Any, Any]:
    vectors = rng.standard_normal((count, dimension)).astype("<f4")
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


@dataclass(frozen=True, slots=True)
class _Rows:
    """One COPY chunk: episode i is user i % scopes's, ended at ENDED."""

    agent_id: str
    encoding: str
    model: str
    scopes: int
    chunk: range
    unit: np.ndarray[Any, Any]  # one vector per episode of the chunk

    def _ids(self) -> Iterator[tuple[int, str, str]]:
        for i in self.chunk:
            yield i, f"seed-{i:08d}", f"user-{i % self.scopes}"

    def episodes(self) -> Iterator[tuple[Any, ...]]:
        closed, reason = EpisodeState.CLOSED.value, CloseReason.USER_ENDED.value
        tail = (closed, self.encoding, STARTED, ENDED, reason, "", None, 20, 600, ENDED, None)
        for _, e, u in self._ids():
            yield (TENANT, e, self.agent_id, u, *tail)

    def digests(self) -> Iterator[tuple[Any, ...]]:
        ready = DigestState.READY.value
        for i, e, u in self._ids():
            summary = f"Talked about {SAMPLE_TEXTS[i % len(SAMPLE_TEXTS)]}."
            tail = ("[]", self.model, 1, "", ENDED, STARTED, ENDED, ENDED)
            yield (TENANT, e, self.agent_id, u, ready, summary, *tail)

    def vectors(self) -> Iterator[tuple[Any, ...]]:
        dimension = self.unit.shape[1]
        for n, (_, e, u) in enumerate(self._ids()):
            yield (TENANT, e, 0, self.agent_id, u, self.model, dimension, self.unit[n].tobytes())


# --- throughput ---------------------------------------------------------------------------


@dataclass(slots=True)
class ThroughputRow:
    replicas: int
    echo_rps: float
    mixed_rps: float
    ratio: float
    mixed_p50_ms: float
    mixed_p99_ms: float
    errors: int
    cpu_ms_per_call: float


async def throughput(servers: Sequence[Server], options: Options) -> list[ThroughputRow]:
    rows = []
    for count in options.replicas:
        chosen = servers[:count]
        async with round_robin(chosen) as channel:
            rows.append(await _cell(Stubs.of(channel), chosen, options))
    _print_throughput(rows, options)
    return rows


async def _cell(stubs: Stubs, servers: Sequence[Server], options: Options) -> ThroughputRow:
    echo = await closed_loop(_echo(stubs), options.concurrency, options.seconds)
    workers = await _mixed_workers(stubs, len(servers), options.concurrency)
    cpu = sum(cpu_seconds(s.pid) for s in servers)
    mixed = await closed_loop(workers.call, options.concurrency, options.seconds)
    cpu = sum(cpu_seconds(s.pid) for s in servers) - cpu
    ordered = sorted(mixed.latencies) or [float("nan")]
    return ThroughputRow(
        replicas=len(servers),
        echo_rps=echo.rps,
        mixed_rps=mixed.rps,
        ratio=mixed.rps / echo.rps if echo.rps else float("nan"),
        mixed_p50_ms=ordered[len(ordered) // 2] * 1000,
        mixed_p99_ms=ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        errors=mixed.errors + echo.errors,
        cpu_ms_per_call=cpu / mixed.calls * 1000 if mixed.calls else float("nan"),
    )


def _echo(stubs: Stubs) -> Callable[[int], Awaitable[None]]:
    request = diagnostics_service_pb2.EchoRequest(payload=b"x" * 64)

    async def call(_: int) -> None:
        await stubs.diagnostics.Echo(request, timeout=CALL_TIMEOUT_SECONDS)

    return call


@dataclass
class _Mixed:
    """Each worker on its own episode (and user, who has one digested episode): AddMessage,
    BuildContext (nothing appended), SearchEpisodes, in turn."""

    stubs: Stubs
    agent_id: str
    episodes: list[str]
    tag: str
    turns: list[int] = field(default_factory=list)

    async def call(self, worker: int) -> None:
        turn = self.turns[worker]
        self.turns[worker] += 1
        episode_id, user = self.episodes[worker], f"user-{worker}"
        if turn % 3 == 0:
            message = episode_pb2.MessageInput(
                role=episode_pb2.ROLE_USER, content=f"Note {turn} about {SAMPLE_TEXTS[turn % 4]}.",
                client_message_id=f"{self.tag}-{worker}-{turn}",
            )  # fmt: skip
            await self.stubs.episodes.AddMessage(
                es.AddMessageRequest(episode_id=episode_id, message=message), timeout=CALL_TIMEOUT_SECONDS
            )
        elif turn % 3 == 1:
            request = context_service_pb2.BuildContextRequest(episode_id=episode_id, user_message="And then?")
            async for _ in self.stubs.context.BuildContext(request, timeout=CALL_TIMEOUT_SECONDS):
                pass
        else:
            await searched(self.stubs, self.agent_id, user, SAMPLE_TEXTS[turn % 4])


async def _mixed_workers(stubs: Stubs, replicas: int, concurrency: int) -> _Mixed:
    agent_id = await create_agent(stubs, f"throughput-{replicas}")
    episodes = []
    for w in range(concurrency):
        await digested(stubs, agent_id, f"user-{w}", SAMPLE_TEXTS[w % 4])
        episodes.append(await open_episode(stubs, agent_id, f"user-{w}", "Hello there."))
    return _Mixed(stubs, agent_id, episodes, f"r{replicas}", [0] * concurrency)


def _print_throughput(rows: list[ThroughputRow], options: Options) -> None:
    print(
        f"\nthroughput: round-robin client, {options.concurrency} calls in flight, {options.seconds:g} s"
        " per cell; mixed = AddMessage, BuildContext, SearchEpisodes in turn"
    )
    print(
        f"  {'replicas':>8} {'echo/s':>9} {'mixed/s':>9} {'mixed/echo':>10} {'p50 ms':>8} {'p99 ms':>8}"
        f" {'errors':>7} {'srv CPU ms/call':>16}"
    )
    for r in rows:
        print(
            f"  {r.replicas:>8} {r.echo_rps:>9.0f} {r.mixed_rps:>9.0f} {r.ratio:>10.2f}"
            f" {r.mixed_p50_ms:>8.1f} {r.mixed_p99_ms:>8.1f} {r.errors:>7} {r.cpu_ms_per_call:>16.2f}"
        )
    print(
        f"  this machine has {os.cpu_count()} cores, shared by the load generator, PostgreSQL and every"
        " replica: beyond the cores more replicas cannot add throughput; what the rows can show is the"
        " cost of spreading calls over processes, not the capacity of N machines"
    )
