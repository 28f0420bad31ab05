"""The soak's command-line flags. Imports only argparse (and the shared bench's parsers):
the CLI builds every parser at start-up, and the heavy imports must wait."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

# The shared bench's parsers: the same flags must read the same way in every command.
from episodic_lab.bench.options import DEFAULT_ADMIN_URL
from episodic_lab.bench.options import _backends as backends_list
from episodic_lab.bench.options import _positive as positive_number

WARMUP_SHARE_CAP = 1 / 3  # a short soak still keeps most of its time after the warm-up


@dataclass(frozen=True, slots=True)
class Options:
    backends: tuple[str, ...]
    seconds: float  # the whole load, warm-up included
    warmup: float  # the RSS that growth is judged against is taken at this point of the load
    streams: int  # BuildContext calls in flight
    appenders: int  # AddMessage calls in flight
    conversations: int  # open episodes the load shares out
    report_every: float  # seconds between progress lines
    max_rss_growth_pct: float  # past this, RSS after the warm-up is not bounded: the soak fails
    postgres_admin_url: str
    json_path: str


def add_flags(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--backends", type=backends_list, default=("sqlite",), help="sqlite,postgres (default sqlite)")
    add("--seconds", type=positive_number, default=60.0, help="length of the load (default 60)")
    add(
        "--warmup",
        type=positive_number,
        default=10.0,
        help="seconds of load before the baseline RSS, at most a third of --seconds (default 10)",
    )
    add("--streams", type=_at_least_one, default=64, help="concurrent BuildContext streams (default 64)")
    add("--appenders", type=_at_least_one, default=8, help="concurrent AddMessage workers (default 8)")
    add("--conversations", type=_at_least_one, default=64, help="open conversations (default 64)")
    add(
        "--report-every", type=positive_number, default=5.0, help="seconds between progress lines (default 5)"
    )
    add(
        "--max-rss-growth-pct",
        type=positive_number,
        default=25.0,
        help="most RSS growth after the warm-up, in %% of the RSS then, still bounded (default 25)",
    )
    add(
        "--postgres-admin-url",
        default=DEFAULT_ADMIN_URL,
        help=f"creates the soak database ({DEFAULT_ADMIN_URL})",
    )
    add("--json", dest="json_path", default="", metavar="PATH", help="also write the figures to PATH")


def options_from(args: argparse.Namespace) -> Options:
    return Options(
        backends=args.backends,
        seconds=args.seconds,
        warmup=min(args.warmup, args.seconds * WARMUP_SHARE_CAP),
        streams=args.streams,
        appenders=args.appenders,
        conversations=args.conversations,
        report_every=args.report_every,
        max_rss_growth_pct=args.max_rss_growth_pct,
        postgres_admin_url=args.postgres_admin_url,
        json_path=args.json_path,
    )


def _at_least_one(raw: str) -> int:
    value = int(raw)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {raw}")
    return value
