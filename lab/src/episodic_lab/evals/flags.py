"""Flags of `episodic-lab eval-recall` and `eval-pii` (kept apart so the CLI can build its parser cheaply)."""

from __future__ import annotations

import argparse
from pathlib import Path

# The repository's checkout sits next to shared/ (lab/src/episodic_lab/evals -> repo -> ..).
DEFAULT_DATA = Path(__file__).resolve().parents[4].parent / "shared" / "eval" / "locomo-dev"


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="directory with sessions.jsonl and questions.jsonl"
    )
    parser.add_argument("--modes", default="recency,semantic,hybrid", help="search modes to evaluate")
    parser.add_argument("--gate", default="", help="exit 1 unless this mode beats bm25 on R@5 and MRR")


def add_pii_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", default=None, help="JSONL [default: tests/data/pii_labelled.jsonl]")
    parser.add_argument("--errors", action="store_true", help="list each false positive and negative")
