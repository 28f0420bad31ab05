"""Shape rules of memories and session data: what a client may send, what an update may
change, how session data merges. Pure; every violation is collected and named by field."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from episodic.domain.memories import (
    Memory,
    MemoryKind,
    MemoryOrigin,
    MemoryState,
    Placement,
    SessionData,
    Source,
)
from episodic.domain.model import JsonObject, JsonValue
from episodic.domain.validation import (
    Limits,
    Violations,
    check_id,
    check_json,
    check_text,
    check_time,
    text_problem,
)
from episodic.errors import Aborted

MAX_TEXT_CHARS = 2000
MAX_LABELS = 16  # topics, entities
MAX_TOPIC_CHARS = 64
MAX_ENTITY_CHARS = 128
MAX_BATCH = 100
MAX_PENDING_PER_EPISODE = 200
MAX_SESSION_DATA_BYTES = 64 * 1024
MAX_METADATA_BYTES = 16 * 1024
MIN_TTL = timedelta(seconds=1)
MAX_TTL = timedelta(days=100 * 366)  # far beyond any session, and now + ttl stays a datetime
MUTABLE = ("text", "kind", "topics", "entities", "event_time", "expire_time", "metadata")
IMMUTABLE = (
    "memory_id", "agent_id", "user_id", "source", "state", "create_time", "update_time",
    "last_recall_time", "superseded_by", "episode_id", "merge_count",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class MemoryDraft:
    """A memory as a client sends it; `kind` None: not given (or unknown)."""

    text: str = ""
    kind: MemoryKind | None = None
    memory_id: str = ""
    topics: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    event_time: datetime | None = None
    expires_at: datetime | None = None
    from_seq: int = 0
    to_seq: int = 0
    metadata: JsonObject = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CreateRequest:
    drafts: Sequence[MemoryDraft]
    agent_id: str = ""
    user_id: str = ""
    episode_id: str = ""
    placement: Placement | None = None  # None: LAZY with an episode, EAGER without
    keep_separate: bool = False  # no merging into repeats, no superseding: the client's ids rule


@dataclass(frozen=True, slots=True)
class Holder:
    """Where created memories go: their scope, and the episode they come from (if any)."""

    tenant_id: str
    agent_id: str
    user_id: str
    episode_id: str
    placement: Placement


def check_create(r: CreateRequest, now: datetime) -> Placement:
    v = Violations()
    if r.episode_id:
        check_id(v, "episode_id", r.episode_id)
        check_id(v, "agent_id", r.agent_id, required=False)
        check_id(v, "user_id", r.user_id, required=False)
    else:
        check_id(v, "agent_id", r.agent_id)
        check_id(v, "user_id", r.user_id)
    placement = r.placement or (Placement.LAZY if r.episode_id else Placement.EAGER)
    if placement is Placement.LAZY and not r.episode_id:
        v.add("episode_id", "is required for MEMORY_PLACEMENT_LAZY (the open episode that holds them)")
    if placement is Placement.LAZY and r.keep_separate:
        v.add(
            "keep_separate", "applies to MEMORY_PLACEMENT_EAGER only (pending memories merge when promoted)"
        )
    if not 1 <= len(r.drafts) <= MAX_BATCH:
        v.add("memories", f"must hold 1-{MAX_BATCH} memories, got {len(r.drafts)}")
    seen: dict[str, int] = {}
    for i, draft in enumerate(r.drafts[:MAX_BATCH]):
        check_draft(v, f"memories[{i}]", draft, now)
        if draft.memory_id and seen.setdefault(draft.memory_id, i) != i:
            v.add(f"memories[{i}].memory_id", f"repeats memories[{seen[draft.memory_id]}].memory_id")
    v.raise_if_any()
    return placement


def check_draft(v: Violations, prefix: str, d: MemoryDraft, now: datetime) -> None:
    check_id(v, f"{prefix}.memory_id", d.memory_id, required=False)
    if not d.text.strip():
        v.add(f"{prefix}.text", "is required")
    elif len(d.text) > MAX_TEXT_CHARS:
        v.add(f"{prefix}.text", f"must be at most {MAX_TEXT_CHARS} characters, got {len(d.text)}")
    else:
        check_text(v, f"{prefix}.text", d.text, MAX_TEXT_CHARS * 4)
    if d.kind is None:
        v.add(f"{prefix}.kind", "is required: MEMORY_KIND_FACT, MEMORY_KIND_PREFERENCE or MEMORY_KIND_EVENT")
    _check_labels(v, f"{prefix}.topics", d.topics, MAX_TOPIC_CHARS)
    _check_labels(v, f"{prefix}.entities", d.entities, MAX_ENTITY_CHARS)
    check_time(v, f"{prefix}.event_time", d.event_time)
    check_time(v, f"{prefix}.expire_time", d.expires_at)
    if d.expires_at is not None and d.expires_at <= now:
        v.add(f"{prefix}.expire_time", "must be in the future")
    if d.from_seq < 0 or d.to_seq < 0 or d.to_seq < d.from_seq:
        v.add(f"{prefix}.to_seq", "must be >= from_seq >= 0")
    check_json(v, f"{prefix}.metadata", d.metadata, _METADATA_LIMITS)


_METADATA_LIMITS = Limits(max_json_bytes=MAX_METADATA_BYTES)


def _check_labels(v: Violations, field_name: str, labels: Sequence[str], max_chars: int) -> None:
    if len(labels) > MAX_LABELS:
        v.add(field_name, f"at most {MAX_LABELS}, got {len(labels)}")
    for i, label in enumerate(labels[:MAX_LABELS]):
        if not label.strip() or len(label) > max_chars or text_problem(label):
            v.add(f"{field_name}[{i}]", f"must be 1-{max_chars} characters without NUL or surrogates")


def fingerprint(d: MemoryDraft) -> str:
    """What makes two creates with one client id "the same content". Metadata keys are
    sorted: a protobuf Struct's fields come in no fixed order, so the same metadata sent
    twice may arrive ordered differently (a mem0 import run again was refused as a conflict)."""
    body = json.dumps(
        [d.text, d.kind, list(d.topics), list(d.entities), _iso(d.event_time), _iso(d.expires_at),
         d.from_seq, d.to_seq, d.metadata],
        ensure_ascii=False, sort_keys=True,
    )  # fmt: skip
    return hashlib.sha256(body.encode()).hexdigest()


def _iso(t: datetime | None) -> str:
    return t.isoformat() if t else ""


def new_memory(
    draft: MemoryDraft, memory_id: str, holder: Holder, origin: MemoryOrigin, now: datetime
) -> Memory:
    assert draft.kind is not None
    lazy = holder.placement is Placement.LAZY
    return Memory(
        tenant_id=holder.tenant_id,
        memory_id=memory_id,
        agent_id=holder.agent_id,
        user_id=holder.user_id,
        text=draft.text.strip(),
        kind=draft.kind,
        source=Source(origin, holder.episode_id, draft.from_seq, draft.to_seq),
        state=MemoryState.PENDING if lazy else MemoryState.PROMOTED,
        created_at=now,
        updated_at=now,
        topics=_unique(draft.topics),
        entities=_unique(draft.entities),
        event_time=draft.event_time,
        expires_at=draft.expires_at,
        episode_id=holder.episode_id if lazy else "",
        fingerprint=fingerprint(draft),
        metadata=draft.metadata,
    )


def _unique(labels: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(label.strip() for label in labels))


def apply_mask(memory: Memory, draft: MemoryDraft, mask: Sequence[str], now: datetime) -> Memory:
    """AIP-134: only the named fields change; an empty mask is refused (nothing to do is
    almost always a client bug)."""
    v = Violations()
    if not mask:
        v.add("update_mask", f"is required; updatable: {', '.join(MUTABLE)}")
    for path in mask:
        if path in IMMUTABLE:
            v.add("update_mask", f"{path!r} cannot be changed")
        elif path not in MUTABLE:
            v.add("update_mask", f"unknown field {path!r}; updatable: {', '.join(MUTABLE)}")
    v.raise_if_any()
    merged = _merged_draft(memory, draft, mask)
    check_draft(
        v, "memory", merged if "expire_time" in mask else dataclasses.replace(merged, expires_at=None), now
    )
    v.raise_if_any()
    assert merged.kind is not None
    return dataclasses.replace(
        memory,
        text=merged.text.strip(),
        kind=merged.kind,
        topics=_unique(merged.topics),
        entities=_unique(merged.entities),
        event_time=merged.event_time,
        expires_at=merged.expires_at,
        metadata=merged.metadata,
        updated_at=now,
    )


def _merged_draft(memory: Memory, draft: MemoryDraft, mask: Sequence[str]) -> MemoryDraft:
    current = MemoryDraft(
        text=memory.text, kind=memory.kind, memory_id=memory.memory_id, topics=memory.topics,
        entities=memory.entities, event_time=memory.event_time, expires_at=memory.expires_at,
        metadata=memory.metadata,
    )  # fmt: skip
    given = {
        "text": draft.text, "kind": draft.kind, "topics": draft.topics, "entities": draft.entities,
        "event_time": draft.event_time, "expire_time": draft.expires_at, "metadata": draft.metadata,
    }  # fmt: skip
    changes = {("expires_at" if path == "expire_time" else path): given[path] for path in mask}
    return dataclasses.replace(current, **changes)  # type: ignore[arg-type]


# --- session data ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionUpdate:
    episode_id: str
    patch: JsonObject = field(default_factory=dict)
    etag: str = ""
    ttl: timedelta | None = None


def check_session_update(u: SessionUpdate, limits: Limits) -> None:
    v = Violations()
    check_id(v, "episode_id", u.episode_id)
    if not u.patch:
        v.add("data", "is required: an object of keys to set (null removes a key)")
    check_json(v, "data", u.patch, dataclasses.replace(limits, max_json_bytes=MAX_SESSION_DATA_BYTES))
    if u.ttl is not None and not MIN_TTL <= u.ttl <= MAX_TTL:
        v.add("ttl", f"must be between 1 second and {MAX_TTL.days} days")
    v.raise_if_any()


def merge_patch(target: JsonValue, patch: JsonValue) -> JsonValue:
    """RFC 7396: objects merge key by key, null removes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    merged: dict[str, JsonValue] = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def merged_session(current: SessionData, u: SessionUpdate, now: datetime) -> SessionData:
    """The next version. A stale etag is ABORTED; merged data over the cap is INVALID_ARGUMENT
    (the client sent too much), and nothing is written."""
    if u.etag and u.etag != current.etag:
        raise Aborted(
            f"session data changed since etag {u.etag}: read it again (GetSessionData) and retry",
            reason="ETAG_MISMATCH",
        )
    data = merge_patch(current.data, u.patch)
    assert isinstance(data, dict)
    size = len(json.dumps(data, ensure_ascii=False).encode())
    if size > MAX_SESSION_DATA_BYTES:
        v = Violations()
        v.add(
            "data", f"the merged session data would be {size} bytes, over the cap of {MAX_SESSION_DATA_BYTES}"
        )
        v.raise_if_any()
    expires = now + u.ttl if u.ttl is not None else current.expires_at
    return SessionData(current.tenant_id, current.episode_id, data, current.version + 1, now, expires)
