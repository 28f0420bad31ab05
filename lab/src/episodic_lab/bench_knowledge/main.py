"""`episodic-lab bench-knowledge`: SearchKnowledge latency with N chunks in one agent (default
100k), next to the Echo baseline measured in the same run, on a throwaway `episodic serve`
subprocess (SQLite, hashing embedder: a query costs it tens of µs, so the figures are the
search's own).

The documents are synthetic markdown, written through CreateDocuments (100 per call): each has
a title and `--paragraphs` sections (a "##" heading and a paragraph of ~400 characters), one
chunk each, of made-up words whose frequencies follow Zipf's law (bench-recall's lexicon), so
the word search meets posting lists of a realistic shape. Queries are three words drawn the
same way (HYBRID also with rare words only: the common ones are what cost the word search).
Echo and the three searches take turns: 5 rounds of 100 calls each (by default), so that a busy
second of the machine weighs on all four alike.
A few probes first check that HYBRID finds the section a query was cut from; then the bench
waits for the server to go idle (those first searches start reading the agent's chunks into
the chunk cache in the background).

Then Echo again, on a channel of its own, while 4 hybrid searches are always in flight: what
one agent's large knowledge base costs other callers (server CPU is not split between the two).

Then, optionally, a BuildContext turn on an empty episode (the query as user message, 4k
budget, recall and known facts off) with knowledge on against off: what the turn's knowledge
search adds. One call in flight; p50/p99 in ms, the ratio to Echo, and the server's CPU per
call (these machines are noisy: compare ratios). Prints, never asserts."""

from __future__ import annotations

import argparse
import asyncio
import math
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from episodic.progress import Progress
from episodic_client.v1 import agent_pb2, knowledge_service_pb2
from episodic_lab.bench.machine import machine_facts
from episodic_lab.bench.server_process import UNPACED, Server, cpu_seconds, running_server
from episodic_lab.bench.workloads import ECHO_PAYLOAD
from episodic_lab.bench_context import progress
from episodic_lab.bench_recall.latency import AsyncCall, Budget, Figures, GcPauses, time_calls, timed, warm_up
from episodic_lab.bench_recall.words import Lexicon, lexicon
from episodic_lab.knowledge_calls import (
    MAX_DOCUMENTS_PER_CALL,
    KnowledgeLab,
    knowledge_lab,
    markdown_document,
)

AGENT = "bench-knowledge"
TOP_K = 5
SECTION_PHRASES = 14  # of 4 words: ~56 words, ~400 characters a section
HEADING_WORDS = 3
PROBES = 20
PROBE_WORDS = 6
ROUNDS = 5  # blocks of calls each timed RPC takes in turn
SEARCHERS = 4  # hybrid searches in flight while another channel's Echo is timed
BUDGET_TOKENS = 4000
SETTLE_SECONDS = 60.0  # longest wait for the server to go idle after the probes
IDLE_CPU_SECONDS = 0.05  # of server CPU in half a second: idle
# The tenant loads 100k chunks in seconds: far past its share of chunk writes (embeddings),
# and searches faster than its share of RPCs.
SERVER_FLAGS = ("--embedder", "hashing", "--tenant-knowledge-chunks-per-second", "1000000", *UNPACED)


def run_bench_knowledge(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))


@dataclass(frozen=True, slots=True)
class Corpus:
    words: Lexicon
    documents: int
    paragraphs: int
    seed: int

    def document(self, i: int) -> knowledge_service_pb2.DocumentInput:
        return markdown_document(f"doc-{i}", "\n\n".join(self.sections(i)), title=f"Document {i}")

    def sections(self, i: int) -> list[str]:
        """Document i's sections, the same on every call (seeded by the document)."""
        rng = np.random.default_rng((self.seed, i))
        picks = rng.integers(0, len(self.words.phrases), (self.paragraphs, SECTION_PHRASES)).tolist()
        headings = self.words.sample(rng, self.paragraphs * HEADING_WORDS)
        return [
            f"## {' '.join(headings[j * HEADING_WORDS : (j + 1) * HEADING_WORDS]).capitalize()}\n\n"
            + " ".join(self.words.phrases[p] for p in picks[j]).capitalize()
            + "."
            for j in range(self.paragraphs)
        ]

    def batches(self) -> Iterator[list[knowledge_service_pb2.DocumentInput]]:
        for start in range(0, self.documents, MAX_DOCUMENTS_PER_CALL):
            yield [
                self.document(i) for i in range(start, min(start + MAX_DOCUMENTS_PER_CALL, self.documents))
            ]


async def _run(args: argparse.Namespace) -> int:
    paragraphs = max(args.paragraphs, 1)
    corpus = Corpus(lexicon(args.seed), max(math.ceil(args.chunks / paragraphs), 1), paragraphs, args.seed)
    machine = machine_facts()
    print(
        f"SearchKnowledge at {corpus.documents * paragraphs:,} chunks ({corpus.documents:,} documents x "
        f"{paragraphs} sections) in one agent, top {TOP_K}, hashing embedder, `episodic serve` subprocess on "
        f"SQLite, one call in flight ({machine['cores']} cores, "
        f"load average {machine['load average at start']})"
    )
    budget = Budget.of(args.calls, args.seconds)
    flags = (*SERVER_FLAGS, *args.server_flag)
    with tempfile.TemporaryDirectory(prefix="episodic-bench-knowledge-") as tmp:
        async with (
            running_server(f"sqlite:///{tmp}/bench.db", Path(tmp), flags) as server,
            knowledge_lab(server.target) as lab,
        ):
            await lab.client.create_agent(AGENT, model="gpt-4o")
            await _create(lab, corpus, server)
            await _probe(lab, corpus, args.seed)
            await _settle(server)
            print(f"{'rpc':<36} {'p50 ms':>8} {'p99 ms':>8} {'x echo p50':>10} {'x echo p99':>10} "
                  f"{'calls':>6} {'server cpu ms/call':>18}")  # fmt: skip
            queries = _queries(corpus.words, budget, args.seed + 1)
            calls: dict[str, AsyncCall] = {"Echo": lambda _: lab.client.echo(ECHO_PAYLOAD)}
            for label, mode, rare in (
                ("SearchKnowledge hybrid", "hybrid", False),
                ("SearchKnowledge hybrid, rare words", "hybrid", True),
                ("SearchKnowledge semantic", "semantic", False),
            ):
                chosen = queries[rare]

                async def search(n: int, mode: str = mode, chosen: list[str] = chosen) -> object:
                    return await lab.search(AGENT, chosen[n % len(chosen)], mode, TOP_K)

                calls[label] = search
            echo, *searches = await _measure_in_turns(server, calls, budget)
            for measured in (echo, *searches):
                _row(measured, echo)
            _row(await _echo_beside_searches(server, lab, queries[False], budget), echo)
            if not args.no_build_context:
                for knowledge in (False, True):
                    _row(await _build_context(lab, server, knowledge, queries[False], budget), echo)
            print(f"server RSS at the end: {_rss_mib(server.pid):.0f} MiB")
    return 0


async def _create(lab: KnowledgeLab, corpus: Corpus, server: Server) -> None:
    began, chunks = time.perf_counter(), 0
    with Progress("documents", corpus.documents, unit="documents") as bar:
        for batch in corpus.batches():
            chunks += await lab.create_documents(AGENT, batch)
            bar.advance(len(batch))
    seconds = time.perf_counter() - began
    print(
        f"created {corpus.documents:,} documents, {chunks:,} chunks, in {seconds:.1f} s "
        f"({chunks / seconds:,.0f} chunks/s through CreateDocuments); "
        f"server RSS {_rss_mib(server.pid):.0f} MiB"
    )


async def _probe(lab: KnowledgeLab, corpus: Corpus, seed: int) -> None:
    """HYBRID finds the section a query was cut from (words from its middle), in its top 5."""
    rng = np.random.default_rng((seed, 1))
    found = 0
    for _ in range(PROBES):
        i, j = int(rng.integers(corpus.documents)), int(rng.integers(corpus.paragraphs))
        words = corpus.sections(i)[j].split("\n\n", 1)[1].rstrip(".").split()
        at = int(rng.integers(max(len(words) - PROBE_WORDS, 1)))
        reply = await lab.search(AGENT, " ".join(words[at : at + PROBE_WORDS]), "hybrid", TOP_K)
        found += any(h.chunk.document_id == f"doc-{i}" and h.chunk.chunk_index == j for h in reply.hits)
    print(f"probes: HYBRID found the section a {PROBE_WORDS}-word query was cut from in {found}/{PROBES}")


async def _settle(server: Server) -> None:
    """Waits until the server is idle: the first searches start reading the agent's chunks
    into the chunk cache in the background (seconds at 100k chunks), and the figures are
    of the searches that follow."""
    began = time.perf_counter()
    while time.perf_counter() - began < SETTLE_SECONDS:
        before = cpu_seconds(server.pid)
        await asyncio.sleep(0.5)
        if cpu_seconds(server.pid) - before < IDLE_CPU_SECONDS:
            break
    print(f"server idle {time.perf_counter() - began:.1f} s after the probes")


def _queries(words: Lexicon, budget: Budget, seed: int) -> dict[bool, list[str]]:
    """Queries by rare-words-only, drawn before timing starts."""
    rng = np.random.default_rng(seed)
    count = budget.warmup + budget.calls
    return {rare: [words.query(rng, rare=rare) for _ in range(count)] for rare in (False, True)}


@dataclass(frozen=True, slots=True)
class Measured:
    label: str
    figures: Figures
    cpu_ms_per_call: float | None  # None: the server's CPU went to other calls too
    note: str = ""


async def _measure(server: Server, label: str, call: AsyncCall, budget: Budget) -> Measured:
    """Latency of `call` (timed), and the server's CPU over all its calls (warm-up included)."""
    calls = 0

    async def counted(n: int) -> object:
        nonlocal calls
        calls += 1
        return await call(n)

    before = cpu_seconds(server.pid)
    figures = await timed(counted, budget)
    cpu = (cpu_seconds(server.pid) - before) / max(calls, 1) * 1000
    progress(f"  {label}: p50 {figures.p50_ms:.2f} ms, p99 {figures.p99_ms:.2f} ms")
    return Measured(label, figures, cpu)


async def _measure_in_turns(server: Server, calls: dict[str, AsyncCall], budget: Budget) -> list[Measured]:
    """Each call warmed up, then timed in ROUNDS rounds, a block of calls each in turn, and
    the server's CPU over its blocks. Timed one after the other, a call measured in a quiet
    second and another in a busy one differed by up to 1.5x at p50 on these machines: taking
    turns, each call's figures span the same seconds as Echo's."""
    first = {label: await warm_up(call, budget) for label, call in calls.items()}
    turns = {label: _Turns() for label in calls}
    block = math.ceil(budget.calls / ROUNDS)
    for _ in range(ROUNDS):
        for label, call in calls.items():
            await turns[label].take(server, call, first[label], block, budget.seconds / ROUNDS)
    return [t.measured(label) for label, t in turns.items()]


@dataclass(slots=True)
class _Turns:
    """One call's blocks, pooled."""

    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    gcs: GcPauses = field(default_factory=GcPauses)

    async def take(self, server: Server, call: AsyncCall, first: int, calls: int, seconds: float) -> None:
        cpu_before = cpu_seconds(server.pid)
        block = await time_calls(call, first + len(self.latencies), calls, seconds)
        self.cpu_seconds += cpu_seconds(server.pid) - cpu_before
        self.latencies += block.latencies
        self.seconds += block.seconds
        self.gcs.count += block.gcs.count
        self.gcs.longest = max(self.gcs.longest, block.gcs.longest)

    def measured(self, label: str) -> Measured:
        figures = Figures.of(self.latencies, self.seconds, self.gcs)
        return Measured(label, figures, self.cpu_seconds / max(len(self.latencies), 1) * 1000)


async def _build_context(
    lab: KnowledgeLab, server: Server, knowledge: bool, queries: list[str], budget: Budget
) -> Measured:
    """BuildContext on an empty episode, the query as user message (not appended)."""
    memory = agent_pb2.MemoryConfig(
        max_working_memory_tokens=BUDGET_TOKENS,
        knowledge=knowledge,
        recall_mode=agent_pb2.RECALL_MODE_NONE,
        known_facts=False,
    )
    probe = (await lab.client.open_episode(AGENT, "bench-user")).episode.episode_id
    rendered: list[int] = []

    async def build(n: int) -> object:
        built = await lab.client.build_context(
            probe, user_message=queries[n % len(queries)], memory_config=memory
        )
        rendered.append(built.report.section_tokens.knowledge)
        return built

    label = f"BuildContext, knowledge {'on' if knowledge else 'off'}"
    measured = await _measure(server, label, build, budget)
    tokens = sum(rendered) / max(len(rendered), 1)
    return Measured(
        measured.label, measured.figures, measured.cpu_ms_per_call, f"[Knowledge] {tokens:.0f} tokens"
    )


async def _echo_beside_searches(
    server: Server, lab: KnowledgeLab, queries: list[str], budget: Budget
) -> Measured:
    """Echo on a channel of its own while SEARCHERS hybrid searches are always in flight on
    the lab's: what one agent's large knowledge base costs another caller, with the searches
    a second meanwhile."""
    done, stop = 0, asyncio.Event()

    async def searcher(first: int) -> None:
        nonlocal done
        n = first
        while not stop.is_set():
            await lab.search(AGENT, queries[n % len(queries)], "hybrid", TOP_K)
            done, n = done + 1, n + SEARCHERS

    async with knowledge_lab(server.target) as other:
        searchers = [asyncio.create_task(searcher(i)) for i in range(SEARCHERS)]
        try:
            began, done_before = time.perf_counter(), done
            label = f"Echo beside {SEARCHERS} hybrid searches"
            measured = await _measure(server, label, lambda _: other.client.echo(ECHO_PAYLOAD), budget)
            rate = (done - done_before) / (time.perf_counter() - began)
        finally:
            stop.set()
            await asyncio.gather(*searchers)
    return Measured(label, measured.figures, None, f"{rate:,.0f} searches/s meanwhile")


def _row(m: Measured, echo: Measured) -> None:
    f, e = m.figures, echo.figures
    cpu = "-" if m.cpu_ms_per_call is None else f"{m.cpu_ms_per_call:.2f}"
    print(
        f"{m.label:<36} {f.p50_ms:>8.2f} {f.p99_ms:>8.2f} {f.p50_ms / e.p50_ms:>10.1f} "
        f"{f.p99_ms / e.p99_ms:>10.1f} {f.calls:>6} {cpu:>18}" + (f"  {m.note}" if m.note else "")
    )


def _rss_mib(pid: int) -> float:
    """The process's resident memory (Linux); NaN elsewhere."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return math.nan
    rss = next((line.split()[1] for line in lines if line.startswith("VmRSS:")), None)
    return int(rss) / 1024 if rss else math.nan
