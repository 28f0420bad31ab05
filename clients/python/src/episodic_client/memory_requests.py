"""Request builders of MemoryService, shared by both clients. Kinds and placements take
names ("fact", "lazy") or enum numbers."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from google.protobuf import field_mask_pb2

from episodic_client import values
from episodic_client.v1 import memory_pb2, memory_service_pb2
from episodic_client.values import JsonObject, MemoryStateLike, SearchModeLike, memory_state

KindLike = str | int
_KINDS = {name.removeprefix("MEMORY_KIND_").lower(): number for name, number in memory_pb2.MemoryKind.items()}
_PLACEMENTS = {
    name.removeprefix("MEMORY_PLACEMENT_").lower(): number
    for name, number in memory_service_pb2.MemoryPlacement.items()
}


def memory_kind(value: KindLike) -> memory_pb2.MemoryKind.ValueType:
    if isinstance(value, int):
        return memory_pb2.MemoryKind.ValueType(value)
    key = value.strip().lower().removeprefix("memory_kind_")
    if key not in _KINDS:
        raise ValueError(f"unknown memory kind {value!r}; use fact, preference or event")
    return _KINDS[key]


def memory_input(
    text: str,
    kind: KindLike = "fact",
    *,
    memory_id: str = "",
    topics: Sequence[str] = (),
    entities: Sequence[str] = (),
    event_time: datetime | None = None,
    expire_time: datetime | None = None,
    metadata: JsonObject | None = None,
) -> memory_service_pb2.MemoryInput:
    """`metadata`: the client's own JSON object (at most 16 KiB), returned as given."""
    return memory_service_pb2.MemoryInput(
        memory_id=memory_id,
        text=text,
        kind=memory_kind(kind),
        topics=topics,
        entities=entities,
        event_time=values.timestamp(event_time),
        expire_time=values.timestamp(expire_time),
        metadata=values.struct(metadata),
    )


def create_memories(
    memories: Sequence[memory_service_pb2.MemoryInput],
    *,
    agent_id: str = "",
    user_id: str = "",
    episode_id: str = "",
    placement: str | int = 0,
    keep_separate: bool = False,
) -> memory_service_pb2.CreateMemoriesRequest:
    """Without episode_id: EAGER for (agent_id, user_id); with one: LAZY (PENDING) unless
    placement says "eager". `keep_separate` (EAGER): each memory is stored as given under its
    id, never merged into a repeat nor superseding an older one."""
    number = placement if isinstance(placement, int) else _PLACEMENTS[placement.strip().lower()]
    return memory_service_pb2.CreateMemoriesRequest(
        agent_id=agent_id,
        user_id=user_id,
        episode_id=episode_id,
        placement=memory_service_pb2.MemoryPlacement.ValueType(number),
        memories=memories,
        keep_separate=keep_separate,
    )


def search_memories(
    agent_id: str,
    user_id: str,
    query: str = "",
    *,
    mode: SearchModeLike = "hybrid",
    top_k: int = 0,
    min_score: float | None = None,
    kinds: Sequence[KindLike] = (),
    topics: Sequence[str] = (),
    entities: Sequence[str] = (),
    after: datetime | None = None,
    before: datetime | None = None,
    episode_id: str = "",
    include_superseded: bool = False,
) -> memory_service_pb2.SearchMemoriesRequest:
    """`topics` / `entities`: only memories with at least one of them; `after` / `before`:
    created (EVENT: happening) in that window."""
    return memory_service_pb2.SearchMemoriesRequest(
        agent_id=agent_id,
        user_id=user_id,
        query=query,
        mode=values.search_mode(mode),
        top_k=top_k,
        min_score=min_score,
        kinds=[memory_kind(k) for k in kinds],
        topics=topics,
        entities=entities,
        after=values.timestamp(after),
        before=values.timestamp(before),
        episode_id=episode_id,
        include_superseded=include_superseded,
    )


def list_memories(
    agent_id: str,
    user_id: str,
    *,
    state: MemoryStateLike = 0,
    episode_id: str = "",
    include_superseded: bool = False,
    topics: Sequence[str] = (),
    page_size: int = 0,
    page_token: str = "",
) -> memory_service_pb2.ListMemoriesRequest:
    """`state`: only "pending" or "promoted" memories (0, the default: both); `topics`: only
    memories with at least one of them."""
    return memory_service_pb2.ListMemoriesRequest(
        agent_id=agent_id,
        user_id=user_id,
        state=memory_state(state),
        episode_id=episode_id,
        include_superseded=include_superseded,
        topics=topics,
        page_size=page_size,
        page_token=page_token,
    )


def update_memory(
    memory: memory_pb2.Memory, update_mask: Sequence[str]
) -> memory_service_pb2.UpdateMemoryRequest:
    return memory_service_pb2.UpdateMemoryRequest(
        memory=memory, update_mask=field_mask_pb2.FieldMask(paths=list(update_mask))
    )


def update_session_data(
    episode_id: str, data: JsonObject, *, etag: str = "", ttl: timedelta | None = None
) -> memory_service_pb2.UpdateSessionDataRequest:
    """`data` is merged (RFC 7396: None removes a key)."""
    return memory_service_pb2.UpdateSessionDataRequest(
        episode_id=episode_id, data=values.struct(data), etag=etag, ttl=values.duration(ttl)
    )
