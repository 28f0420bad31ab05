"""Flags of `episodic-lab eval-knowledge` (kept apart so the CLI can build its parser cheaply)."""

from __future__ import annotations

import argparse
from pathlib import Path

from episodic_lab.evals.flags import DEFAULT_DATA


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help="directory with observations.jsonl and questions.jsonl (LoCoMo), or a BEIR-layout set "
        "(corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv: e.g. ../shared/eval/scifact-train)",
    )
    parser.add_argument(
        "--format",
        default="auto",
        choices=("auto", "locomo", "beir"),
        help="the data's layout (auto: beir when the directory holds corpus.jsonl)",
    )
    parser.add_argument(
        "--gate",
        action="store_true",
        help="exit 1 unless hybrid beats bm25 on nDCG@10 and R@5 (overall); BEIR: on nDCG@10, and "
        "reaches --floor",
    )
    parser.add_argument(
        "--embedder",
        default="hashing",
        choices=("minilm", "minilm-fp32", "hashing"),
        help="the server's embedder",
    )
    parser.add_argument("--limit", type=int, default=0, help="ask only the first N questions (0: all)")
    beir = parser.add_argument_group("BEIR layout")
    beir.add_argument("--split", default="train", help="the qrels file read: qrels/SPLIT.tsv")
    beir.add_argument(
        "--documents",
        type=int,
        default=0,
        help="load only the asked queries' relevant documents and a seeded sample of the others, "
        "N in all (0: every document)",
    )
    beir.add_argument("--floor", type=float, default=0.0, help="--gate: hybrid's nDCG@10 at least this")
    beir.add_argument(
        "--words-only",
        action="store_true",
        help="no server: only the in-process rankings (the lab's bm25, the server's word index)",
    )
    parser.add_argument(
        "--no-context",
        action="store_true",
        help="skip what reaches the model (BuildContext per question)",
    )
