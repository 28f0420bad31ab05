"""Erasure of one user's data: the receipt it returns and the hash its audit keeps. Pure."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime

from episodic.domain.recall import Scope

# What an erasure counts, in the order a receipt lists them.
KINDS = (
    "episodes",
    "messages",
    "tool_calls",
    "summaries",
    "digests",
    "digest_vectors",
    "text_rows",
    "model_calls",
    "memories",
    "session_data",
)


def user_hash(tenant_id: str, user_id: str) -> str:
    """What the audit log keeps instead of the user id."""
    return hashlib.sha256(f"{tenant_id}:{user_id}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Erased:
    """What the store removed: rows per kind, and the erased episodes by (agent, episode)
    and memories by (scope, memory id), so their vectors can be taken out of the index."""

    counts: dict[str, int]
    episodes: list[tuple[str, str]] = field(default_factory=list)
    memories: list[tuple[Scope, str]] = field(default_factory=list)
    memory_vectors: int = 0  # of those memories, how many were in the memory index

    @property
    def vectors(self) -> int:
        """Vectors the erasure took out of every replica's indexes (their source in SQL)."""
        return self.counts.get("digest_vectors", 0) + self.memory_vectors


@dataclass(frozen=True, slots=True)
class Audit:
    """The audit row of one erasure: a hash of the user id, never the id."""

    erasure_id: str
    user_hash: str
    agent_id: str
    erased_at: datetime


@dataclass(frozen=True, slots=True)
class Receipt:
    erasure_id: str
    erased_at: datetime
    user_hash: str
    counts: dict[str, int]
    index_vectors: int
    storage_scrubbed: bool
