"""The bench's command-line flags. Imports only argparse: the CLI builds every parser at
start-up, and the bench's heavy imports must wait until it actually runs."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

BACKENDS = ("sqlite", "postgres")
DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


@dataclass(frozen=True, slots=True)
class Options:
    backends: tuple[str, ...]
    seconds: float
    warmup: float
    concurrency: tuple[int, ...]
    postgres_admin_url: str
    json_path: str


def add_flags(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--backends", type=_backends, default=BACKENDS, help="sqlite,postgres (default both)")
    add("--seconds", type=_positive, default=3.0, help="measured seconds per cell (default 3)")
    add("--warmup", type=_positive, default=1.0, help="warm-up seconds per cell, <= --seconds (default 1)")
    add("--concurrency", type=_levels, default=(1, 16, 64), help="calls in flight (default 1,16,64)")
    add(
        "--postgres-admin-url",
        default=DEFAULT_ADMIN_URL,
        help=f"creates the bench database ({DEFAULT_ADMIN_URL})",
    )
    add("--json", dest="json_path", default="", metavar="PATH", help="also write the raw figures to PATH")


def options_from(args: argparse.Namespace) -> Options:
    return Options(
        backends=args.backends,
        seconds=args.seconds,
        warmup=min(args.warmup, args.seconds),
        concurrency=args.concurrency,
        postgres_admin_url=args.postgres_admin_url,
        json_path=args.json_path,
    )


def _positive(raw: str) -> float:
    value = float(raw)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {raw}")
    return value


def _levels(raw: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(part) for part in raw.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"want integers like 1,16,64, got {raw!r}") from exc
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError("every level must be at least 1")
    return levels


def _backends(raw: str) -> tuple[str, ...]:
    chosen = tuple(part.strip() for part in raw.split(",") if part.strip())
    unknown = set(chosen) - set(BACKENDS)
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"want some of {','.join(BACKENDS)}, got {raw!r}")
    return chosen
