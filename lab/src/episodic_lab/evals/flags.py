"""Flags of `episodic-lab eval-recall` (and its --what-the-model-sees mode) and `eval-pii` (kept
apart so the CLI can build its parser cheaply)."""

from __future__ import annotations

import argparse
from pathlib import Path

# The repository's checkout sits next to shared/ (lab/src/episodic_lab/evals -> repo -> ..).
DEFAULT_DATA = Path(__file__).resolve().parents[4].parent / "shared" / "eval" / "locomo-dev"


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="directory with sessions.jsonl and questions.jsonl"
    )
    parser.add_argument(
        "--chats",
        type=Path,
        default=None,
        help="instead of LoCoMo, a hand-written set of support, assistant and group chats "
        "(tests/data/recall_chats.jsonl), same modes, BM25 baseline and --gate",
    )
    parser.add_argument("--modes", default="recency,semantic,hybrid", help="search modes to evaluate")
    parser.add_argument("--gate", default="", help="exit 1 unless this mode beats bm25 on R@5 and MRR")
    parser.add_argument(
        "--floor-r5",
        type=float,
        default=0.0,
        help="with --gate, also exit 1 when its overall R@5 is below this",
    )
    parser.add_argument(
        "--floor-mrr",
        type=float,
        default=0.0,
        help="with --gate, also exit 1 when its overall MRR is below this",
    )
    parser.add_argument(
        "--embedder",
        default="minilm",
        choices=("minilm", "minilm-fp32", "hashing"),
        help="the server's embedder",
    )
    sees = parser.add_argument_group(
        "what the model sees",
        "BuildContext per question on an empty probe episode (HYBRID, top 5, 4k budget)",
    )
    sees.add_argument(
        "--what-the-model-sees",
        action="store_true",
        help="evaluate the rendered [Past Conversations] instead of SearchEpisodes rankings",
    )
    sees.add_argument("--limit", type=int, default=0, help="ask only the first N questions (0: all)")
    sees.add_argument("--json", type=Path, default=None, help="also write the figures here")
    sees.add_argument(
        "--gate-context",
        action="store_true",
        help="exit 1 when evidence rendered or covered share fall below the floors, or rendered < bm25 raw",
    )
    sees.add_argument(
        "--floor-evidence", type=float, default=0.7, help="floor of evidence rendered (overall)"
    )
    sees.add_argument("--floor-covered", type=float, default=0.5, help="floor of the covered share (overall)")
    sees.add_argument(
        "--recall",
        choices=("hybrid", "none"),
        default="hybrid",
        help="past-conversation recall (none: what known facts alone bring)",
    )
    sees.add_argument(
        "--known-facts",
        choices=("on", "off", "compare"),
        default="on",
        help="the [Known Facts] section of extracted memories (on: the product default; compare: "
        "both, same budget, and the difference per category)",
    )


def add_pii_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", default=None, help="JSONL [default: tests/data/pii_labelled.jsonl]")
    parser.add_argument("--errors", action="store_true", help="list each false positive and negative")
