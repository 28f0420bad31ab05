"""A model derived from another (the int8 graph from the packaged MiniLM), kept on disk so a
start loads it instead of deriving it again.

Two files per derived model in the cache directory: `NAME.onnx`, the derived bytes, and
`NAME.json`, what they were derived from and their own checksum:

    {"source_sha256": "...", "recipe": "...", "sha256": "...", "bytes": 23040318}

A cached model is used only when the source's checksum and the recipe (the derivation and
the versions of the libraries that ran it) are the ones asked for and the graph's bytes hash
to `sha256`; anything else (absent, unreadable, altered, half written, another source or
recipe) is derived again and rewritten. Each file is written to a temporary name in the
same directory, flushed and then renamed over the old one, so a crash leaves either the old
file or the new one, never a partial one; the graph is renamed before its description, and
a description that does not match its graph is a miss, so no crash point leaves a pair that
passes. The checksums catch corruption and partial writes, not a deliberate change by
someone who can write the directory (who could rewrite both files).

A directory that cannot be created or written costs only speed: the model is derived in
memory and one WARNING says why.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("episodic.embed")

CACHE_SUBDIRECTORY = Path("episodic") / "models"
_EXPECTED_MISSES = frozenset(
    {"not cached yet", "cache unreadable", "source model changed", "derivation changed"}
)


def default_cache_dir(xdg_cache_home: str = "", home: Path | None = None) -> Path | None:
    """`$XDG_CACHE_HOME/episodic/models` when `xdg_cache_home` (the variable's value, handed in
    by the caller) is an absolute path, else `~/.cache/episodic/models`; None when there is no
    home directory to put it in."""
    if xdg_cache_home and Path(xdg_cache_home).is_absolute():
        return Path(xdg_cache_home) / CACHE_SUBDIRECTORY
    try:
        base = home if home is not None else Path.home()
    except RuntimeError:  # no HOME and no password-database entry
        return None
    return base / ".cache" / CACHE_SUBDIRECTORY


@dataclass(frozen=True, slots=True)
class Derivation:
    """What to derive: `name` (a file-name stem), from `source` whose sha256 is
    `source_sha256` (already verified by the caller), by `derive`, described by `recipe`."""

    name: str
    source: bytes
    source_sha256: str
    recipe: str
    derive: Callable[[bytes], bytes]


def load_or_derive(derivation: Derivation, directory: Path | None) -> bytes:
    """The derived bytes: from `directory` when a verified copy is there, else derived (and
    then cached there when possible). `directory` None derives in memory, silently."""
    if directory is None:
        return derivation.derive(derivation.source)
    graph, description = directory / f"{derivation.name}.onnx", directory / f"{derivation.name}.json"
    cached, miss = _read_verified(graph, description, derivation)
    if cached is not None:
        return cached
    # A first start, an upgrade: expected. A copy that fails its checks: worth a look.
    level = logging.INFO if miss in _EXPECTED_MISSES else logging.WARNING
    log.log(
        level,
        "deriving the int8 embedding model (cached for later starts)",
        extra={"cache": str(graph), "reason": miss},
    )
    derived = derivation.derive(derivation.source)
    entry = {
        "source_sha256": derivation.source_sha256,
        "recipe": derivation.recipe,
        "sha256": hashlib.sha256(derived).hexdigest(),
        "bytes": len(derived),
    }
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomically(graph, derived)
        write_atomically(description, json.dumps(entry, indent=2).encode() + b"\n")
    except OSError as exc:
        log.warning(
            "cannot cache the int8 embedding model: every start derives it again (~2.5 s)",
            extra={"cache": str(directory), "error_type": type(exc).__name__, "reason": exc.strerror or ""},
        )
    return derived


def _read_verified(graph: Path, description: Path, derivation: Derivation) -> tuple[bytes | None, str]:
    """The cached bytes if they pass every check, else None and why not (for the log)."""
    try:
        entry = json.loads(description.read_bytes())
    except (FileNotFoundError, NotADirectoryError):
        return None, "not cached yet"
    except OSError:
        return None, "cache unreadable"  # then likely unwritable too: that warning follows
    except ValueError:
        return None, "unreadable description"
    if not isinstance(entry, dict):
        return None, "unreadable description"
    if entry.get("source_sha256") != derivation.source_sha256:
        return None, "source model changed"
    if entry.get("recipe") != derivation.recipe:
        return None, "derivation changed"
    try:
        data = graph.read_bytes()
    except OSError:
        return None, "unreadable graph"
    if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
        return None, "checksum mismatch"
    return data, ""


def write_atomically(path: Path, data: bytes) -> None:
    """`path` holds `data` or what it held before, whatever happens midway: written to a
    temporary file beside it, flushed to disk, then renamed over it."""
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
