"""Flags of `episodic-lab bench-knowledge`."""

from __future__ import annotations

import argparse


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--chunks", type=int, default=100_000, help="chunks stored in the one agent")
    parser.add_argument("--paragraphs", type=int, default=20, help="sections per document (one chunk each)")
    parser.add_argument("--calls", type=int, default=500, help="measured calls per RPC")
    parser.add_argument("--seconds", type=float, default=30.0, help="time budget per RPC")
    parser.add_argument("--seed", type=int, default=7, help="seed of the synthetic documents and queries")
    parser.add_argument(
        "--no-build-context",
        action="store_true",
        help="skip BuildContext with knowledge on against off",
    )
    parser.add_argument(
        "--server-flag",
        action="append",
        default=[],
        metavar="FLAG",
        help="a flag for `episodic serve` (repeat it; e.g. --server-flag=--knowledge-cache-bytes=1048576)",
    )
