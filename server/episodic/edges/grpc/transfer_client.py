"""`episodic export` and `episodic import` on the wire: the gRPC calls of our own server's
ExportUser and ImportUser, the stream of an export written to a zip and checked against its
manifest, an export file read back as requests. The command (cli/transfer.py) handles files,
flags and what is printed; only the gRPC edge and the clients import the generated stubs."""

from __future__ import annotations

import itertools
import json
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import grpc

from episodic.domain.transfer import MANIFEST_FILE, MAX_RECORD_BYTES, PartHasher
from episodic.v1 import episode_service_pb2 as pb
from episodic.v1.episode_service_pb2_grpc import EpisodeServiceStub

Auth = tuple[tuple[str, str], ...]
CHUNK_BYTES = 1024 * 1024
MAX_RECEIVE_BYTES = 64 * 1024 * 1024  # an export response holds up to ~1 MiB of records
MAX_MANIFEST_BYTES = 64 * 1024 * 1024  # far above the manifest of any history a request can carry
TIMEOUT_SECONDS = 24 * 3600.0  # a whole history streams in one call; a dead peer ends it sooner


class TransferError(Exception):
    """A refused or failed transfer: one line for the operator."""


def failed(exc: grpc.RpcError) -> TransferError:
    code = exc.code() if isinstance(exc, grpc.Call) else grpc.StatusCode.UNKNOWN
    details = (exc.details() if isinstance(exc, grpc.Call) else "") or ""
    return TransferError(f"{code.name}: {details}")


@dataclass(frozen=True, slots=True)
class Exported:
    """What an export wrote: its parts (the episodes' and memories.jsonl), records, and
    records by type."""

    parts: int
    records: int
    counts: dict[str, int]


def export_user(channel: grpc.Channel, auth: Auth, user_id: str, agent_id: str, path: Path) -> Exported:
    """ExportUser's stream written to `path` (a zip), checked against its manifest."""
    request = pb.ExportUserRequest(user_id=user_id, agent_id=agent_id)
    stream = EpisodeServiceStub(channel).ExportUser(request, metadata=auth, timeout=TIMEOUT_SECONDS)
    manifest, counts = write_export(stream, path)
    return Exported(len(manifest.parts), sum(p.records for p in manifest.parts), counts)


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


def import_export(channel: grpc.Channel, auth: Auth, path: Path, user: str) -> str:
    """An export file sent in one ImportUser call (under `user`, or the file's when ""); the
    line that says what the server imported."""
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
