"""The recall bench's command-line flags. Imports only argparse: the CLI builds every parser
at start-up, and the bench's heavy imports must wait until it actually runs."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

DEFAULT_SIZES = (1_000, 100_000, 1_000_000)


@dataclass(frozen=True, slots=True)
class Options:
    sizes: tuple[int, ...]
    calls: int
    digest_episodes: int
    embed_queries: int
    max_seconds: float
    seed: int
    json_path: str


def add_flags(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--sizes", type=_sizes, default=DEFAULT_SIZES, help="indexed episodes (default 1000,100000,1000000)")
    add("--calls", type=_positive, default=1000, help="measured calls per RPC and mode (default 1000)")
    add(
        "--digest-episodes",
        type=_count,
        default=100,
        help="episodes digested by the MiniLM pipeline to time it; 0 skips (default 100)",
    )
    add(
        "--embed-queries",
        type=_count,
        default=200,
        help="questions embedded by MiniLM to time query embedding; 0 skips (default 200)",
    )
    add(
        "--max-seconds",
        type=_seconds,
        default=20.0,
        help="time budget of one row (warm-up included): a row stops short of --calls when it runs "
        "out, and says how many calls it made (default 20)",
    )
    add("--seed", type=int, default=0, help="seed of the synthetic corpus and the queries (default 0)")
    add("--json", dest="json_path", default="", metavar="PATH", help="also write the raw figures to PATH")


def options_from(args: argparse.Namespace) -> Options:
    return Options(
        sizes=args.sizes,
        calls=args.calls,
        digest_episodes=args.digest_episodes,
        embed_queries=args.embed_queries,
        max_seconds=args.max_seconds,
        seed=args.seed,
        json_path=args.json_path,
    )


def _sizes(raw: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part.replace("_", "")) for part in raw.split(",") if part.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"want integers like 1000,100000, got {raw!r}") from exc
    if not sizes or min(sizes) < 10:
        raise argparse.ArgumentTypeError("every size must be at least 10 (one user per 10 episodes)")
    return sizes


def _seconds(raw: str) -> float:
    value = float(raw)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {raw}")
    return value


def _positive(raw: str) -> int:
    value = int(raw)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {raw}")
    return value


def _count(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {raw}")
    return value
