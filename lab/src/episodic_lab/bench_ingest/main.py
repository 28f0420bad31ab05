"""`episodic-lab bench-ingest`: how fast knowledge loads through the public API, and what
loading costs the queries meanwhile, for each server choice of a grid.

Each choice (`--bulk-embed-threads` x `--embedder-threads`) gets a throwaway `episodic serve`
(SQLite, `--embedder minilm` by default) into which the corpus's first `--documents`
documents (SciFact's train abstracts by default: title and text, one plain-text document
each) are written by CreateDocuments in calls of 100, one call in flight, as eval-knowledge
loads them. Throughput: documents/s, chunks/s and tokens/s, the tokens being the embedder's
own (MiniLM's WordPiece over each chunk's embedded text, [CLS] and [SEP] included, cut at
256: what the model runs), and words/s (whitespace words of the same texts).

Meanwhile a prober on a channel of its own sends, every `--probe-interval` seconds, an Echo
and then a SearchKnowledge (semantic, top 10, a SciFact query made unique so that no query
vector is cached, in an agent of its own holding the corpus's last 20 documents): their p50
while loading, and again on the idle server once loading is done (as many probes), say
whether a query waits behind bulk work.

Before the servers, in process: int8 batching. The first `--drift-texts` chunks embedded one
by one and in batches of similar length (2, 4, 8): the cosine of each batched vector to its
one-by-one vector (mean, min), and the batches' texts/s against one by one (fastest of 3).

Choices take turns (`--rounds`), so a busy minute of the machine weighs on all; the table
gives each choice's median throughput and the ratio to the grid's first. Prints, never asserts."""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from episodic.embed.bert_tokenizer import bert_uncased_tokenizer, load_vocab
from episodic.embed.minilm import MiniLmEmbedder
from episodic.progress import Progress
from episodic_client.v1 import knowledge_service_pb2
from episodic_lab.bench.machine import machine_facts
from episodic_lab.bench.report import percentile
from episodic_lab.bench.server_process import UNPACED, cpu_seconds, running_server
from episodic_lab.bench.workloads import ECHO_PAYLOAD
from episodic_lab.evals.knowledge_beir import indexed_chunks
from episodic_lab.evals.knowledge_beir_data import BeirDocument, load_beir
from episodic_lab.knowledge_calls import MAX_DOCUMENTS_PER_CALL, KnowledgeLab, knowledge_lab, text_document

AGENT = "bench-ingest"
PROBED = "bench-ingest-probed"  # the prober's agent, loaded before timing: its searches embed and search
PROBED_DOCUMENTS = 20  # the corpus's last ones
TOP_K = 10
DRIFT_BATCHES = (2, 4, 8)
DRIFT_REPEATS = 3
# The tenant loads thousands of chunks a minute: past its share of chunk writes.
SERVER_FLAGS = ("--tenant-knowledge-chunks-per-second", "1000000", *UNPACED)


def run_bench_ingest(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))


@dataclass(frozen=True, slots=True)
class Choice:
    bulk_threads: int
    intra_threads: int

    @classmethod
    def parse(cls, text: str) -> Choice:
        """BULKxINTRA, or "default": no flag, whatever the server's defaults are (0 x 0)."""
        if text.strip() == "default":
            return cls(0, 0)
        bulk, _, intra = text.strip().partition("x")
        return cls(int(bulk), int(intra or "1"))

    @property
    def label(self) -> str:
        if not self.bulk_threads:
            return "server defaults"
        return f"bulk {self.bulk_threads}, intra-op {self.intra_threads}"

    @property
    def flags(self) -> tuple[str, ...]:
        if not self.bulk_threads:
            return ()
        return ("--bulk-embed-threads", str(self.bulk_threads), "--embedder-threads", str(self.intra_threads))


@dataclass(frozen=True, slots=True)
class Corpus:
    documents: Sequence[BeirDocument]
    probed: Sequence[BeirDocument]  # the prober's agent's
    queries: Sequence[str]
    chunks: int
    tokens: int  # the embedder's, over every chunk's embedded text
    words: int

    def inputs(self) -> list[knowledge_service_pb2.DocumentInput]:
        return [text_document(d.document_id, d.text, d.title) for d in self.documents]


@dataclass(slots=True)
class Probes:
    echo: list[float] = field(default_factory=list)
    search: list[float] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Run:
    seconds: float
    chunks: int
    server_cpu_seconds: float
    loading: Probes
    idle: Probes


async def _run(args: argparse.Namespace) -> int:
    choices = [Choice.parse(part) for part in args.grid.split(",") if part.strip()]
    corpus = _corpus(args.data, args.documents)
    machine = machine_facts()
    print(
        f"bench-ingest: {len(corpus.documents):,} documents of {args.data.name} ({corpus.chunks:,} chunks, "
        f"{corpus.tokens:,} embedder tokens, {corpus.words:,} words) through CreateDocuments of "
        f"{MAX_DOCUMENTS_PER_CALL}, one call in flight; --embedder {args.embedder}, `episodic serve` on "
        f"SQLite ({machine['cores']} cores, load average {machine['load average at start']})"
    )
    if args.drift_texts > 0:
        _drift(corpus, args.drift_texts)
    runs: dict[Choice, list[Run]] = {c: [] for c in choices}
    for round_ in range(max(args.rounds, 1)):
        for choice in choices:
            run = await _ingest(args, choice, corpus, round_)
            runs[choice].append(run)
            print(
                f"  round {round_ + 1}, {choice.label}: "
                f"{len(corpus.documents) / run.seconds:.1f} documents/s ({run.seconds:.1f} s)",
                flush=True,
            )
    _table(corpus, runs)
    return 0


def _corpus(data: Path, documents: int) -> Corpus:
    beir = load_beir(data)
    chosen = beir.documents[:documents] if documents > 0 else beir.documents
    texts = [text for _, text in indexed_chunks(chosen)]
    tokenizer = bert_uncased_tokenizer(load_vocab())
    tokens = sum(len(e.ids) for e in tokenizer.encode_batch(texts))
    words = sum(len(t.split()) for t in texts)
    probed = beir.documents[-PROBED_DOCUMENTS:]
    return Corpus(chosen, probed, [q.text for q in beir.queries], len(texts), tokens, words)


def _drift(corpus: Corpus, count: int) -> None:
    """int8 batches of similar length against one text per call, in process, one thread; each
    way timed DRIFT_REPEATS times in turn, its fastest kept (the machine's other work only
    ever slows a pass down)."""
    texts = [text for _, text in indexed_chunks(corpus.documents)][:count]
    ways = {
        1: MiniLmEmbedder(),
        **{size: MiniLmEmbedder(batch_size=size, batch_int8=True) for size in DRIFT_BATCHES},
    }
    vectors: dict[int, NDArray[np.float64]] = {}
    fastest = dict.fromkeys(ways, math.inf)
    for _ in range(DRIFT_REPEATS):
        for size, embedder in ways.items():
            began = time.perf_counter()
            vectors[size] = np.asarray(embedder.embed(texts))
            fastest[size] = min(fastest[size], time.perf_counter() - began)
    print(
        f"int8 batching, in process, 1 thread, {len(texts)} chunks, fastest of {DRIFT_REPEATS}: "
        f"one by one {len(texts) / fastest[1]:.1f} texts/s"
    )
    for size in DRIFT_BATCHES:
        cosines = (vectors[1] * vectors[size]).sum(axis=1)
        print(
            f"  batches of up to {size} (similar lengths): {len(texts) / fastest[size]:.1f} texts/s "
            f"({fastest[1] / fastest[size]:.2f}x), cosine to one by one: "
            f"mean {cosines.mean():.4f}, min {cosines.min():.4f}"
        )


async def _ingest(args: argparse.Namespace, choice: Choice, corpus: Corpus, round_: int) -> Run:
    flags = ("--embedder", args.embedder, *choice.flags, *SERVER_FLAGS, *args.server_flag)
    inputs = corpus.inputs()
    with tempfile.TemporaryDirectory(prefix="episodic-bench-ingest-") as tmp:
        async with (
            running_server(f"sqlite:///{tmp}/bench.db", Path(tmp), flags) as server,
            knowledge_lab(server.target) as lab,
            knowledge_lab(server.target) as prober,
        ):
            for agent in (AGENT, PROBED):
                await lab.client.create_agent(agent, model="gpt-4o")
            await lab.create_documents(
                PROBED, [text_document(d.document_id, d.text, d.title) for d in corpus.probed]
            )
            await lab.search(PROBED, "warm up", "semantic", TOP_K)  # the model's first query
            queries = _Queries(corpus.queries, f"r{round_}")
            loading, stop = Probes(), asyncio.Event()
            probing = asyncio.create_task(_probe(prober, queries, loading, args.probe_interval, stop))
            cpu_before, began, chunks = cpu_seconds(server.pid), time.perf_counter(), 0
            try:
                with Progress(choice.label, len(inputs), unit="documents") as bar:
                    for at in range(0, len(inputs), MAX_DOCUMENTS_PER_CALL):
                        batch = inputs[at : at + MAX_DOCUMENTS_PER_CALL]
                        chunks += await lab.create_documents(AGENT, batch)
                        bar.advance(len(batch))
                seconds = time.perf_counter() - began
                cpu = cpu_seconds(server.pid) - cpu_before
            finally:
                stop.set()
                await probing
            idle = Probes()
            await _probe(prober, queries, idle, args.probe_interval, None, len(loading.search))
    return Run(seconds, chunks, cpu, loading, idle)


class _Queries:
    """SciFact queries, each made unique by a suffix: the server caches query vectors by text."""

    def __init__(self, texts: Sequence[str], tag: str) -> None:
        self._texts, self._tag, self._n = texts, tag, 0

    def next(self) -> str:
        self._n += 1
        return f"{self._texts[self._n % len(self._texts)]} ({self._tag}-{self._n})"


async def _probe(
    lab: KnowledgeLab,
    queries: _Queries,
    into: Probes,
    interval: float,
    stop: asyncio.Event | None,
    count: int = 0,
) -> None:
    """An Echo and a SearchKnowledge every `interval` s, until `stop` is set (or `count` pairs)."""
    while (stop is None or not stop.is_set()) and (stop is not None or len(into.search) < max(count, 10)):
        began = time.perf_counter()
        await lab.client.echo(ECHO_PAYLOAD)
        into.echo.append(time.perf_counter() - began)
        query = queries.next()
        began = time.perf_counter()
        await lab.search(PROBED, query, "semantic", TOP_K)
        into.search.append(time.perf_counter() - began)
        await asyncio.sleep(interval)


def _p50_ms(samples: Sequence[float]) -> float:
    return percentile(sorted(samples), 50) * 1000 if samples else float("nan")


def _table(corpus: Corpus, runs: dict[Choice, list[Run]]) -> None:
    print(
        f"{'choice':<22} {'docs/s':>7} {'chunks/s':>8} {'tokens/s':>8} {'words/s':>7} {'x first':>7} "
        f"{'cpu s/doc':>9} {'search p50 idle':>15} {'loading':>8} {'x idle':>6} "
        f"{'echo p50 idle':>13} {'loading':>8} {'probes':>6}"
    )
    first: float | None = None
    for choice, done in runs.items():
        seconds = statistics.median(r.seconds for r in done)
        first = first if first is not None else seconds
        loading, idle = _pooled(r.loading for r in done), _pooled(r.idle for r in done)
        cpu = statistics.median(r.server_cpu_seconds for r in done) / max(len(corpus.documents), 1)
        search_idle, search_loading = _p50_ms(idle.search), _p50_ms(loading.search)
        print(
            f"{choice.label:<22} {len(corpus.documents) / seconds:>7.1f} {corpus.chunks / seconds:>8.1f} "
            f"{corpus.tokens / seconds:>8.0f} {corpus.words / seconds:>7.0f} {first / seconds:>7.2f} "
            f"{cpu:>9.3f} {search_idle:>15.1f} {search_loading:>8.1f} {search_loading / search_idle:>6.2f} "
            f"{_p50_ms(idle.echo):>13.2f} {_p50_ms(loading.echo):>8.2f} {len(loading.search):>6}"
        )
    print(
        "docs/s, chunks/s, tokens/s (the embedder's WordPiece tokens) and words/s: median over rounds; "
        "x first: throughput against the grid's first choice; cpu s/doc: the server's CPU while loading; "
        "p50 in ms of the prober's calls while loading and on the idle server after it"
    )


def _pooled(probes: Iterable[Probes]) -> Probes:
    pooled = Probes()
    for p in probes:
        pooled.echo += p.echo
        pooled.search += p.search
    return pooled
