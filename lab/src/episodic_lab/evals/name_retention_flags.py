"""Flags of `episodic-lab eval-names` (kept apart so the CLI can build its parser cheaply)."""

from __future__ import annotations

import argparse
from pathlib import Path

from episodic_lab.evals.flags import DEFAULT_DATA


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="directory with sessions.jsonl and questions.jsonl"
    )
    parser.add_argument(
        "--allowance", type=int, default=2000, help="history tokens past which the tail is compacted"
    )
