"""`episodic erase --user U [--agent A]`: everything held about one user erased through a
running server (EraseUser; the key, EPISODIC_API_KEY, decides the tenant and the agents, as
for every call), and its receipt printed: readable lines, or the API's JSON with `--json`.
Erasing again removes nothing more and prints a receipt of zeros."""

from __future__ import annotations

import argparse
import sys

import grpc

from episodic.cli.transfer import add_connection_flags, connect
from episodic.edges.grpc.erase_client import Erased, erase_user
from episodic.edges.grpc.transfer_client import failed

INDENT = "    "


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    erase = commands.add_parser(
        "erase", help="erase everything held about one user, through a running server; print the receipt"
    )
    erase.add_argument("--user", required=True, help="the user to erase")
    erase.add_argument(
        "--agent", default="", help="only this agent's data of the user [default: every agent's]"
    )
    erase.add_argument("--json", action="store_true", help="print the receipt as the API returns it")
    add_connection_flags(erase)
    erase.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Exit 0 with the receipt printed; 1 when the server refused or could not be reached."""
    channel, auth = connect(args)
    try:
        with channel:
            erased = erase_user(channel, auth, args.user, args.agent)
    except grpc.RpcError as exc:
        print(f"episodic: erase failed: {failed(exc)}", file=sys.stderr)
        return 1
    print(erased.json if args.json else readable(erased, args.user, args.agent))
    return 0


def readable(erased: Erased, user: str, agent: str) -> str:
    """One line saying what was removed, then the receipt field by field."""
    of = f" of agent {agent}" if agent else ""
    episodes, messages = dict(erased.removed)["episodes"], dict(erased.removed)["messages"]
    memories = dict(erased.removed)["memories"]
    fields = [
        ("erasure id", erased.erasure_id),
        ("erase time", erased.erase_time),
        ("user hash", f"{erased.user_hash} (what the audit log keeps, never the id)"),
        *((name, str(count)) for name, count in erased.removed),
        ("storage scrubbed", "yes" if erased.storage_scrubbed else "no"),
    ]
    width = max(len(name) for name, _ in fields)
    return "\n".join(
        [
            f"erased user {user}{of}: {episodes} episodes, {messages} messages, {memories} memories",
            *(f"{INDENT}{name:<{width}}  {value}" for name, value in fields),
        ]
    )
