"""The context bench's command-line flags. Imports only argparse (and the shared bench's
parsers): the CLI builds every parser at start-up, and the heavy imports must wait."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

# The shared bench's parsers: the same flags must read the same way in both commands.
from episodic_lab.bench.options import DEFAULT_ADMIN_URL
from episodic_lab.bench.options import _backends as backends_list
from episodic_lab.bench.options import _levels as positive_integers
from episodic_lab.bench.options import _positive as positive_number

EMBEDDERS = ("hashing", "minilm")


@dataclass(frozen=True, slots=True)
class Options:
    backends: tuple[str, ...]
    seconds: float
    warmup: float
    concurrency: tuple[int, ...]
    history: tuple[int, ...]  # messages in the log of each measured conversation
    conversations: int  # warmed at once to measure RSS per active conversation
    embedder: str  # the server's
    embed_queries: int  # MiniLM query embeddings timed in this process; 0 skips
    same_message: bool  # one user message on every call (query-embedding cache hits)
    postgres_admin_url: str
    json_path: str
    plot_path: str


def add_flags(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--backends", type=backends_list, default=("sqlite",), help="sqlite,postgres (default sqlite)")
    add("--seconds", type=positive_number, default=3.0, help="measured seconds per cell (default 3)")
    add(
        "--warmup",
        type=positive_number,
        default=1.0,
        help="warm-up seconds per cell, <= --seconds (default 1)",
    )
    add(
        "--concurrency",
        type=positive_integers,
        default=(1, 16),
        help="BuildContext calls in flight (default 1,16)",
    )
    add(
        "--history",
        type=positive_integers,
        default=(100, 1_000, 10_000),
        help="messages in the log of the conversations timed one by one (default 100,1000,10000)",
    )
    add("--conversations", type=_count, default=200, help="warmed at once to measure RSS (default 200)")
    add("--embedder", choices=EMBEDDERS, default="hashing", help="the server's embedder (default hashing)")
    add(
        "--embed-queries",
        type=_count,
        default=200,
        help="questions MiniLM embeds in this process, to time what SEMANTIC/HYBRID recall adds; "
        "0 skips (default 200)",
    )
    add(
        "--same-message",
        action="store_true",
        help="send one user message on every call, so the server's query-embedding cache answers "
        "all but the first (default: a different message per call, as in a conversation)",
    )
    add(
        "--postgres-admin-url",
        default=DEFAULT_ADMIN_URL,
        help=f"creates the bench database ({DEFAULT_ADMIN_URL})",
    )
    add("--json", dest="json_path", default="", metavar="PATH", help="also write the raw figures to PATH")
    add("--plot", dest="plot_path", default="bench-context.png", metavar="PATH", help="latency plot (PNG)")


def options_from(args: argparse.Namespace) -> Options:
    return Options(
        backends=args.backends,
        seconds=args.seconds,
        warmup=min(args.warmup, args.seconds),
        concurrency=args.concurrency,
        history=tuple(sorted(set(args.history))),
        conversations=args.conversations,
        embedder=args.embedder,
        embed_queries=args.embed_queries,
        same_message=args.same_message,
        postgres_admin_url=args.postgres_admin_url,
        json_path=args.json_path,
        plot_path=args.plot_path,
    )


def _count(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {raw}")
    return value
