"""The export format (ExportUser / ImportUser, `episodic export` / `episodic import`): parts
of JSON-lines records with a manifest of counts and sha256. Values and rules only. Pure.

An export is the user's rows as the log keeps them: one part per episode (the episode, then
its messages, tool-call records, summaries, digest, session data and model calls) and one
part of long-term memories, last, because memories name the episodes they came from. An
import checks each part whole against the manifest before it writes any of it, so a part
(one episode) is imported whole or not at all. docs/data-ownership.md documents the records.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from episodic.domain.model import Episode
from episodic.errors import FailedPrecondition, InvalidArgument

FORMAT = "episodic-export"
VERSION = 1
MEMORIES_PART = "memories.jsonl"
MANIFEST_FILE = "manifest.json"
# Record types, in the order an episode's part holds them.
EPISODE_TYPES = ("episode", "message", "tool_call", "summary", "digest", "session_data", "model_call")
MAX_RECORD_BYTES = 8 * 1024 * 1024  # a message of the largest content, with room for its JSON
# An import holds one part until it is checked whole (one episode, one transaction): this
# bounds what one import holds, whatever a manifest claims (its records are ~3x as rows).
MAX_PART_BYTES = 64 * 1024 * 1024
MAX_PARTS = 1_000_000


def episode_part(index: int) -> str:
    """Episodes are numbered, not named by id: ids may hold characters a file system or an
    archive tool treats specially."""
    return f"episodes/{index:06d}.jsonl"


@dataclass(frozen=True, slots=True)
class Part:
    name: str
    records: int
    sha256: str


@dataclass(frozen=True, slots=True)
class Manifest:
    user_id: str
    agent_id: str
    exported_at: datetime
    parts: tuple[Part, ...]
    format: str = FORMAT
    version: int = VERSION


class PartHasher:
    """The sha256 and count of one part, as its records go by."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.records = 0
        self._hash = hashlib.sha256()

    def add(self, record: str) -> None:
        self._hash.update(record.encode())
        self._hash.update(b"\n")
        self.records += 1

    def part(self) -> Part:
        return Part(self.name, self.records, self._hash.hexdigest())


class IncomingPart:
    """One part of an import as its records arrive, held until it is checked whole; refused
    as soon as it holds more than its manifest entry says, or more than this server holds."""

    def __init__(self, expected: Part) -> None:
        self.expected = expected
        self.lines: list[str] = []
        self._hasher = PartHasher(expected.name)
        self._size = 0

    @property
    def name(self) -> str:
        return self.expected.name

    def add(self, text: str) -> None:
        where = f"{self.name} record {len(self.lines) + 1}"
        if len(self.lines) >= self.expected.records:
            raise InvalidArgument.of("records", f"{where}: the manifest has {self.expected.records} records")
        if len(text) > MAX_RECORD_BYTES:
            raise InvalidArgument.of("records", f"{where} is over {MAX_RECORD_BYTES} bytes")
        self._size += len(text) + 1
        if self._size > MAX_PART_BYTES:
            raise InvalidArgument.of(
                "records", f"part {self.name} is over {MAX_PART_BYTES} bytes, the most this server imports"
            )
        self._hasher.add(text)
        self.lines.append(text)

    def checked(self) -> list[str]:
        """The part's lines once they match the manifest entry."""
        check_part(self.expected, self._hasher.part())
        return self.lines


def encode(record: dict[str, object]) -> str:
    """One line of a part: compact JSON, non-ASCII kept (the hash is over these bytes)."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def decode(part: str, line: int, text: str) -> dict[str, object]:
    if len(text) > MAX_RECORD_BYTES:
        raise InvalidArgument.of("records", f"{part} record {line} is over {MAX_RECORD_BYTES} bytes")
    try:
        record = json.loads(text)
    except ValueError as exc:
        raise InvalidArgument.of("records", f"{part} record {line} is not JSON: {exc}") from exc
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        raise InvalidArgument.of("records", f'{part} record {line} is not an object with a "type"')
    return record


def check_manifest(m: Manifest) -> None:
    """A newer format is refused by version, not half-read; the parts must be named as this
    server writes them, each once, memories last."""
    if m.format != FORMAT:
        raise InvalidArgument.of("manifest.format", f"must be {FORMAT!r}, got {m.format!r}")
    if m.version > VERSION:
        raise FailedPrecondition(
            f"the export is format version {m.version}; this server reads up to {VERSION}: upgrade it",
            reason="EXPORT_VERSION_UNSUPPORTED",
        )
    if m.version < 1:
        raise InvalidArgument.of("manifest.version", f"must be 1 or more, got {m.version}")
    if not m.user_id:
        raise InvalidArgument.of("manifest.user_id", "is required")
    names = [p.name for p in m.parts]
    if len(names) > MAX_PARTS or len(set(names)) != len(names):
        raise InvalidArgument.of("manifest.parts", "must name each part once")
    expected = [episode_part(i + 1) for i in range(len(names) - 1)] + [MEMORIES_PART]
    if names != expected:
        raise InvalidArgument.of(
            "manifest.parts", f"must be episodes/000001.jsonl, ... then {MEMORIES_PART}, in that order"
        )
    for p in m.parts:
        if p.records < 0 or len(p.sha256) != 64:
            raise InvalidArgument.of("manifest.parts", f"{p.name}: records and a hex sha256 are required")


def check_part(expected: Part, got: Part) -> None:
    """A part that differs from its manifest entry (truncated, tampered) is refused by name."""
    if got.records != expected.records or got.sha256 != expected.sha256:
        raise InvalidArgument.of(
            "records",
            f"part {expected.name} does not match the manifest (records {got.records} of "
            f"{expected.records}, sha256 {'matches' if got.sha256 == expected.sha256 else 'differs'}): "
            "the export is truncated or was changed",
        )


@dataclass(slots=True)
class ImportTally:
    episodes_imported: int = 0
    episodes_unchanged: int = 0
    messages_imported: int = 0
    memories_imported: int = 0
    memories_unchanged: int = 0
    model_calls_imported: int = 0
    digests_pending: int = 0
    agents: set[str] = field(default_factory=set)


def records_of(records: Sequence[dict[str, object]], kind: str) -> list[dict[str, object]]:
    return [r for r in records if r["type"] == kind]


@dataclass(frozen=True, slots=True)
class ImportedRecord:
    """One record of an import: where it is in the file (for errors), its kind, its value as
    the domain reads it (None for a kind without a reader) and its row as the store writes it."""

    where: str
    kind: str
    value: object
    row: dict[str, Any]


@dataclass(slots=True)
class EpisodeRows:
    """One episode's records as rows of the log, checked, with the importer's user: what the
    store writes in one transaction. Kinds as in EPISODE_TYPES (digests are not kept: the
    server makes them again)."""

    episode: dict[str, Any]
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    records: list[ImportedRecord] = field(default_factory=list)  # every record read, in order

    @property
    def episode_id(self) -> str:
        return str(self.episode["episode_id"])

    @property
    def agent_id(self) -> str:
        return str(self.episode["agent_id"])

    def of(self, kind: str) -> list[dict[str, Any]]:
        return self.rows.get(kind, [])


@dataclass(frozen=True, slots=True)
class ErasureWatch:
    """The user's erasures already committed when an import began: any other one found by a
    later write of the import (inside its transaction) was committed meanwhile, and aborts
    it, so an erasure wins over an import in flight."""

    user_hash: str
    known: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class EpisodeImported:
    episode: Episode
    created: bool
    messages: int = 0
    model_calls: int = 0
    digest_pending: bool = False
