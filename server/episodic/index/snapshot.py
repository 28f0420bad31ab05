"""The snapshot file of a vector index, and the digest that identifies its content.

Layout (one file, so replacing it is one atomic rename):

    MAGIC | float32 little-endian rows of every scope, scope after scope | manifest JSON |
    manifest length (8 bytes, little-endian) | sha256 of everything before it (32 bytes)

The manifest comes after the vectors so a writer can stream one scope at a time instead of
first gathering every vector into one array (1.5 GB at 1M vectors of dimension 384). It
lists each scope with its keys in row order. The trailing hash catches truncated or damaged
files; the caller still reconciles the loaded keys against SQL with `digest_of`."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from io import BufferedReader
from pathlib import Path
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

from episodic.domain.recall import Scope
from episodic.index.shard import Matrix

MAGIC = b"EPISODIC-VECTORS\n"
VERSION = 1
_LENGTH_BYTES = 8
_HASH_BYTES = 32
_FLOAT = np.dtype("<f4")
_DIGEST_ROWS = 4096


class SnapshotError(ValueError):
    """The file is not a snapshot this code can read, or was damaged."""


@dataclass(frozen=True, slots=True)
class ScopeRows:
    scope: Scope
    keys: list[str]
    matrix: Matrix


def digest_of(pairs: Iterable[tuple[Scope, str]]) -> str:
    """sha256 (hex) identifying a set of (scope, key) pairs: over the (tenant_id, agent_id,
    user_id, key) tuples sorted in Python string order, each written as one line of four
    fields `<length in code points>:<text>,` in UTF-8. The same recipe over the rows in SQL
    tells whether an index holds exactly them."""
    rows = sorted((scope.tenant_id, scope.agent_id, scope.user_id, key) for scope, key in pairs)
    hasher = hashlib.sha256()
    # Lengths make the encoding unambiguous whatever the ids contain; hashing a few
    # thousand lines per update keeps 1M keys at about a second.
    for start in range(0, len(rows), _DIGEST_ROWS):
        lines = "".join(
            f"{len(t)}:{t},{len(a)}:{a},{len(u)}:{u},{len(k)}:{k},\n"
            for t, a, u, k in rows[start : start + _DIGEST_ROWS]
        )
        hasher.update(lines.encode("utf-8", "surrogatepass"))
    return hasher.hexdigest()


def write(path: Path, dim: int, each_scope: Callable[[Callable[[ScopeRows], None]], None]) -> None:
    """Writes a snapshot atomically: to a temporary file in the same directory, fsynced, then
    renamed over `path`. `each_scope` calls its argument once per scope; the rows it passes
    need only stay valid during that call."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with tmp.open("wb") as file:
            _write_body(_HashingWriter(file), dim, each_scope)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def read(path: Path, dim: int) -> Iterator[ScopeRows]:
    """Yields the scopes of a snapshot. The file hash is checked after the last scope, so
    a consumer must read to the end before trusting what it got."""
    with path.open("rb") as file:
        manifest = _read_manifest(file, dim)
        file.seek(0)
        hasher = hashlib.sha256(_read_exactly(file, len(MAGIC)))
        try:
            for entry in manifest["scopes"]:
                yield _read_scope(file, hasher, entry, dim)
        except (KeyError, TypeError) as err:
            raise SnapshotError(f"{path}: malformed manifest") from err
        hasher.update(_read_exactly(file, _tail_start(file) - file.tell() + _LENGTH_BYTES))
        if hasher.digest() != _read_exactly(file, _HASH_BYTES):
            raise SnapshotError(f"{path}: content hash mismatch, the file is damaged")


class _HashingWriter:
    def __init__(self, file: IO[bytes]) -> None:
        self._file = file
        self.hasher = hashlib.sha256()

    def write(self, data: bytes | memoryview) -> None:
        self.hasher.update(data)
        self._file.write(data)


def _write_body(
    out: _HashingWriter, dim: int, each_scope: Callable[[Callable[[ScopeRows], None]], None]
) -> None:
    scopes: list[dict[str, Any]] = []

    def one(rows: ScopeRows) -> None:
        if rows.matrix.shape != (len(rows.keys), dim):
            raise ValueError(f"scope {rows.scope}: matrix {rows.matrix.shape} does not fit {dim=}")
        out.write(_bytes_of(np.ascontiguousarray(rows.matrix, dtype=_FLOAT)))
        scope = rows.scope
        names = {"tenant_id": scope.tenant_id, "agent_id": scope.agent_id, "user_id": scope.user_id}
        scopes.append({**names, "keys": rows.keys})

    out.write(MAGIC)
    each_scope(one)
    manifest = json.dumps({"version": VERSION, "dim": dim, "scopes": scopes}).encode()
    out.write(manifest)
    out.write(len(manifest).to_bytes(_LENGTH_BYTES, "little"))
    out.write(out.hasher.digest())


def _read_manifest(file: BufferedReader, dim: int) -> dict[str, Any]:
    if _tail_start(file) < len(MAGIC) or _read_exactly(file, len(MAGIC)) != MAGIC:
        raise SnapshotError(f"{file.name}: not a vector snapshot")
    file.seek(-(_LENGTH_BYTES + _HASH_BYTES), os.SEEK_END)
    length = int.from_bytes(_read_exactly(file, _LENGTH_BYTES), "little")
    if length > _tail_start(file) - len(MAGIC):
        raise SnapshotError(f"{file.name}: damaged manifest length")
    file.seek(_tail_start(file) - length)
    try:
        manifest: dict[str, Any] = json.loads(_read_exactly(file, length))
    except ValueError as err:
        raise SnapshotError(f"{file.name}: unreadable manifest") from err
    if manifest.get("version") != VERSION:
        raise SnapshotError(f"{file.name}: snapshot version {manifest.get('version')}, expected {VERSION}")
    if manifest.get("dim") != dim:
        raise SnapshotError(f"{file.name}: vectors of dimension {manifest.get('dim')}, expected {dim}")
    return manifest


def _read_scope(file: BufferedReader, hasher: hashlib._Hash, entry: dict[str, Any], dim: int) -> ScopeRows:
    keys: list[str] = entry["keys"]
    matrix = np.empty((len(keys), dim), dtype=_FLOAT)
    buffer = _bytes_of(matrix)
    if file.readinto(buffer) != len(buffer):
        raise SnapshotError(f"{file.name}: truncated")
    hasher.update(buffer)
    scope = Scope(entry["tenant_id"], entry["agent_id"], entry["user_id"])
    return ScopeRows(scope, keys, matrix.astype(np.float32, copy=False))


def _bytes_of(matrix: NDArray[Any]) -> memoryview:
    """The bytes of a C-contiguous array, without a copy (also for an empty one)."""
    return matrix.reshape(-1).view(np.uint8).data


def _tail_start(file: BufferedReader) -> int:
    """Offset of the manifest length field."""
    return os.fstat(file.fileno()).st_size - _LENGTH_BYTES - _HASH_BYTES


def _read_exactly(file: BufferedReader, size: int) -> bytes:
    data = file.read(size)
    if len(data) != size:
        raise SnapshotError(f"{file.name}: truncated")
    return data


def _fsync_directory(directory: Path) -> None:
    # Makes the rename itself durable; some platforms cannot open a directory, and then the
    # rename is as durable as that platform makes it.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
