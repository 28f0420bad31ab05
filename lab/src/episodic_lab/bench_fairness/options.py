"""The fairness bench's command-line flags. Imports only argparse (and the shared bench's
parsers): the CLI builds every parser at start-up, and the heavy imports must wait."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

# The shared bench's parsers: the same flags must read the same way in every command.
from episodic_lab.bench.options import BACKENDS, DEFAULT_ADMIN_URL
from episodic_lab.bench.options import _positive as positive_number

# Tenant B's methods, in rotation (victim.py's METHODS; named here: this module stays light).
B_METHODS = ("AddMessage", "BuildContext", "SearchEpisodes")
# Enough of B's calls that a phase's p99 is not its slowest call: 5 a second per method, so
# a 20 s phase holds ~100 of each (p99 is then about the second slowest).
DEFAULT_B_RATE = 15.0

ABUSES = (
    "flood",
    "bulk-memories",
    "watches",
    "unread-streams",
    "inspector-searches",
    "erase-loop",
    "slowloris",
)


@dataclass(frozen=True, slots=True)
class Options:
    abuses: tuple[str, ...]
    seconds: float  # each phase: the baseline, then every abuse
    b_rate: float  # tenant B's calls per second (and as many Echo calls)
    backend: str
    embedder: str  # "" leaves the server's default
    server_flags: tuple[str, ...]  # more `episodic serve` flags, as its command line takes them
    honour_retry: bool  # tenant A waits as a RetryInfo (or Retry-After) says
    postgres_admin_url: str
    json_path: str


def add_flags(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--abuses", type=_abuses, default=ABUSES, help=f"some of {','.join(ABUSES)} (default all)")
    add("--seconds", type=positive_number, default=20.0, help="length of each phase (default 20)")
    add(
        "--b-rate",
        type=positive_number,
        default=DEFAULT_B_RATE,
        help=f"tenant B's calls per second, over its {len(B_METHODS)} methods (default {DEFAULT_B_RATE:g})",
    )
    add("--backend", choices=BACKENDS, default="sqlite", help="database of the server (default sqlite)")
    add("--embedder", default="", help="the server's --embedder (default: the server's own default)")
    add(
        "--server-flag",
        dest="server_flags",
        action="append",
        type=_server_flag,
        default=[],
        metavar="KEY=VALUE",
        help="pass --KEY VALUE to `episodic serve` (repeatable), e.g. tenant-max-active=4",
    )
    add(
        "--abuser-honours-retry",
        dest="honour_retry",
        action="store_true",
        help="tenant A waits as each refusal's RetryInfo says (default: retries at once)",
    )
    add(
        "--postgres-admin-url",
        default=DEFAULT_ADMIN_URL,
        help=f"creates the bench database ({DEFAULT_ADMIN_URL})",
    )
    add("--json", dest="json_path", default="", metavar="PATH", help="also write the raw figures to PATH")


def options_from(args: argparse.Namespace) -> Options:
    return Options(
        abuses=args.abuses,
        seconds=args.seconds,
        b_rate=args.b_rate,
        backend=args.backend,
        embedder=args.embedder,
        server_flags=tuple(part for pair in args.server_flags for part in pair),
        honour_retry=args.honour_retry,
        postgres_admin_url=args.postgres_admin_url,
        json_path=args.json_path,
    )


def _abuses(raw: str) -> tuple[str, ...]:
    chosen = tuple(part.strip() for part in raw.split(",") if part.strip())
    unknown = set(chosen) - set(ABUSES)
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"want some of {','.join(ABUSES)}, got {raw!r}")
    return tuple(abuse for abuse in ABUSES if abuse in chosen)  # always in the same order


def _server_flag(raw: str) -> tuple[str, str]:
    key, equals, value = raw.partition("=")
    key = key.strip().lstrip("-").replace("_", "-")
    if not equals or not key:
        raise argparse.ArgumentTypeError(f"want KEY=VALUE, got {raw!r}")
    return f"--{key}", value
