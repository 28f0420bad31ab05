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
import itertools
import json
import os
import sys
import time
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

import grpc

from episodic import config
from episodic.cli.foreign_imports import import_foreign
from episodic.cli.healthcheck import client_channel, probe_target, probe_tls
from episodic.domain.transfer import MANIFEST_FILE, MAX_RECORD_BYTES, PartHasher
from episodic.v1 import episode_service_pb2 as pb
from episodic.v1.episode_service_pb2_grpc import EpisodeServiceStub

CHUNK_BYTES = 1024 * 1024
MAX_RECEIVE_BYTES = 64 * 1024 * 1024  # an export response holds up to ~1 MiB of records
MAX_MANIFEST_BYTES = 64 * 1024 * 1024  # far above the manifest of any history a request can carry
TIMEOUT_SECONDS = 24 * 3600.0  # a whole history streams in one call; a dead peer ends it sooner


class TransferError(Exception):
    """A refused or failed transfer: one line for the operator."""


def add_transfer_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = commands.add_parser("export", help="write everything held about one user to an export file")
    export.add_argument("--user", required=True, help="the user to export")
    export.add_argument(
        "--agent", default="", help="only this agent's data [default: every agent the key may use]"
    )
    export.add_argument("--out", required=True, help="the export file to write (a zip)")
    export.add_argument("--replace", action="store_true", help="overwrite --out if it exists")
    _add_connection_flags(export)
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
    _add_connection_flags(load)
    load.set_defaults(run=_import)


def _add_connection_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--address", default=None, help="HOST:PORT of the server [default: EPISODIC_ADDRESS]")
    parser.add_argument("--tls", action="store_true", help="speak TLS, trusting the system's CAs")
    parser.add_argument(
        "--tls-ca", default="", help="PEM CA that signed the server's certificate (implies --tls)"
    )
    parser.add_argument(
        "--tls-server-name", default="", help="name on the server's certificate, if not the host"
    )


def _connect(args: argparse.Namespace) -> tuple[grpc.Channel, tuple[tuple[str, str], ...]]:
    address = str(args.address or config.address_of_process())
    tls = probe_tls(args.tls_ca, "", "", args.tls_server_name, args.tls)
    key = config.api_key_of_process()
    auth = (("authorization", f"Bearer {key}"),) if key else ()
    return client_channel(probe_target(address), tls, MAX_RECEIVE_BYTES), auth


def _failed(exc: grpc.RpcError) -> TransferError:
    code = exc.code() if isinstance(exc, grpc.Call) else grpc.StatusCode.UNKNOWN
    details = (exc.details() if isinstance(exc, grpc.Call) else "") or ""
    return TransferError(f"{code.name}: {details}")


# --- export ----------------------------------------------------------------------------------


def _export(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if out.exists() and not args.replace:
        return _say(f"episodic: {out} exists; pass --replace to overwrite it", 2)
    channel, auth = _connect(args)
    started = time.monotonic()
    temporary = out.with_name(f".{out.name}.partial")
    try:
        with channel:
            request = pb.ExportUserRequest(user_id=args.user, agent_id=args.agent)
            stream = EpisodeServiceStub(channel).ExportUser(request, metadata=auth, timeout=TIMEOUT_SECONDS)
            manifest, counts = write_export(stream, temporary)
        os.replace(temporary, out)
    except grpc.RpcError as exc:
        temporary.unlink(missing_ok=True)
        return _say(f"episodic: export failed: {_failed(exc)}; no file was written", 1)
    except (TransferError, OSError) as exc:
        temporary.unlink(missing_ok=True)
        return _say(f"episodic: export failed: {exc}; no file was written", 1)
    elapsed = max(time.monotonic() - started, 1e-9)
    records = sum(p.records for p in manifest.parts)
    print(
        f"exported user to {out}: {len(manifest.parts) - 1} episodes, {counts.get('message', 0)} messages, "
        f"{counts.get('memory', 0)} memories, {records} records in {elapsed:.1f} s "
        f"({counts.get('message', 0) / elapsed:.0f} messages/s)"
    )
    return 0


def write_export(
    stream: Iterable[pb.ExportUserResponse], path: Path
) -> tuple[pb.ExportManifest, dict[str, int]]:
    """Streams the parts into a zip and checks them against the manifest that ends the stream."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as archive:
        manifest, hashes, counts = _write_parts(stream, archive)
        if manifest is None:
            raise TransferError("the stream ended before the manifest: the export is incomplete")
        for expected in manifest.parts:
            got = hashes.get(expected.name, PartHasher(expected.name)).part()
            if (got.records, got.sha256) != (expected.records, expected.sha256):
                raise TransferError(f"part {expected.name} does not match the manifest")
            if expected.name not in hashes:
                archive.writestr(expected.name, b"")
        archive.writestr(MANIFEST_FILE, json.dumps(_manifest_json(manifest), indent=2) + "\n")
    return manifest, counts


def _write_parts(
    stream: Iterable[pb.ExportUserResponse], archive: zipfile.ZipFile
) -> tuple[pb.ExportManifest | None, dict[str, PartHasher], dict[str, int]]:
    hashes: dict[str, PartHasher] = {}
    counts: dict[str, int] = {}
    part, handle = "", None
    try:
        for response in stream:
            if response.HasField("manifest"):
                return response.manifest, hashes, counts
            if response.part != part:
                if handle is not None:
                    handle.close()
                part = response.part
                handle = archive.open(part, "w", force_zip64=True)
                hashes[part] = PartHasher(part)
            assert handle is not None
            for record in response.records:
                hashes[part].add(record)
                handle.write(record.encode() + b"\n")
                kind = record[9 : record.find('"', 9)] if record.startswith('{"type":"') else ""
                counts[kind] = counts.get(kind, 0) + 1
        return None, hashes, counts
    finally:
        if handle is not None:
            handle.close()


def _manifest_json(m: pb.ExportManifest) -> dict[str, object]:
    return {
        "format": m.format,
        "version": m.version,
        "export_time": m.export_time.ToJsonString(),
        "user_id": m.user_id,
        "agent_id": m.agent_id,
        "parts": [{"name": p.name, "records": p.records, "sha256": p.sha256} for p in m.parts],
    }


# --- import ----------------------------------------------------------------------------------


def _import(args: argparse.Namespace) -> int:
    if not Path(args.file).is_file():  # a device or a pipe could be read without end
        return _say(f"episodic: import failed: {args.file} is not a regular file", 1)
    channel, auth = _connect(args)
    started = time.monotonic()
    try:
        with channel:
            if args.source != "episodic":
                line = import_foreign(channel, auth, args.source, Path(args.file), args.agent, args.user)
            else:
                line = _import_export(channel, auth, Path(args.file), args.user)
    except grpc.RpcError as exc:
        return _say(f"episodic: import failed: {_failed(exc)}", 1)
    except (TransferError, OSError, ValueError, zipfile.BadZipFile) as exc:
        return _say(f"episodic: import failed: {exc}", 1)
    print(f"{line} in {time.monotonic() - started:.1f} s")
    return 0


def _import_export(channel: grpc.Channel, auth: tuple[tuple[str, str], ...], path: Path, user: str) -> str:
    with zipfile.ZipFile(path) as archive:
        requests = _Requests(read_export(archive, user))  # the manifest is read before any call
        try:
            done = EpisodeServiceStub(channel).ImportUser(requests, metadata=auth, timeout=TIMEOUT_SECONDS)
        except grpc.RpcError:
            if requests.failure is not None:  # gRPC says only "Exception iterating requests!"
                raise TransferError(str(requests.failure)) from requests.failure
            raise
    return (
        f"imported {done.episodes_imported} episodes ({done.episodes_unchanged} already there), "
        f"{done.messages_imported} messages, {done.memories_imported} memories "
        f"({done.memories_unchanged} already there), {done.model_calls_imported} model calls; "
        f"{done.digests_pending} digests being made"
    )


class _Requests:
    """An import's requests, keeping what stopped them: gRPC reads them on its own thread and
    answers any exception there with UNKNOWN, naming nothing."""

    def __init__(self, requests: Iterator[pb.ImportUserRequest]) -> None:
        self._requests = requests
        self.failure: Exception | None = None

    def __iter__(self) -> _Requests:
        return self

    def __next__(self) -> pb.ImportUserRequest:
        try:
            return next(self._requests)
        except StopIteration:
            raise
        except Exception as exc:
            self.failure = exc
            raise


def read_export(archive: zipfile.ZipFile, user: str) -> Iterator[pb.ImportUserRequest]:
    """The manifest (read and checked now, before any request is sent), then each part's
    lines in chunks; the server checks every part's hash and record."""
    manifest = read_manifest(archive)
    missing = [p.name for p in manifest.parts if p.name not in archive.NameToInfo]
    if missing:
        raise TransferError(f"part {missing[0]} is missing from the file")
    return _requests(archive, manifest, user)


def _requests(
    archive: zipfile.ZipFile, manifest: pb.ExportManifest, user: str
) -> Iterator[pb.ImportUserRequest]:
    yield pb.ImportUserRequest(manifest=manifest, user_id=user)
    for part in manifest.parts:
        with archive.open(part.name) as handle:
            batch: list[str] = []
            size = 0
            for line in _lines(handle, part.name):
                batch.append(line)
                size += len(line)
                if size >= CHUNK_BYTES:
                    yield pb.ImportUserRequest(part=part.name, records=batch)
                    batch, size = [], 0
            yield pb.ImportUserRequest(part=part.name, records=batch)


def _lines(handle: IO[bytes], part: str) -> Iterator[str]:
    """A part's records, each read with a bound: a file of one endless line is refused at
    the record's limit, not read whole into memory."""
    for number in itertools.count(1):
        line = handle.readline(MAX_RECORD_BYTES + 2)
        if not line:
            return
        if len(line) > MAX_RECORD_BYTES + 1 or (
            len(line) == MAX_RECORD_BYTES + 1 and not line.endswith(b"\n")
        ):
            raise TransferError(f"{part} record {number} is over {MAX_RECORD_BYTES} bytes")
        try:
            yield line.decode().removesuffix("\n")
        except UnicodeDecodeError as exc:
            raise TransferError(f"{part} record {number} is not UTF-8 text") from exc


def read_manifest(archive: zipfile.ZipFile) -> pb.ExportManifest:
    """manifest.json as the first request carries it; what is malformed is named."""
    try:
        info = archive.getinfo(MANIFEST_FILE)
    except KeyError as exc:
        raise TransferError(f"no {MANIFEST_FILE} in the file: not an episodic export") from exc
    with archive.open(info) as handle:
        data = handle.read(MAX_MANIFEST_BYTES + 1)
    if len(data) > MAX_MANIFEST_BYTES:
        raise TransferError(f"{MANIFEST_FILE} is over {MAX_MANIFEST_BYTES} bytes")
    try:
        raw = json.loads(data)
    except ValueError as exc:  # UnicodeDecodeError included
        raise TransferError(f"{MANIFEST_FILE} is not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise TransferError(f"{MANIFEST_FILE} must be a JSON object")
    parts = raw.get("parts", [])
    if not isinstance(parts, list):
        raise TransferError(f"{MANIFEST_FILE}: parts must be a list")
    manifest = pb.ExportManifest(
        format=_text(raw, "format"), version=_integer(raw, "version"),
        user_id=_text(raw, "user_id"), agent_id=_text(raw, "agent_id"),
        parts=[_part(p, i) for i, p in enumerate(parts)],
    )  # fmt: skip
    export_time = _text(raw, "export_time")
    if export_time:
        try:
            manifest.export_time.FromJsonString(export_time)
        except ValueError as exc:
            raise TransferError(f"{MANIFEST_FILE}: export_time is not an RFC 3339 time: {exc}") from exc
    return manifest


def _part(raw: object, index: int) -> pb.ExportPart:
    where = f"parts[{index}]."
    if not isinstance(raw, dict):
        raise TransferError(f"{MANIFEST_FILE}: parts[{index}] must be an object")
    return pb.ExportPart(
        name=_text(raw, "name", where, required=True),
        records=_integer(raw, "records", where, required=True),
        sha256=_text(raw, "sha256", where, required=True),
    )


def _text(raw: dict[str, object], name: str, where: str = "", *, required: bool = False) -> str:
    value = raw.get(name, None if required else "")
    if not isinstance(value, str):
        raise TransferError(f"{MANIFEST_FILE}: {where}{name} must be a string")
    return value


def _integer(raw: dict[str, object], name: str, where: str = "", *, required: bool = False) -> int:
    value = raw.get(name, None if required else 0)
    if not isinstance(value, int) or isinstance(value, bool) or not -(2**63) <= value < 2**63:
        raise TransferError(f"{MANIFEST_FILE}: {where}{name} must be an integer (64 bits)")
    return value


def _say(line: str, code: int) -> int:
    print(line, file=sys.stderr)
    return code
