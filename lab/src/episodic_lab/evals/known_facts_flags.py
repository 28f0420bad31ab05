"""Flags of `episodic-lab eval-known-facts` (kept apart so the CLI can build its parser cheaply)."""

from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_DATA = Path(__file__).with_name("known_facts_data.jsonl")


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="labelled JSONL (one user a line)")
    parser.add_argument(
        "--embedder",
        default="hashing",
        choices=("minilm", "minilm-fp32", "hashing"),
        help="the server's embedder",
    )
    parser.add_argument("--show", action="store_true", help="print what each question rendered")
    parser.add_argument("--gate", action="store_true", help="exit 1 beyond any floor or ceiling")
    parser.add_argument("--floor-answered", type=float, default=0.0, help="answered-rate floor for --gate")
    parser.add_argument("--floor-precision", type=float, default=0.0, help="precision floor for --gate")
    parser.add_argument("--floor-mrr", type=float, default=0.0, help="MRR floor (first gold fact) for --gate")
    parser.add_argument(
        "--ceiling-duplicates", type=float, default=1.0, help="duplicates-per-context ceiling for --gate"
    )
