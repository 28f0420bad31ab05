"""`episodic-lab eval-knowledge` on a BEIR-layout set (SciFact's train split): a public
document-retrieval dev set for knowledge, searched through the public gRPC API.

Every document becomes one plain-text document of one agent (its title in the Document's
title field, its text the body), created through CreateDocuments in calls of 100, on a
throwaway server (`episodic serve`, SQLite, `--embedder`). Each query is asked with
SearchKnowledge, top 100, in SEMANTIC and HYBRID mode; chunks collapse to their documents
(first occurrence) and are scored as BEIR scores: nDCG@10 and Recall@100. Beside them, two
rankings in process over the same documents (title and text): `bm25`, the lab's plain BM25
(the baseline, as on LoCoMo), and `words`, the server's own word index (index/words.py) over
each document as it is indexed (title, line break, text), which hybrid fuses with meaning."""

from __future__ import annotations

import argparse
import asyncio
import math
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

from episodic.domain.chunking import DocumentFormat
from episodic.domain.knowledge import chunk_documents, headed_text
from episodic.index.words import Bm25WordIndex
from episodic.progress import Progress
from episodic_lab.bench.server_process import running_server
from episodic_lab.evals.bm25 import tokens
from episodic_lab.evals.knowledge_beir_data import BeirDocument, BeirQuery, BeirSet, load_beir, subset
from episodic_lab.evals.knowledge_metrics import documents_ranked, ndcg_at, recall_at
from episodic_lab.knowledge_calls import KnowledgeLab, knowledge_lab, text_document

AGENT = "beir-knowledge"
MODES = ("semantic", "hybrid")
TOP_K = 100  # SearchKnowledge's most
NDCG_AT = 10
RECALL_AT = 100
BM25_K1, BM25_B = 0.9, 0.4  # Anserini's BEIR defaults (its published BM25 figures)


def run_eval_beir(args: argparse.Namespace) -> int:
    data = load_beir(args.data, args.split)
    data = subset(data, args.limit, args.documents)
    print(
        f"eval-knowledge (BEIR): {len(data.documents)} documents in one agent, {len(data.queries)} queries "
        f"of {args.data.name} qrels/{args.split}.tsv; --embedder {args.embedder}"
    )
    report = BeirReport()
    _bm25(report, data)
    _words(report, data)
    if not args.words_only:
        asyncio.run(_served(report, data, args.embedder))
    print(report.table())
    if args.words_only:
        return 0
    return 1 if args.gate and not gate(report, args.floor) else 0


def gate(report: BeirReport, floor: float) -> bool:
    hybrid, base = report.means("hybrid")[0], report.means("bm25")[0]
    beats = hybrid > base
    print(
        f"hybrid vs bm25: nDCG@{NDCG_AT} {hybrid:.3f} vs {base:.3f} ({'beats' if beats else 'does NOT beat'} "
        f"bm25); floor {floor:.3f}: {'met' if hybrid >= floor else 'NOT met'}"
    )
    return beats and hybrid >= floor


class BeirReport:
    """nDCG@10 and R@100 per method, and each method's seconds a query."""

    def __init__(self) -> None:
        self.ranks: dict[str, list[tuple[float, float]]] = defaultdict(list)
        self.seconds: dict[str, list[float]] = defaultdict(list)

    def add(self, method: str, ranked: Sequence[str], relevant: frozenset[str], seconds: float) -> None:
        self.ranks[method].append(
            (ndcg_at(ranked, relevant, NDCG_AT), recall_at(ranked, relevant, RECALL_AT))
        )
        self.seconds[method].append(seconds)

    def means(self, method: str) -> tuple[float, float]:
        rows = self.ranks[method]
        n = max(len(rows), 1)
        return sum(r[0] for r in rows) / n, sum(r[1] for r in rows) / n

    def table(self) -> str:
        lines = [f"{'method':<10} {'n':>5}  nDCG@{NDCG_AT}  R@{RECALL_AT}  query ms p50"]
        for method, rows in self.ranks.items():
            ndcg, recall = self.means(method)
            ordered = sorted(self.seconds[method])
            p50 = ordered[len(ordered) // 2] * 1000 if ordered else 0.0
            lines.append(f"{method:<10} {len(rows):>5}  {ndcg:>7.3f}  {recall:>5.3f}  {p50:>12.2f}")
        return "\n".join(lines)


class InvertedBm25:
    """Okapi BM25 (the lab's tokens: letters and digits, lower case) over an inverted index:
    the baseline, scored only over the documents holding a query word."""

    def __init__(self, texts: Sequence[str], k1: float = BM25_K1, b: float = BM25_B) -> None:
        counted = [Counter(tokens(t)) for t in texts]
        lengths = [sum(c.values()) for c in counted]
        average = sum(lengths) / max(len(lengths), 1)
        self._postings: dict[str, list[tuple[int, float]]] = defaultdict(list)
        for i, (c, length) in enumerate(zip(counted, lengths, strict=True)):
            norm = k1 * (1 - b + b * length / max(average, 1e-9))
            for term, tf in c.items():
                self._postings[term].append((i, tf * (k1 + 1) / (tf + norm)))
        n = len(texts)
        self._idf = {t: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for t, p in self._postings.items()}

    def top(self, query: str, k: int) -> list[int]:
        scores: dict[int, float] = defaultdict(float)
        for term in tokens(query):  # repeats count, as in the lab's Bm25
            idf = self._idf.get(term, 0.0)
            for i, weight in self._postings.get(term, ()):
                scores[i] += idf * weight
        return sorted(scores, key=lambda i: (-scores[i], i))[:k]


def indexed_text(d: BeirDocument) -> str:
    """A document as the server would embed and index it in one chunk (domain/knowledge.py)."""
    return headed_text(d.title, (), d.text)


def indexed_chunks(documents: Sequence[BeirDocument]) -> list[tuple[str, str]]:
    """(key, text) of every chunk as the server cuts plain text and indexes it."""
    keyed = []
    for at in range(0, len(documents), 100):  # the call's chunk limit, as CreateDocuments of 100
        batch = documents[at : at + 100]
        cut = chunk_documents([(str(i), d.text, DocumentFormat.TEXT) for i, d in enumerate(batch)])
        for d, chunks in zip(batch, cut, strict=True):
            keyed += [
                (f"{d.document_id}#{c.index}", headed_text(d.title, c.heading_path, c.text)) for c in chunks
            ]
    return keyed


def _bm25(report: BeirReport, data: BeirSet) -> None:
    index = InvertedBm25([f"{d.title} {d.text}" for d in data.documents])
    for q in data.queries:
        started = time.perf_counter()
        ranked = [data.documents[i].document_id for i in index.top(q.text, TOP_K)]
        report.add("bm25", ranked, q.relevant, time.perf_counter() - started)


def _words(report: BeirReport, data: BeirSet) -> None:
    index = Bm25WordIndex()
    index.add(indexed_chunks(data.documents))
    for q in data.queries:
        started = time.perf_counter()
        hits = index.search(q.text, TOP_K)
        ranked = documents_ranked(h.episode_id.rsplit("#", 1)[0] for h in hits)
        report.add("words", ranked, q.relevant, time.perf_counter() - started)


async def _served(report: BeirReport, data: BeirSet, embedder: str) -> None:
    with tempfile.TemporaryDirectory(prefix="episodic-eval-beir-") as tmp:
        async with (
            running_server(f"sqlite:///{tmp}/eval.db", Path(tmp), ("--embedder", embedder)) as server,
            knowledge_lab(server.target) as lab,
        ):
            await _load(lab, data.documents, embedder)
            for mode in MODES:
                await _search(lab, data.queries, mode, report)


async def _load(lab: KnowledgeLab, documents: Sequence[BeirDocument], embedder: str) -> None:
    await lab.client.create_agent(AGENT, model="gpt-4o")
    inputs = [text_document(d.document_id, d.text, d.title) for d in documents]
    words = sum(len(indexed_text(d).split()) for d in documents)
    started = time.perf_counter()
    chunks = 0
    step = 100
    with Progress("documents", len(inputs), unit="documents") as bar:
        for at in range(0, len(inputs), step):
            chunks += await lab.create_documents(AGENT, inputs[at : at + step])
            bar.advance(len(inputs[at : at + step]))
    seconds = time.perf_counter() - started
    print(
        f"ingestion: {len(documents)} documents ({chunks} chunks, {words} words) in {seconds:.1f} s: "
        f"{len(documents) / seconds:.1f} documents/s, {words / seconds:.0f} words/s, {chunks / seconds:.1f} "
        f"chunks/s (CreateDocuments of 100, one call in flight; --embedder {embedder} with the server's "
        "embedder defaults: minilm int8 embeds one text a call on 1 thread)"
    )


async def _search(lab: KnowledgeLab, queries: Sequence[BeirQuery], mode: str, report: BeirReport) -> None:
    with Progress(f"search ({mode})", len(queries), unit="queries") as bar:
        for q in queries:
            started = time.perf_counter()
            reply = await lab.search(AGENT, q.text, mode, TOP_K)
            ranked = documents_ranked(h.chunk.document_id for h in reply.hits)
            report.add(mode, ranked, q.relevant, time.perf_counter() - started)
            bar.advance()
