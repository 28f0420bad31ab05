"""`episodic-lab eval-knowledge`: LoCoMo's observations as agents' documents, searched through
the public gRPC API.

Each observation becomes one document (plain text, id sample_id.session.index) of the agent of
its conversation; a throwaway server (`episodic serve`, SQLite, `--embedder`) holds them. Each
question that has a gold document (an observation sharing a dialogue turn with its evidence)
is asked with SearchKnowledge in SEMANTIC and HYBRID mode (top 10), and ranked by a plain BM25
over the same texts in the lab (the product's word search is not a mode of its own): nDCG@10
and R@5 per conversation and overall.

Then what reaches the model: per question, BuildContext on an empty probe episode with the
question as user message (not appended), the agent's memory config: a 4k budget, knowledge
on, recall and known facts off, the knowledge defaults otherwise. Printed: the share of the
gold documents' answer words (their content words) in the rendered "[Knowledge]" items, how
often a gold document was rendered, and the section's items and tokens.

A directory in BEIR's layout (corpus.jsonl: SciFact's train split) is evaluated by
`knowledge_beir.py` instead: nDCG@10 and R@100 of top-100 searches over one agent."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from episodic.progress import Progress
from episodic_client.v1 import agent_pb2, context_pb2, knowledge_pb2
from episodic_lab.bench.server_process import running_server
from episodic_lab.evals.bm25 import Bm25
from episodic_lab.evals.knowledge_beir import run_eval_beir
from episodic_lab.evals.knowledge_beir_data import is_beir
from episodic_lab.evals.knowledge_data import Asked, Observation, load_knowledge, with_gold
from episodic_lab.evals.knowledge_metrics import (
    NDCG_AT,
    RECALL_AT,
    RankingReport,
    Seen,
    SeenReport,
    answer_coverage,
    answer_words,
    documents_ranked,
    rendered_bodies,
)
from episodic_lab.knowledge_calls import KnowledgeLab, knowledge_lab, text_document

AGENT_PREFIX = "locomo-knowledge-"
MODES = ("semantic", "hybrid")
TOP_K = NDCG_AT
BUDGET_TOKENS = 4000
MEMORY = agent_pb2.MemoryConfig(
    max_working_memory_tokens=BUDGET_TOKENS,
    knowledge=True,
    recall_mode=agent_pb2.RECALL_MODE_NONE,
    known_facts=False,
)
KNOWLEDGE = context_pb2.CONTEXT_SECTION_KNOWLEDGE
SHOWN = (knowledge_pb2.KNOWLEDGE_FATE_WHOLE, knowledge_pb2.KNOWLEDGE_FATE_TRIMMED)


def agent_of(sample_id: str) -> str:
    return AGENT_PREFIX + sample_id


def run_eval_knowledge(args: argparse.Namespace) -> int:
    if args.format == "beir" or (args.format == "auto" and is_beir(args.data)):
        return run_eval_beir(args)
    observations, questions = load_knowledge(args.data)
    asked, skipped = with_gold(questions, observations)
    if args.limit:
        asked = asked[: args.limit]
    agents = len({o.sample_id for o in observations})
    print(
        f"eval-knowledge: {len(observations)} documents in {agents} agents; {len(asked)} questions with a "
        f"gold document ({skipped} of {len(questions)} without one skipped); --embedder {args.embedder}"
    )
    ranking = RankingReport()
    report_bm25(ranking, observations, asked)
    seen = asyncio.run(_evaluate(observations, asked, args.embedder, ranking, not args.no_context))
    print(ranking.table())
    print(ranking.latencies())
    if seen is not None:
        print(
            "what reaches the model: BuildContext per question on an empty probe episode "
            f"({BUDGET_TOKENS}-token budget, knowledge on with its defaults, recall off, known facts off); "
            "answer words: the share of the gold documents' content words in the rendered [Knowledge] items"
        )
        print(seen.table())
    beaten = verdict(ranking)
    return 1 if args.gate and "hybrid" not in beaten else 0


def report_bm25(report: RankingReport, observations: Sequence[Observation], asked: Sequence[Asked]) -> None:
    """The lab's BM25 over the same documents, within each conversation."""
    by_sample: dict[str, list[Observation]] = {}
    for o in observations:
        by_sample.setdefault(o.sample_id, []).append(o)
    indexes = {k: Bm25([o.text for o in v]) for k, v in by_sample.items()}
    for a in asked:
        q = a.question
        started = time.perf_counter()
        scores = indexes[q.sample_id].scores(q.text)
        report.timed("bm25", time.perf_counter() - started)
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        report.add("bm25", q.sample_id, [by_sample[q.sample_id][i].document_id for i in order], a.gold)


async def _evaluate(
    observations: list[Observation], asked: list[Asked], embedder: str, ranking: RankingReport, context: bool
) -> SeenReport | None:
    texts = {o.document_id: o.text for o in observations}
    async with loaded_server(observations, embedder) as lab:
        for mode in MODES:
            await _search(lab, asked, mode, ranking)
        if not context:
            return None
        seen = SeenReport()
        with Progress("BuildContext", len(asked), unit="questions") as bar:
            for a in asked:
                seen.add(a.question.sample_id, await _build(lab, a, texts))
                bar.advance()
        return seen


@asynccontextmanager
async def loaded_server(observations: Sequence[Observation], embedder: str) -> AsyncIterator[KnowledgeLab]:
    """A throwaway server (SQLite, `--embedder embedder`) holding every observation as a document
    of its conversation's agent; yields the lab's calls to it."""
    with tempfile.TemporaryDirectory(prefix="episodic-eval-knowledge-") as tmp:
        async with (
            running_server(f"sqlite:///{tmp}/eval.db", Path(tmp), ("--embedder", embedder)) as server,
            knowledge_lab(server.target) as lab,
        ):
            started = time.perf_counter()
            chunks = await _load(lab, observations)
            print(
                f"loaded {len(observations)} documents ({chunks} chunks) "
                f"in {time.perf_counter() - started:.1f} s"
            )
            yield lab


async def _load(lab: KnowledgeLab, observations: Sequence[Observation]) -> int:
    by_sample: dict[str, list[Observation]] = {}
    for o in observations:
        by_sample.setdefault(o.sample_id, []).append(o)
    chunks = 0
    with Progress("documents", len(observations), unit="documents") as bar:
        for sample_id, mine in by_sample.items():
            await lab.client.create_agent(agent_of(sample_id), model="gpt-4o", memory_config=MEMORY)
            chunks += await lab.create_documents(
                agent_of(sample_id), [text_document(o.document_id, o.text) for o in mine]
            )
            bar.advance(len(mine))
    return chunks


async def _search(lab: KnowledgeLab, asked: Sequence[Asked], mode: str, report: RankingReport) -> None:
    with Progress(f"search ({mode})", len(asked), unit="questions") as bar:
        for a in asked:
            q = a.question
            started = time.perf_counter()
            reply = await lab.search(agent_of(q.sample_id), q.text, mode, TOP_K)
            report.timed(mode, time.perf_counter() - started)
            report.add(mode, q.sample_id, documents_ranked(h.chunk.document_id for h in reply.hits), a.gold)
            bar.advance()


async def _build(lab: KnowledgeLab, a: Asked, texts: dict[str, str]) -> Seen:
    q = a.question
    probe = (await lab.client.open_episode(agent_of(q.sample_id), q.sample_id)).episode.episode_id
    built = await lab.client.build_context(probe, user_message=q.text)
    content = "\n".join(m.content for m in built.messages if m.section == KNOWLEDGE)
    shown = [k for k in built.report.knowledge if k.fate in SHOWN]
    rendered = rendered_bodies(content, [(k.start_char, k.end_char) for k in shown])
    return Seen(
        coverage=answer_coverage(answer_words(texts[d] for d in a.gold), rendered),
        gold_rendered=any(k.document_id in a.gold for k in shown),
        rendered_items=len(shown),
        tokens=built.report.section_tokens.knowledge,
    )


def verdict(report: RankingReport) -> set[str]:
    """Prints each server mode against bm25; returns the modes that beat it on nDCG@10 and R@5."""
    base = report.overall("bm25")
    beaten = set()
    for mode in MODES:
        mine = report.overall(mode)
        beats = mine[0] > base[0] and mine[1] > base[1]
        figures = (
            f"nDCG@{NDCG_AT} {mine[0]:.3f} vs {base[0]:.3f}, R@{RECALL_AT} {mine[1]:.3f} vs {base[1]:.3f}"
        )
        print(f"{mode} vs bm25: {figures}: {'beats' if beats else 'does NOT beat'} bm25")
        beaten |= {mode} if beats else set()
    return beaten
