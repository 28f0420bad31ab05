"""The `episodic-lab` command: the measuring tools of Episodic, apart from the product. Each
tool talks to a server through `episodic_client` (a subprocess `episodic serve`, or the
composition root's in-process door `episodic.bootstrap.open_app`)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from episodic_lab.bench.options import add_flags as add_bench_flags
from episodic_lab.bench_context.options import add_flags as add_bench_context_flags
from episodic_lab.bench_fairness.options import add_flags as add_bench_fairness_flags
from episodic_lab.bench_index import add_flags as add_bench_index_flags
from episodic_lab.bench_ingest.options import add_flags as add_bench_ingest_flags
from episodic_lab.bench_knowledge.options import add_flags as add_bench_knowledge_flags
from episodic_lab.bench_memories import add_flags as add_bench_memories_flags
from episodic_lab.bench_recall.options import add_flags as add_bench_recall_flags
from episodic_lab.bench_replicas import add_flags as add_bench_replicas_flags
from episodic_lab.bench_transfer import add_flags as add_bench_transfer_flags
from episodic_lab.evals.extraction import add_flags as add_eval_extraction_flags
from episodic_lab.evals.flags import add_flags as add_eval_recall_flags
from episodic_lab.evals.flags import add_pii_flags
from episodic_lab.evals.knowledge_flags import add_flags as add_eval_knowledge_flags
from episodic_lab.evals.known_facts_flags import add_flags as add_eval_known_facts_flags
from episodic_lab.evals.live_flags import add_flags as add_eval_live_flags
from episodic_lab.evals.locomo_data import MissingData
from episodic_lab.evals.name_retention_flags import add_flags as add_eval_names_flags
from episodic_lab.evals.shares_flags import add_flags as add_eval_shares_flags
from episodic_lab.report.options import add_flags as add_report_flags
from episodic_lab.soak.options import add_flags as add_soak_flags


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    help: str
    add_flags: Callable[[argparse.ArgumentParser], None]
    runner: str  # "module:function", imported only when the tool runs (its imports are heavy)


TOOLS = (
    Tool("bench", "measure durable AddMessage against Echo (own servers)", add_bench_flags,
         "episodic_lab.bench.main:run_bench"),
    Tool("bench-recall", "measure SearchEpisodes at 1k-1M episodes against Echo, and digest throughput",
         add_bench_recall_flags, "episodic_lab.bench_recall.main:run_bench_recall"),
    Tool("bench-context", "measure BuildContext against Echo, by history length, and RSS per conversation",
         add_bench_context_flags, "episodic_lab.bench_context.main:run_bench_context"),
    Tool("soak", "concurrent BuildContext streams plus appends for a minute: errors, RSS, stored == acked",
         add_soak_flags, "episodic_lab.soak.main:run_soak"),
    Tool("eval-recall", "LoCoMo recall@k/MRR through the API, next to BM25", add_eval_recall_flags,
         "episodic_lab.evals.locomo:run_eval"),
    Tool("eval-knowledge", "LoCoMo observations or a BEIR set (SciFact) as documents: SearchKnowledge "
         "nDCG@10 next to BM25, "
         "and what [Knowledge] renders", add_eval_knowledge_flags,
         "episodic_lab.evals.knowledge:run_eval_knowledge"),
    Tool("eval-known-facts", "what [Known Facts] renders on a labelled set: answered, precision, duplicates",
         add_eval_known_facts_flags, "episodic_lab.evals.known_facts:run_eval_known_facts"),
    Tool("eval-shares", "LoCoMo with knowledge, known facts and recall at once: answer coverage by budget "
         "split", add_eval_shares_flags, "episodic_lab.evals.shares:run_eval_shares"),
    Tool("eval-live", "LoCoMo replayed into one open episode: answer coverage of what the model sees of its "
         "own conversation, next to the transcript's tail and BM25 windows (4k, 8k)", add_eval_live_flags,
         "episodic_lab.evals.live:run_eval_live"),
    Tool("eval-names", "LoCoMo replayed through rolling compaction in-process: the share of the user's named "
         "things (names, numbers, dates) the summary keeps, before vs after keep_named", add_eval_names_flags,
         "episodic_lab.evals.name_retention:run_eval_names"),
    Tool("eval-pii", "precision/recall of PII detectors on a labelled set", add_pii_flags,
         "episodic_lab.evals.pii:run_eval_pii"),
    Tool("bench-index", "the FAISS index alone: build and search times, RSS, by size", add_bench_index_flags,
         "episodic_lab.bench_index:run_bench_index"),
    Tool("bench-memories", "measure SearchMemories at 100k memories (spread, one scope) against Echo",
         add_bench_memories_flags, "episodic_lab.bench_memories:run_bench_memories"),
    Tool("bench-knowledge", "measure SearchKnowledge at 100k chunks in one agent against Echo, and "
         "BuildContext with knowledge on vs off", add_bench_knowledge_flags,
         "episodic_lab.bench_knowledge.main:run_bench_knowledge"),
    Tool("bench-ingest", "knowledge ingestion through CreateDocuments (documents/s, tokens/s) by bulk and "
         "onnxruntime threads, with query latency meanwhile", add_bench_ingest_flags,
         "episodic_lab.bench_ingest.main:run_bench_ingest"),
    Tool("bench-replicas", "replicas on one PostgreSQL: visibility latency, start-up and RSS, throughput",
         add_bench_replicas_flags, "episodic_lab.bench_replicas:run_bench_replicas"),
    Tool("eval-extraction", "precision/recall of memory extraction on a labelled set, throughput on LoCoMo; "
         "--observations: recall/precision against LoCoMo observations through the API",
         add_eval_extraction_flags, "episodic_lab.evals.extraction:run_eval_extraction"),
    Tool("bench-transfer", "ExportUser / ImportUser of a user with 100k messages: messages/s, server RSS",
         add_bench_transfer_flags, "episodic_lab.bench_transfer:run_bench_transfer"),
    Tool("bench-fairness", "how much one tenant's abuse slows another's calls, as ratios to alone (prints)",
         add_bench_fairness_flags, "episodic_lab.bench_fairness.main:run_bench_fairness"),
    Tool("report", "every benchmark at one size (small ~10 min, full): report.md with tables, and PNG plots",
         add_report_flags, "episodic_lab.report.main:run_report"),
)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    module, function = args.runner.split(":")
    run: Callable[[argparse.Namespace], int] = getattr(importlib.import_module(module), function)
    try:
        return int(run(args))
    except MissingData as exc:  # a usage problem, not a crash: one line, exit 2 like argparse
        print(f"episodic-lab {args.command}: {exc}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="episodic-lab", description="Measuring tools for Episodic.")
    commands = parser.add_subparsers(dest="command", required=True)
    for tool in TOOLS:
        command = commands.add_parser(tool.name, help=tool.help)
        tool.add_flags(command)
        command.set_defaults(runner=tool.runner)
    return parser
