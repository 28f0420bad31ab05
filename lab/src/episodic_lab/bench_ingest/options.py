"""Flags of `episodic-lab bench-ingest`."""

from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_DATA = Path("../shared/eval/scifact-train")


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help="a BEIR-layout set whose corpus.jsonl is loaded (default: SciFact's train split)",
    )
    parser.add_argument(
        "--documents", type=int, default=1000, help="the corpus's first N documents are loaded (0: all)"
    )
    parser.add_argument(
        "--grid",
        default="1x1,2x1,1x2,2x2",
        help="server choices, comma-separated BULKxINTRA (--bulk-embed-threads x --embedder-threads) or "
        "default (no flag: the server's defaults, e.g. an older server's)",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="times the grid is run, in turn (figures: median per choice)"
    )
    parser.add_argument(
        "--embedder", default="minilm", choices=("minilm", "minilm-fp32"), help="the server's embedder"
    )
    parser.add_argument(
        "--probe-interval",
        type=float,
        default=0.1,
        help="seconds between probes (an Echo, then a SearchKnowledge) while loading and after",
    )
    parser.add_argument(
        "--drift-texts",
        type=int,
        default=100,
        help="chunks embedded in process to measure int8 batching's drift and speed (0: skip)",
    )
    parser.add_argument(
        "--server-flag",
        action="append",
        default=[],
        metavar="FLAG",
        help="a flag for `episodic serve` (repeat it)",
    )
