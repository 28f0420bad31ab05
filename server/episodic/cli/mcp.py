"""The `episodic mcp` subcommand: its flags (the settings it uses, plus --debug) and its run."""

from __future__ import annotations

import argparse
import asyncio
import logging

from episodic import config
from episodic.logs import configure_logging

HELP = "serve the Model Context Protocol: over stdio, or streamable HTTP with --mcp-address"


def add_command(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = commands.add_parser("mcp", help=HELP, description=HELP + " (see docs/mcp.md).")
    config.add_flags(parser, "mcp")
    parser.add_argument(
        "--debug", action="store_true", help="on a failure to start, print the full traceback too"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from episodic.cli.serve_mcp import serve_mcp  # the SDK and the engine load only for this command

    settings = config.load_process(args)
    configure_logging(settings.log_level)
    # The SDK logs what it is sent at INFO and below (a failed tool's text, request contents);
    # Episodic's logs never carry user content, so it is held to warnings.
    logging.getLogger("mcp").setLevel(logging.WARNING)
    asyncio.run(serve_mcp(settings))
    return 0
