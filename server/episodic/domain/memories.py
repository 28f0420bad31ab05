"""Long-term memories: statements about one user of one agent, distilled from episodes or
written by the client, and each episode's session data. Values and rules only. Pure.

Lifecycle: a memory is PENDING while it sits in an open episode's working memory (rendered
in that episode's contexts) and PROMOTED once in long-term storage (embedded, indexed,
recalled for the user). Rules for duplicates and contradictions: `domain/memory_merge.py`.
"""

from __future__ import annotations

import enum
import hashlib
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from episodic.domain.model import JsonObject
from episodic.domain.recall import Scope, Signal

# A memory's last_recalled_at is written at most this often.
RECALL_MARK_EVERY = timedelta(minutes=1)


class MemoryKind(enum.StrEnum):
    FACT = "fact"
    PREFERENCE = "preference"
    EVENT = "event"


class MemoryState(enum.StrEnum):
    PENDING = "pending"
    PROMOTED = "promoted"


class MemoryOrigin(enum.StrEnum):
    CLIENT = "client"
    EXTRACTED = "extracted"


class Placement(enum.StrEnum):
    LAZY = "lazy"
    EAGER = "eager"


class Outcome(enum.StrEnum):
    CREATED = "created"
    UNCHANGED = "unchanged"
    MERGED = "merged"
    SUPERSEDED_OLDER = "superseded_older"


@dataclass(frozen=True, slots=True)
class Source:
    origin: MemoryOrigin
    episode_id: str = ""
    from_seq: int = 0
    to_seq: int = 0


@dataclass(frozen=True, slots=True)
class Memory:
    tenant_id: str
    memory_id: str
    agent_id: str
    user_id: str
    text: str
    kind: MemoryKind
    source: Source
    state: MemoryState
    created_at: datetime
    updated_at: datetime
    topics: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    event_time: datetime | None = None
    expires_at: datetime | None = None
    last_recalled_at: datetime | None = None
    superseded_by: str = ""
    episode_id: str = ""  # PENDING: the open episode that holds it
    merge_count: int = 0
    fingerprint: str = ""  # of what the client sent (idempotency of client ids)
    metadata: JsonObject = field(default_factory=dict)  # the client's own fields, as given

    @property
    def scope(self) -> Scope:
        return Scope(self.tenant_id, self.agent_id, self.user_id)


@dataclass(frozen=True, slots=True)
class ExtractedMemory:
    """What an extractor finds in an episode: a statement and the messages that state it."""

    text: str
    kind: MemoryKind
    from_seq: int
    to_seq: int
    topics: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    event_time: datetime | None = None


@dataclass(frozen=True, slots=True)
class MemoryHit:
    memory: Memory
    score: float
    signals: tuple[Signal, ...] = ()


@dataclass(frozen=True, slots=True)
class SessionData:
    tenant_id: str
    episode_id: str
    data: JsonObject = field(default_factory=dict)
    version: int = 0  # 0: never written (or expired)
    updated_at: datetime | None = None
    expires_at: datetime | None = None

    @property
    def etag(self) -> str:
        return f'"v{self.version}"' if self.version else ""


def normalized(text: str) -> str:
    """What exact-duplicate detection compares: case, width, spacing and end punctuation
    folded."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(folded.split()).rstrip(".!?;: ")


def text_key(text: str) -> str:
    return hashlib.sha256(normalized(text).encode()).hexdigest()


def extracted_id(episode_id: str, text: str) -> str:
    """Ids of extracted memories are derived, so extracting an episode twice (a crash, a
    lease that ran out) writes each memory once."""
    digest = hashlib.sha256(f"{episode_id}\x00{normalized(text)}".encode()).hexdigest()
    return f"mem_x{digest[:31]}"


def mentioned(values: Sequence[str]) -> frozenset[str]:
    return frozenset(normalized(v) for v in values if v.strip())
