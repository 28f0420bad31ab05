"""Flags of `episodic-lab eval-live` (kept apart so the CLI can build its parser cheaply)."""

from __future__ import annotations

import argparse
from pathlib import Path

from episodic_lab.evals.flags import DEFAULT_DATA

DEFAULT_BUDGETS = (4000, 8000)
# What CI requires of the rendered context's covered share (--gate), by budget: the figures
# measured before recall inside the live episode landed (0.452 and 0.516, MiniLM), minus 0.03.
FLOORS = {4000: 0.90, 8000: 0.92}
FLOOR_HELP = "--gate: floor of the rendered covered share (overall)"
EMBEDDERS = ("minilm", "minilm-fp32", "hashing")


def budgets_of(text: str) -> tuple[int, ...]:
    """ "4000,8000" as token budgets, each once, in the order given."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"budgets {text!r} are not positive whole token counts (4000,8000)")
    return tuple(dict.fromkeys(int(p) for p in parts))


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="directory with sessions.jsonl and questions.jsonl"
    )
    parser.add_argument(
        "--budgets",
        type=budgets_of,
        default=DEFAULT_BUDGETS,
        help="max_working_memory_tokens to replay at, comma-separated (default 4000,8000), an agent each",
    )
    parser.add_argument("--embedder", default="minilm", choices=EMBEDDERS, help="the server's embedder")
    parser.add_argument(
        "--limit", type=int, default=0, help="ask only the first N answerable questions of each conversation"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument(
        "--gate",
        action="store_true",
        help="exit 1 when the rendered covered share at 4k or 8k is below its floor, or below BM25 windows",
    )
    parser.add_argument("--floor-4k", type=float, default=FLOORS[4000], help=f"{FLOOR_HELP} at 4000 tokens")
    parser.add_argument("--floor-8k", type=float, default=FLOORS[8000], help=f"{FLOOR_HELP} at 8000 tokens")
