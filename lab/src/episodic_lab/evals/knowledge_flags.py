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
        help="directory with observations.jsonl and questions.jsonl",
    )
    parser.add_argument(
        "--gate",
        action="store_true",
        help="exit 1 unless hybrid beats bm25 on nDCG@10 and R@5 (overall)",
    )
    parser.add_argument(
        "--embedder",
        default="hashing",
        choices=("minilm", "minilm-fp32", "hashing"),
        help="the server's embedder",
    )
    parser.add_argument("--limit", type=int, default=0, help="ask only the first N questions (0: all)")
    parser.add_argument(
        "--no-context",
        action="store_true",
        help="skip what reaches the model (BuildContext per question)",
    )
