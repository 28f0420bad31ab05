"""The report's command-line flags. Imports only argparse and the presets: the CLI builds
every parser at start-up, and the report's heavy imports must wait until it runs."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

# The shared bench's parsers: the same flags must read the same way in every command.
from episodic_lab.bench.options import DEFAULT_ADMIN_URL
from episodic_lab.bench.options import _backends as backends_list
from episodic_lab.report.presets import PRESETS, Preset


@dataclass(frozen=True, slots=True)
class Options:
    preset: Preset
    out: Path
    backends: tuple[str, ...]
    postgres_admin_url: str


def add_flags(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--size", choices=tuple(PRESETS), default="small", help="small (~10 min on 2 cores) or full")
    add("--out", type=Path, required=True, metavar="DIR", help="where report.md and the PNGs are written")
    add(
        "--backends",
        type=backends_list,
        default=("sqlite",),
        help="sqlite,postgres: the server's database in the sections that start one (default sqlite)",
    )
    add(
        "--postgres-admin-url",
        default=DEFAULT_ADMIN_URL,
        help=f"creates the throwaway databases ({DEFAULT_ADMIN_URL})",
    )


def options_from(args: argparse.Namespace) -> Options:
    return Options(PRESETS[args.size], args.out, args.backends, args.postgres_admin_url)
