"""Flags of `episodic-lab eval-shares`, and the splits they name (kept apart so the CLI can build
its parser cheaply)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from episodic_lab.evals.flags import DEFAULT_DATA


@dataclass(frozen=True, slots=True)
class Split:
    """The budget percents of [Knowledge], [Known Facts] and [Past Conversations]: each the most
    of max_working_memory_tokens its section may take (the server takes 0-100 each)."""

    knowledge: int
    known_facts: int
    recall: int

    @property
    def label(self) -> str:
        return f"{self.knowledge}/{self.known_facts}/{self.recall}"


DEFAULT_SPLIT = Split(25, 25, 50)  # the server's defaults (MemoryConfig)
SWEEP = "25/25/50,34/33/33,20/20/60,40/20/40,20/40/40,50/25/25,10/30/60,30/10/60"
MAX_SPLITS = 10


def split_of(text: str) -> Split:
    """ "K/F/R" as a Split. Each percent is 0-100 (the server's rule); together at most 100 here, so
    that every split promises the optional sections no more than the whole budget."""
    parts = text.strip().split("/")
    if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"split {text!r} is not three whole percents K/F/R (e.g. 25/25/50)")
    knowledge, known_facts, recall = (int(p) for p in parts)
    if max(knowledge, known_facts, recall) > 100:
        raise ValueError(f"split {text!r}: each percent must be 0-100")
    if knowledge + known_facts + recall > 100:
        raise ValueError(f"split {text!r} sums to {knowledge + known_facts + recall}, more than 100")
    return Split(knowledge, known_facts, recall)


def splits_of(text: str) -> tuple[Split, ...]:
    """A comma-separated list of splits, the default split first (the others are read against
    it), each once, at most MAX_SPLITS."""
    try:
        given = [split_of(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    splits = tuple(dict.fromkeys([DEFAULT_SPLIT, *given]))
    if len(splits) > MAX_SPLITS:
        raise argparse.ArgumentTypeError(
            f"{len(splits)} splits (the default {DEFAULT_SPLIT.label} included): at most {MAX_SPLITS}"
        )
    return splits


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help="directory with sessions.jsonl, observations.jsonl and questions.jsonl",
    )
    parser.add_argument(
        "--embedder",
        default="minilm",
        choices=("minilm", "minilm-fp32", "hashing"),
        help="the server's embedder",
    )
    parser.add_argument(
        "--splits",
        type=splits_of,
        default=splits_of(SWEEP),
        help=f"knowledge/known-facts/recall budget percents to sweep, comma-separated (default {SWEEP}; "
        f"{DEFAULT_SPLIT.label} is always measured; at most {MAX_SPLITS})",
    )
    parser.add_argument(
        "--limit", type=int, default=0, help="ask only the first N answerable questions of each conversation"
    )
    parser.add_argument("--recall-top-k", type=int, default=5, help="recall_top_k (eval-recall's 5)")
    parser.add_argument("--knowledge-top-k", type=int, default=5, help="knowledge_top_k (server default 5)")
    parser.add_argument("--memory-top-k", type=int, default=5, help="memory_top_k (server default 5)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
