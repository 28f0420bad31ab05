"""`episodic export` and `episodic import`: a user's data to an export file and back, through
a running server (the key decides the tenant and the agents, as for every call).

An export file is a zip: the parts (episodes/000001.jsonl, ..., memories.jsonl) and
manifest.json, written last. It is written to a temporary file beside the target and renamed
only once the manifest arrived and every part's sha256 matched it: an interrupted or
refused export (the user erased meanwhile) leaves no file. `--from openai-chat` and
`--from mem0` load other systems' exports through the public API instead (see
docs/data-ownership.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import zipfile
from pathlib import Path

import grpc

from episodic import config
from episodic.cli.healthcheck import client_channel, probe_target, probe_tls
from episodic.edges.grpc.foreign_imports import import_foreign
from episodic.edges.grpc.transfer_client import (
    MAX_RECEIVE_BYTES,
    Auth,
    TransferError,
    export_user,
    failed,
    import_export,
)


def add_transfer_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = commands.add_parser("export", help="write everything held about one user to an export file")
    export.add_argument("--user", required=True, help="the user to export")
    export.add_argument(
        "--agent", default="", help="only this agent's data [default: every agent the key may use]"
    )
    export.add_argument("--out", required=True, help="the export file to write (a zip)")
    export.add_argument("--replace", action="store_true", help="overwrite --out if it exists")
    add_connection_flags(export)
    export.set_defaults(run=_export)
    load = commands.add_parser(
        "import", help="load an export file (or another system's export) into a server"
    )
    load.add_argument("file", help="the file to import")
    load.add_argument("--user", default="", help="import under this user id instead of the file's")
    load.add_argument(
        "--from",
        dest="source",
        choices=("episodic", "openai-chat", "mem0"),
        default="episodic",
        help="the file's format [default: an `episodic export` file]",
    )
    load.add_argument("--agent", default="", help="--from openai-chat / mem0: the agent to import into")
    add_connection_flags(load)
    load.set_defaults(run=_import)


def add_connection_flags(parser: argparse.ArgumentParser) -> None:
    """--address and the TLS flags of a command that calls a running server."""
    parser.add_argument("--address", default=None, help="HOST:PORT of the server [default: EPISODIC_ADDRESS]")
    parser.add_argument("--tls", action="store_true", help="speak TLS, trusting the system's CAs")
    parser.add_argument(
        "--tls-ca", default="", help="PEM CA that signed the server's certificate (implies --tls)"
    )
    parser.add_argument(
        "--tls-server-name", default="", help="name on the server's certificate, if not the host"
    )


def connect(args: argparse.Namespace) -> tuple[grpc.Channel, Auth]:
    """The channel to the server the flags name, and the key (EPISODIC_API_KEY) as metadata."""
    address = str(args.address or config.address_of_process())
    tls = probe_tls(args.tls_ca, "", "", args.tls_server_name, args.tls)
    key = config.api_key_of_process()
    auth = (("authorization", f"Bearer {key}"),) if key else ()
    return client_channel(probe_target(address), tls, MAX_RECEIVE_BYTES), auth


# --- export ----------------------------------------------------------------------------------


def _export(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if out.exists() and not args.replace:
        return _say(f"episodic: {out} exists; pass --replace to overwrite it", 2)
    channel, auth = connect(args)
    started = time.monotonic()
    temporary = out.with_name(f".{out.name}.partial")
    try:
        with channel:
            exported = export_user(channel, auth, args.user, args.agent, temporary)
        os.replace(temporary, out)
    except grpc.RpcError as exc:
        temporary.unlink(missing_ok=True)
        return _say(f"episodic: export failed: {failed(exc)}; no file was written", 1)
    except (TransferError, OSError) as exc:
        temporary.unlink(missing_ok=True)
        return _say(f"episodic: export failed: {exc}; no file was written", 1)
    elapsed = max(time.monotonic() - started, 1e-9)
    counts = exported.counts
    print(
        f"exported user to {out}: {exported.parts - 1} episodes, {counts.get('message', 0)} messages, "
        f"{counts.get('memory', 0)} memories, {exported.records} records in {elapsed:.1f} s "
        f"({counts.get('message', 0) / elapsed:.0f} messages/s)"
    )
    return 0


# --- import ----------------------------------------------------------------------------------


def _import(args: argparse.Namespace) -> int:
    if not Path(args.file).is_file():  # a device or a pipe could be read without end
        return _say(f"episodic: import failed: {args.file} is not a regular file", 1)
    channel, auth = connect(args)
    started = time.monotonic()
    try:
        with channel:
            if args.source != "episodic":
                line = import_foreign(channel, auth, args.source, Path(args.file), args.agent, args.user)
            else:
                line = import_export(channel, auth, Path(args.file), args.user)
    except grpc.RpcError as exc:
        return _say(f"episodic: import failed: {failed(exc)}", 1)
    except (TransferError, OSError, ValueError, zipfile.BadZipFile) as exc:
        return _say(f"episodic: import failed: {exc}", 1)
    print(f"{line} in {time.monotonic() - started:.1f} s")
    return 0


def _say(line: str, code: int) -> int:
    print(line, file=sys.stderr)
    return code
